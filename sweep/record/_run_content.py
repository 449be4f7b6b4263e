"""What a trial becomes in MLflow: its id, tags, metrics, cell table and artifacts.

Pure functions of the result document (and the job dir's server log): no
MLflow calls here, so the mapping is testable and the ``Tracker`` only
moves the content. Every child run carries ``specsweep.result_id`` (a hash
of the document without its ``mlflow`` block), which is what makes uploads
idempotent.

Used by :class:`sweep.record.tracking.Tracker`.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping

from sweep import secrets
from sweep.record.result import TrialResult, clean_number
from sweep.score.names import LABELS, rounded

TAG_RESULT_ID = "specsweep.result_id"
TAG_KIND = "specsweep.kind"
TAG_COMPLETE = "specsweep.complete"
TAG_SWEEP_KEY = "specsweep.sweep_key"
TAG_PARENT = "mlflow.parentRunId"   # what MLflow's UI nests runs by
# pruned: stopped early on purpose by the sweeper's pruner (partial cells): not a failure, not a
# finished benchmark either; the run's "status" tag says pruned.
RUN_STATUS = {"ok": "FINISHED", "failed": "FAILED", "interrupted": "KILLED", "running": "KILLED",
              "pruned": "KILLED"}
# The matrix as metric series, step = concurrency: ``<section>/<what>ctx<context>``. MLflow's run
# page and chart view put a key's part before "/" into a section of its own, sections in name
# order before the headline figures' section: the numbers put throughput, then TTFT, then TPOT first.
CELL_SERIES = (("1 tok_s/", "output_tok_s"),
               ("2 ttft_ms/p50 ", "ttft_ms_p50"), ("2 ttft_ms/p99 ", "ttft_ms_p99"),
               ("3 tpot_ms/p50 ", "tpot_ms_p50"), ("3 tpot_ms/p99 ", "tpot_ms_p99"),
               ("4 itl_ms/p50 ", "itl_ms_p50"), ("4 itl_ms/p99 ", "itl_ms_p99"),
               ("5 per_stream_tok_s/", "per_stream_tok_s"),
               ("6 accept_len/", "accept_len"), ("6 accept_len/rate ", "accept_rate"),
               ("7 errors/", "errors"), ("8 usd_per_mtok/", "usd_per_mtok"),
               # judged against objective.slo (absent when no SLO is set)
               ("9 slo/attainment ", "slo_attainment"), ("9 slo/goodput_req_s ", "goodput_req_s"),
               ("9 slo/goodput_tok_s ", "goodput_tok_s"))
TOK_S_SERIES = CELL_SERIES[0][0]  # "1 tok_s/": output tok/s per context, step = concurrency


# Digits of a context in a metric key: MLflow sorts sections and charts by the key as a string
# (ctx1024, ctx4096, ctx60); zero-padded to the longest context a config may name they sort as numbers.
CONTEXT_DIGITS = 8  # compose.keys.MAX_CONTEXT (10,485,760) has 8


def context_key(context: int) -> str:
    """``ctx00000060``: a context as it sorts among keys and file names (old runs keep ``ctx60``)."""
    return f"ctx{int(context):0{CONTEXT_DIGITS}d}"


def cell_metric(prefix: str, context: int, suffix: str = "") -> str:
    """``1 tok_s/ctx00000060``, ``2 ttft_ms/p99 ctx00000060``, ``1 tok_s/ctx00000060 ci_low``."""
    return f"{prefix}{context_key(context)}" + (f" {suffix}" if suffix else "")
SERVER_LOG_MAX_BYTES = 16 * 1024 * 1024


@lru_cache(maxsize=1)
def git_sha() -> str | None:
    """HEAD of the specsweep checkout this code runs from; None when installed
    from a wheel (the package's parent must be the repository's top level)."""
    pkg = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(pkg), "rev-parse", "--show-toplevel", "HEAD"],
                             capture_output=True, text=True, timeout=5, check=True).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    if len(out) != 2 or Path(out[0]).resolve() != pkg.parent:
        return None
    return out[1]


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    return str(obj)


def normalize(result: TrialResult | Mapping[str, Any]) -> TrialResult:
    """The document as it reads back from disk (no NaN, only JSON types)."""
    doc = result.to_dict() if isinstance(result, TrialResult) else dict(result)
    return TrialResult.from_dict(json.loads(json.dumps(clean_number(doc), default=_json_default)))


def result_id(result: TrialResult) -> str:
    """Stable id of a result: a hash of everything but its ``mlflow`` block."""
    body = {k: v for k, v in result.to_dict().items() if k != "mlflow"}
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def sweep_key(sweep_dir: Path) -> str:
    return hashlib.sha256(str(Path(sweep_dir).resolve()).encode()).hexdigest()[:16]


def _ms(iso: str | None) -> int | None:
    import datetime as dt

    try:
        return int(dt.datetime.fromisoformat(str(iso)).timestamp() * 1000) if iso else None
    except ValueError:
        return None


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if x == x and abs(x) != float("inf") else None


def _server_version(info: Mapping[str, Any]) -> Any:
    for key in ("version", "server_version", "sglang_version", "vllm_version"):
        if info.get(key):
            return info[key]
    return None


def trial_tags(doc: TrialResult, rid: str, parent: str | None, job_dir: Path) -> dict[str, Any]:
    from sweep.record.naming import group_name
    from sweep.score.configs import config_id, group_id, stored_name

    trial, server = doc.trial, doc.server
    failure = doc.failure if not doc.ok else None
    tags: dict[str, Any] = {
        TAG_KIND: "trial", TAG_RESULT_ID: rid, TAG_PARENT: parent,
        "simulated": str(bool(doc.simulated)).lower(), "hardware": trial.hardware,
        "spec.algorithm": trial.spec, "fingerprint": doc.fingerprint,
        # one config, one id (sweep/score/configs.py): copies of a config share it across runs and sweeps
        "config.id": trial.config_id or config_id(doc), "config": stored_name(doc),
        # like with like: what the view groups by (the report's groups, named distinguishing part first)
        "group": group_name(doc), "group.id": group_id(doc),
        "status": doc.status, "failure.reason": failure.reason if failure else None,
        "failure.message": failure.message if failure else None, "sweep.id": trial.sweep_id,
        "sweep.job_num": trial.job_num, "git.sha": git_sha(),
        "mlflow.source.git.commit": git_sha(),
        "server.version": _server_version(server.info if server else {}),
        "server.reused": None if server is None or server.reused is None else str(bool(server.reused)).lower(),
        "overrides": " ".join(map(str, trial.overrides)),
        "specsweep.job_dir": trial.job_dir or str(job_dir),
        "workload": doc.config_section("workload").get("name"),
        **rounded_tags(doc),
    }
    optuna = doc.config_section("optuna")  # ++optuna.* from the search sweeper
    tags.update({f"optuna.{k}": optuna.get(k) for k in ("study_name", "trial_number")
                 if optuna.get(k) is not None})
    if failure is not None and failure.reason:
        tags["mlflow.note.content"] = (f"**{doc.status}**: `{failure.reason}` - "
                                       f"{failure.message or ''}")
    elif (note := description(doc)) is not None:
        tags["mlflow.note.content"] = note
    return {k: v for k, v in tags.items() if v is not None and v != ""}


def objective_shown(doc: TrialResult) -> tuple[float, tuple[float, float] | None] | None:
    """The trial's objective and its 95% interval (None: measured once), or None without a value."""
    from sweep.score.noise import objective_interval
    from sweep.score.objective import objective_of, objective_value

    if not doc.ok:
        return None
    objective = objective_of(doc)
    if (value := _number(objective_value(doc, objective))) is None:
        return None
    return value, objective_interval(doc, objective, value)


