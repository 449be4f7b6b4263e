"""Compare trials in the terminal: one rich table, the best feasible one marked.

Why: the MLflow UI is the place to browse, but the question after a sweep
is one screen -- which configuration is fastest *without changing answers*,
and by how much over plain decoding on the same box. Rows come from MLflow
(an experiment, optionally one sweep) or straight from the result files
under a directory, so the report works with MLflow down too.

    python -m sweep.report [--experiment specsweep] [--sweep-id ID] [--hardware b300]
                           [--spec ddtree] [--plots DIR] [--tracking-uri URI] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

DEFAULT_CONSTRAINTS = {"coding_pass_rate_min": 1.0, "max_errors": 0}
COLUMNS = (  # (header, metric key, format)
    ("tok/s c1", "tok_s_c1", "{:.1f}"), ("tok/s peak", "tok_s_peak", "{:.0f}"),
    ("accept", "accept_len", "{:.2f}"), ("pass", "coding_pass_rate", "{:.2f}"),
    ("TTFT p50 ms", "ttft_ms_p50", "{:.0f}"), ("TPOT p50 ms", "tpot_ms_p50", "{:.1f}"),
    ("$/Mtok", "usd_per_mtok", "{:.2f}"), ("startup s", "startup_s", "{:.0f}"),
)


@dataclass
class Row:
    name: str
    hardware: str
    spec: str
    budget: Any
    topk: Any
    window: Any
    status: str
    reason: str | None
    simulated: bool
    sweep_id: str | None
    metrics: dict[str, Any]
    feasible: bool = False
    speedup: float | None = None
    speedup_from_table: bool = False
    source: str = ""
    doc: Mapping[str, Any] = field(default_factory=dict, repr=False)


def _num(x: Any) -> float | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        return float(x)
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def is_feasible(doc: Mapping[str, Any]) -> bool:
    """The sweeper's rule (sweep.score.constraints): status ok, a headline
    number, and every constraint met -- by default coding pass rate 1.0 and
    zero request errors."""
    from sweep import score

    metrics = doc.get("metrics") or {}
    if doc.get("status") != "ok" or metrics.get("tok_s_c1") is None:
        return False
    objective = dict((doc.get("config") or {}).get("objective") or {})
    objective.setdefault("constraints", DEFAULT_CONSTRAINTS)
    values, _ = score.constraints(metrics, objective)
    return all(v <= 0 for v in values)


def rows_from_docs(docs: Sequence[Mapping[str, Any]], sources: Sequence[str] | None = None) -> list[Row]:
    """One row per result document; speedup filled from a same-box baseline
    row of the table when the result itself does not know it."""
    rows: list[Row] = []
    for i, doc in enumerate(docs):
        trial, spec = doc.get("trial") or {}, ((doc.get("config") or {}).get("spec") or {})
        metrics = dict(doc.get("metrics") or {})
        rows.append(Row(
            name=str(trial.get("name") or "?"), hardware=str(trial.get("hardware") or "?"),
            spec=str(trial.get("spec") or spec.get("algorithm") or "?"), budget=spec.get("budget"),
            topk=spec.get("topk"), window=spec.get("window"), status=str(doc.get("status")),
            reason=(doc.get("failure") or {}).get("reason") if doc.get("status") != "ok" else None,
            simulated=bool(doc.get("simulated")), sweep_id=trial.get("sweep_id"), metrics=metrics,
            feasible=is_feasible(doc), speedup=_num(metrics.get("speedup_vs_baseline")),
            source=sources[i] if sources else "", doc=doc))
    for row in rows:
        if row.speedup is None and row.status == "ok" and row.spec != "none":
            base = [b for b in rows if b.spec == "none" and b.status == "ok"
                    and b.hardware == row.hardware and b.simulated == row.simulated
                    and _num(b.metrics.get("tok_s_c1"))]
            tok = _num(row.metrics.get("tok_s_c1"))
            if base and tok:
                row.speedup = tok / float(base[0].metrics["tok_s_c1"])
                row.speedup_from_table = True
    return rows


def best_feasible(rows: Sequence[Row]) -> Row | None:
    feasible = [r for r in rows if r.feasible]
    return max(feasible, key=lambda r: float(r.metrics["tok_s_c1"])) if feasible else None


def table_columns(rows: Sequence[Row]) -> dict[str, list[Any]]:
    """The comparison as columns (MLflow ``log_table`` of a parent run)."""
    keys = ("tok_s_c1", "tok_s_peak", "accept_len", "coding_pass_rate", "ttft_ms_p50",
            "tpot_ms_p50", "startup_s", "errors", "usd_per_mtok")
    out: dict[str, list[Any]] = {k: [] for k in (
        "trial", "hardware", "spec", "budget", "topk", "window", "status", "failure_reason",
        "feasible", "speedup_vs_baseline", *keys)}
    for r in rows:
        for k, v in (("trial", r.name), ("hardware", r.hardware), ("spec", r.spec), ("budget", r.budget),
                     ("topk", r.topk), ("window", r.window), ("status", r.status),
                     ("failure_reason", r.reason), ("feasible", r.feasible),
                     ("speedup_vs_baseline", r.speedup)):
            out[k].append(v)
        for k in keys:
            out[k].append(_num(r.metrics.get(k)))
    return out


def _sorted(rows: Sequence[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: (r.status != "ok", -(_num(r.metrics.get("tok_s_c1")) or 0.0), r.name))


def render_table(rows: Sequence[Row], title: str) -> Any:
    from rich.table import Table

    best = best_feasible(rows)
    table = Table(title=title, caption=(
        "★ best feasible (status ok, coding pass rate 1.0, zero errors); "
        "speedup = tok/s c1 over the autoregressive baseline on the same box "
        "(* = computed from this table's spec=none row)"), caption_justify="left")
    # The trial name already reads hardware-spec-budget-topk-window.
    for header in ("", "trial", "status"):
        table.add_column(header, no_wrap=header in ("trial", "status"))
    for header, _, _ in COLUMNS[:2]:
        table.add_column(header, justify="right")
    table.add_column("speedup", justify="right")
    for header, _, _ in COLUMNS[2:]:
        table.add_column(header, justify="right")
    for r in _sorted(rows):
        status = r.status + (f" ({r.reason})" if r.reason else "") + (" sim" if r.simulated else "")
        cells = {key: ("-" if _num(r.metrics.get(key)) is None else fmt.format(_num(r.metrics[key])))
                 for _, key, fmt in COLUMNS}
        speedup = "-" if r.speedup is None else f"{r.speedup:.2f}x" + ("*" if r.speedup_from_table else "")
        style = "bold green" if r is best else ("red" if r.status != "ok" else ("dim" if not r.feasible else None))
        table.add_row("★" if r is best else "", r.name, status,
            cells["tok_s_c1"], cells["tok_s_peak"], speedup,
            *(cells[key] for _, key, _ in COLUMNS[2:]), style=style)
    return table


# -- sources ---------------------------------------------------------------------
def docs_from_dir(root: Path) -> tuple[list[dict[str, Any]], list[str]]:
    from sweep.result import iter_results

    found = sorted(iter_results(Path(root)), key=lambda p: str(p[0]))
    return [doc for _, doc in found], [str(p) for p, _ in found]


def _doc_from_run(run: Any) -> dict[str, Any]:
    """A result-shaped document from a run's params, metrics and tags."""
    p, tags = run.data.params, run.data.tags
    constraints = {k: _num(p.get(f"objective.constraints.{k}")) for k in DEFAULT_CONSTRAINTS}
    return {"status": tags.get("status"), "simulated": tags.get("simulated") == "true",
            "failure": {"reason": tags.get("failure.reason")},
            "trial": {"name": run.info.run_name, "hardware": tags.get("hardware"),
                      "spec": tags.get("spec.algorithm"), "sweep_id": tags.get("sweep.id")},
            "config": {"spec": {k: p.get(f"spec.{k}") for k in ("algorithm", "budget", "topk", "window")},
                       "objective": {"constraints": {k: v for k, v in constraints.items() if v is not None}
                                     or DEFAULT_CONSTRAINTS}},
            "metrics": dict(run.data.metrics), "cells": []}


def docs_from_mlflow(tracking_uri: str | None, experiment: str, *, sweep_id: str | None = None,
                     hardware: str | None = None, spec: str | None = None,
                     full: bool = False) -> tuple[list[dict[str, Any]], list[str]]:
    """Trial runs of an experiment; ``full`` downloads each run's result.json
    (for the plots, which need the cells)."""
    from mlflow.tracking import MlflowClient

    from sweep.tracking import TAG_KIND, Tracker, _probe

    tracker = Tracker({"tracking_uri": tracking_uri, "experiment": experiment})
    uri = tracker.tracking_uri
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):].partition("?")[0]).exists():
        raise SystemExit(f"error: no MLflow store at {uri}: run from the launch directory, "
                         "or pass --tracking-uri / --dir")
    if problem := _probe(uri):
        raise SystemExit(f"error: MLflow at {tracker.display_uri} is unreachable: {problem} "
                         "(--dir DIR reads the result files instead)")
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise SystemExit(f"error: no experiment {experiment!r} at {tracker.display_uri}")
    filters = [f"tags.`{TAG_KIND}` = 'trial'"]
    for tag, value in (("sweep.id", sweep_id), ("hardware", hardware), ("spec.algorithm", spec)):
        if value:
            filters.append(f"tags.`{tag}` = '{value}'")
    runs = client.search_runs([exp.experiment_id], " and ".join(filters),
                              order_by=["attributes.start_time ASC"], max_results=5000)
    docs, sources = [], []
    for run in runs:
        doc = _doc_from_run(run)
        if full:
            doc = _full_doc(client, run) or doc
        docs.append(doc)
        sources.append(run.info.run_id)
    return docs, sources