def description(doc: TrialResult) -> str | None:
    """``812.3 ± 16.9 low-load tok/s (c1) · ddtree-b8-t4-w2048``: the run's description, which the
    runs list shows as its Description column -- the objective with its interval first (at 1400 px
    the side panels leave the table a few columns), then the knobs that tell this config apart."""
    from sweep.score.configs import short_name
    from sweep.score.metrics import headline
    from sweep.score.names import label
    from sweep.score.objective import metric_name, objective_of

    if (shown := objective_shown(doc)) is None:
        return None
    value, ci = shown
    half = f" ± {rounded((ci[1] - ci[0]) / 2):g}" if ci is not None else ""
    metric = metric_name(objective_of(doc))
    what = label(metric, headline(doc).concurrency)
    once = "" if ci is not None else " (measured once)"
    return f"{rounded(value):g}{half} {what}{once} · {short_name(doc)}"


# Headline metrics shown rounded in the shipped view, as tags named by their labels (a column
# header is the tag's name: the one label each figure has, sweep/score/names.py; the metrics keep
# full precision under their own keys).
ROUNDED = {k: LABELS[k] for k in ("tok_s_lowc", "headline_concurrency", "speedup_vs_baseline", "accept_len",
                                  "accept_rate", "ttft_ms_p50", "tpot_ms_p50", "tok_s_peak", "coding_pass_rate",
                                  "usd_per_mtok", "greedy_identical", "max_load")}


def rounded_tags(doc: TrialResult) -> dict[str, str]:
    """``low-load tok/s``, ``TTFT ms p50``, ...: headline metrics to 4 significant figures, what the UI's
    trials view shows as columns (:data:`ROUNDED`)."""
    from sweep.score.metrics import honest

    values = honest(doc).to_dict()
    if values.get("tok_s_lowc") is None:  # nothing measured: no concurrency to show either
        values.pop("headline_concurrency", None)
    return {tag: f"{rounded(float(v)):g}" for k, tag in ROUNDED.items() if (v := _number(values.get(k))) is not None}


def trial_metrics(doc: TrialResult) -> list[tuple[str, float, int]]:
    """(key, value, step): headline metrics at step 0 (old files read right:
    ``tok_s_c1`` only for concurrency 1), the matrix as ``1 tok_s/ctx<context>``
    (and its latency, acceptance, error and cost companions, :data:`CELL_SERIES`) with
    step = concurrency."""
    from sweep.score.metrics import honest

    out = [(k, v, 0) for k, raw in honest(doc).to_dict().items() if (v := _number(raw)) is not None]
    if (shown := objective_shown(doc)) is not None:
        value, interval = shown  # the trial's own objective: what its group is sorted by, and its interval
        out.append(("objective", value, 0))
        out += [(f"objective {side}", bound, 0) for side, bound in zip(("ci_low", "ci_high"), interval or ())]
    for cell in doc.cells:
        if _number(cell.context) is None or _number(cell.concurrency) is None:
            continue
        for prefix, name in CELL_SERIES:
            if (v := _number(cell.get(name))) is not None:
                out.append((cell_metric(prefix, cell.context), v, int(cell.concurrency)))
        ci = cell.output_tok_s_ci  # workload.repeats > 1: the mean above and its 95% interval
        for side, bound in zip(("ci_low", "ci_high"), ci or ()):
            if (v := _number(bound)) is not None:
                out.append((cell_metric(TOK_S_SERIES, cell.context, side), v, int(cell.concurrency)))
    window = doc.acceptance.metrics if doc.acceptance is not None else None
    for pos, share in enumerate((window.per_position if window is not None else None) or ()):
        if (v := _number(share)) is not None:  # accepted at draft position `step` / drafting steps
            out.append(("accept_pos", v, pos))
    pred = doc.prediction  # the pre-screen's twin, vs what was measured (sweep/trial/prediction.py)
    if pred is not None:
        for key, raw in (("predicted_objective", pred.objective), ("prediction_error", pred.error),
                         ("prescreen_rank", pred.rank)):
            if (v := _number(raw)) is not None:
                out.append((key, v, 0))
        for c in pred.cells:
            if (v := _number(c.get("predicted_output_tok_s"))) is not None:
                out.append((cell_metric(TOK_S_SERIES, c["context"], "predicted"), v, int(c["concurrency"])))
    return out


def cell_table(doc: TrialResult) -> dict[str, list[Any]]:
    """Columns for ``log_table`` (nested values as JSON text, numbers rounded for reading;
    result.json keeps them whole)."""

    # latencies (up to 256 rows a cell) stay in result.json, an artifact of the run already
    cells = [{k: v for k, v in c.to_dict().items() if k != "latencies"} for c in doc.cells]
    keys = list(dict.fromkeys(k for c in cells for k in c))
    return {k: [json.dumps(c.get(k)) if isinstance(c.get(k), (dict, list)) else rounded(c.get(k))
                for c in cells] for k in keys}


def _read_log(doc: TrialResult, job_dir: Path) -> str | None:
    candidates = [job_dir / "server.log", doc.server.log if doc.server else None]
    for cand in candidates:
        if cand and Path(cand).is_file():
            with open(cand, "rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(0, size - SERVER_LOG_MAX_BYTES))
                return fh.read().decode("utf-8", errors="replace")
    return None


# (result, job dir, the run's artifacts dir) -> the trial's plots written into ``<dir>/plots/``: the
# caller's (the report's :func:`sweep.report.mlflow_artifacts.trial_plots`; recording never imports it)
StagePlots = Callable[[TrialResult, Path, Path], None]


def stage_artifacts(doc: TrialResult, job_dir: Path, out: Path, red: secrets.Redactor,
                    plots: StagePlots | None = None) -> None:
    """Everything a run shows under Artifacts, secrets masked, into ``out``; the plots are
    what ``plots`` writes there (none without it)."""
    import yaml

    def write(name: str, text: str) -> None:
        (out / name).write_text(red.text(text))

    masked = secrets.mask_tree(doc.to_dict(), red)
    write("result.json", json.dumps(masked, indent=2, default=str) + "\n")
    if masked.get("config"):
        write("config.yaml", yaml.safe_dump(masked["config"], sort_keys=False))
    if doc.command:
        write("command.txt", str(doc.command).rstrip("\n") + "\n")
    if (text := _read_log(doc, job_dir)) is not None:
        write("server.log", text)
    tail = doc.failure.log_tail if doc.failure is not None and not doc.ok else None
    if tail:
        write("log_tail.txt", str(tail).rstrip("\n") + "\n")
    if plots is not None:
        plots(doc, job_dir, out)