def _full_doc(client: Any, run: Any) -> dict[str, Any] | None:
    """The run's result.json: the local file when it is still there, else the artifact."""
    import os

    local = Path(run.data.tags.get("specsweep.job_dir") or "/nonexistent") / "result.json"
    try:
        doc = json.loads(local.read_text())
        if (doc.get("mlflow") or {}).get("run_id") == run.info.run_id:
            return doc
    except (OSError, ValueError):
        pass
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    try:
        return json.loads(Path(client.download_artifacts(run.info.run_id, "result.json")).read_text())
    except Exception:  # noqa: BLE001 - fall back to the run's own data
        return None


def write_plots(rows: Sequence[Row], out_dir: Path) -> list[Path]:
    """Sweep-level plots, plus the per-trial plots in one folder per trial."""
    from sweep import plots

    docs = [r.doc for r in rows]
    written = plots.sweep_plots(docs, out_dir)
    for r in rows:
        written += plots.trial_plots(r.doc, out_dir / "trials" / f"{r.name}-{(r.source or '')[-8:]}".strip("-"))
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sweep.report",
                                     description="Compare trials: one table, best feasible marked.")
    parser.add_argument("--experiment", default="specsweep")
    parser.add_argument("--sweep-id", help="only this sweep (its multirun dir name)")
    parser.add_argument("--hardware", help="only this box (hardware.name)")
    parser.add_argument("--spec", help="only this algorithm (spec.algorithm)")
    parser.add_argument("--plots", type=Path, help="write PNG plots into this folder")
    parser.add_argument("--tracking-uri", help="default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db here")
    parser.add_argument("--dir", type=Path, help="read result.json files under DIR instead of MLflow")
    args = parser.parse_args(argv)
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:  # piped or logged: wide enough for every column
        console = Console(highlight=False, width=160)
    if args.dir is not None:
        docs, sources = docs_from_dir(args.dir)
        keep = [i for i, d in enumerate(docs) if _match(d, args)]
        docs, sources = [docs[i] for i in keep], [sources[i] for i in keep]
        title = f"trials under {args.dir}"
    else:
        docs, sources = docs_from_mlflow(args.tracking_uri, args.experiment, sweep_id=args.sweep_id,
                                         hardware=args.hardware, spec=args.spec, full=bool(args.plots))
        title = f"experiment {args.experiment}" + (f", sweep {args.sweep_id}" if args.sweep_id else "")
    rows = rows_from_docs(docs, sources)
    if not rows:
        console.print(f"no trials found ({title})")
        return 1
    console.print(render_table(rows, title))
    if args.plots:
        for path in write_plots(rows, args.plots):
            console.print(f"plot: {path}")
    return 0


def _match(doc: Mapping[str, Any], args: argparse.Namespace) -> bool:
    trial = doc.get("trial") or {}
    return all(want is None or str(have) == want for want, have in (
        (args.sweep_id, trial.get("sweep_id")), (args.hardware, trial.get("hardware")),
        (args.spec, trial.get("spec"))))


if __name__ == "__main__":
    sys.exit(main())
