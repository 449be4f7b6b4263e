"""One trial end to end: launch/reuse -> benchmark -> record -> score.

The result file is written first (status ``running``) and rewritten at
every stage, so a crash, a Ctrl-C or a dead MLflow loses nothing. A server
that fails to start is a *failed* trial with a classified reason and its
log tail, never an exception that ends the sweep.
"""

from __future__ import annotations

import logging
import time
import traceback
from pathlib import Path
from typing import Any, Mapping

from sweep import result as resultfile
from sweep import score
from sweep.config import TrialConfig
from sweep.render import Launch

log = logging.getLogger(__name__)


def trial_name(cfg: TrialConfig) -> str:
    """Readable run name, e.g. ``b300-ddtree-b8-t4-w2048``."""
    s = cfg.spec
    parts = [cfg.hardware.name, s.algorithm]
    for prefix, value in (("b", s.budget), ("t", s.topk), ("w", s.window)):
        if value is not None and s.algorithm != "none":
            parts.append(f"{prefix}{value}")
    if cfg.server.disable_cuda_graph:
        parts.append("nocg")
    return "-".join(parts)


def _hydra_context() -> dict[str, Any]:
    """Job dir, sweep dir and job number from Hydra (or cwd outside Hydra)."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
    except (ImportError, ValueError):
        return {"job_dir": Path.cwd(), "sweep_dir": None, "job_num": 0, "overrides": [],
                "original_cwd": Path.cwd()}
    multirun = hc.mode == RunMode.MULTIRUN
    return {
        "job_dir": Path(hc.runtime.output_dir),
        "sweep_dir": Path(hc.sweep.dir) if multirun else None,
        "job_num": int(hc.job.get("num", 0) or 0) if multirun else 0,
        "overrides": list(hc.overrides.task),
        "original_cwd": Path(hc.runtime.cwd),
    }


def _new_result(cfg: TrialConfig, launch: Launch, ctx: Mapping[str, Any]) -> dict[str, Any]:
    sweep_dir = ctx["sweep_dir"]
    return {
        "schema": resultfile.SCHEMA,
        "status": "running",
        "failure": None,
        "simulated": cfg.simulated,
        "trial": {
            "name": trial_name(cfg), "hardware": cfg.hardware.name, "spec": cfg.spec.algorithm,
            "job_dir": str(ctx["job_dir"]),
            # date/time: unique across days (the bare time repeats)
            "sweep_id": f"{sweep_dir.parent.name}/{sweep_dir.name}" if sweep_dir else None,
            "sweep_dir": str(sweep_dir) if sweep_dir else None, "job_num": ctx["job_num"],
            "overrides": ctx["overrides"], "started": resultfile.now_iso(), "finished": None,
        },
        "command": launch.shell_line(),
        "argv": [launch.redact(a) for a in launch.argv],
        "env": {k: launch.redact(v) for k, v in launch.env.items()},
        "fingerprint": launch.fingerprint,
        "server": None,
        "cells": [],
        "coding": None,
        "accept_len": {"requests": None, "log": None, "metrics": None},
        "metrics": {},
        "speedup_vs_baseline": None,
        "baseline": None,
        "config": _redact_config(dict(cfg.raw), launch),
        "mlflow": {"run_id": None, "synced": False},
    }


def _redact_config(raw: Any, launch: Launch) -> Any:
    if isinstance(raw, dict):
        return {k: ("***" if "api_key" in str(k).lower() and v else _redact_config(v, launch))
                for k, v in raw.items()}
    if isinstance(raw, list):
        return [_redact_config(v, launch) for v in raw]
    if isinstance(raw, str):
        return launch.redact(raw)
    return raw


def _fail(doc: dict[str, Any], reason: str, message: str, log_tail: str = "") -> None:
    doc["status"] = "failed"
    doc["failure"] = {"reason": reason, "message": message, "log_tail": log_tail}


def _benchmark(cfg: TrialConfig, launcher: Any, handle: Any, doc: dict[str, Any],
               path: Path) -> None:
    """Coding eval, then the matrix, then server-side stats for this window."""
    from sweep.bench import serverstats
    from sweep.bench.coding import run_coding_eval
    from sweep.bench.matrix import run_matrix, server_options

    mark = launcher.log_mark()
    wl, base_url, key = cfg.workload, handle.base_url, cfg.server.api_key
    model_name = cfg.model.served_name
    if wl.coding != "off":
        doc["coding"] = run_coding_eval(base_url, wl, model_name, api_key=key,
                                        request_extras=cfg.server.request_extras).to_dict()
        resultfile.write_atomic(path, resultfile.clean_number(doc))
    cells = run_matrix(base_url, wl, model_name, api_key=key, **server_options(cfg))
    doc["cells"] = [c.to_dict() for c in cells]
    doc["accept_len"]["requests"] = score.trial_accept_len(doc["cells"])
    from_log = serverstats.accept_from_log(launcher.log_since(mark))
    doc["accept_len"]["log"] = from_log.get("accept_len") if from_log else None
    doc["accept_len"]["log_samples"] = from_log.get("samples") if from_log else 0
    if cfg.server.enable_metrics:
        gauges = serverstats.fetch_metrics(base_url, api_key=key)
        doc["accept_len"]["metrics"] = gauges.get("sglang:spec_accept_length")
    if not launcher.alive():
        _fail(doc, "crashed", "the server exited during the benchmark",
              _tail(launcher.log_since(mark), cfg.launcher.get("log_tail_lines", 60)))


def _tail(text: str, n: int) -> str:
    return "\n".join(text.splitlines()[-int(n):])


def search_roots(cfg: TrialConfig, ctx: Mapping[str, Any]) -> list[Path]:
    """Where earlier results (baselines) are looked up: results.search_dirs + this job."""
    roots = [Path(r) if Path(r).is_absolute() else Path(ctx["original_cwd"]) / r
             for r in cfg.raw.get("results", {}).get("search_dirs", [])]
    roots.append(Path(ctx["job_dir"]))
    return roots


def _attach_baseline(cfg: TrialConfig, doc: dict[str, Any], ctx: Mapping[str, Any], path: Path) -> None:
    from sweep import baseline

    tok = doc["metrics"].get("tok_s_c1")
    if cfg.spec.algorithm == "none":
        doc["speedup_vs_baseline"] = 1.0 if tok else None
        return
    found = baseline.find(doc["config"], cfg.simulated, search_roots(cfg, ctx), exclude=path)
    if found and tok:
        bpath, bdoc = found
        btok = bdoc["metrics"]["tok_s_c1"]
        doc["baseline"] = {"result": str(bpath), "tok_s_c1": btok}
        doc["speedup_vs_baseline"] = tok / btok if btok else None


def _finish_metrics(cfg: TrialConfig, doc: dict[str, Any]) -> None:
    doc["metrics"] = score.metrics(doc)
    try:
        from sweep import cost
    except ImportError:
        return
    total_tokens = sum(c.get("completion_tokens") or 0 for c in doc["cells"])
    measured = sum(c.get("duration_s") or 0 for c in doc["cells"])
    doc["metrics"]["usd_per_mtok"] = cost.trial_usd_per_mtok(
        cfg.hardware.cost_per_hour, total_tokens, measured,
        (doc.get("server") or {}).get("startup_s") or 0.0)
    for c in doc["cells"]:
        c["usd_per_mtok"] = cost.cell_usd_per_mtok(cfg.hardware.cost_per_hour, c.get("output_tok_s") or 0)


def run_trial(cfg: TrialConfig, launch: Launch, hydra_cfg: Any = None, *,
              ctx: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run one trial; always leaves ``result.json``; returns the sweeper's values."""
    import launchers
    from launchers.base import LaunchFailure

    ctx = dict(ctx) if ctx is not None else _hydra_context()
    path = Path(ctx["job_dir"]) / resultfile.FILENAME
    doc = _new_result(cfg, launch, ctx)
    resultfile.write_atomic(path, doc)
    launcher = None
    interrupted: BaseException | None = None
    try:
        if cfg.raw.get("baseline", {}).get("auto_run") and cfg.spec.algorithm != "none":
            from sweep.autobaseline import ensure_baseline

            ensure_baseline(cfg, ctx)
        launcher = launchers.get_launcher(cfg.launcher)
        t0 = time.monotonic()
        try:
            handle = launcher.ensure(launch, cfg.server, Path(ctx["job_dir"]))
        except LaunchFailure as failure:
            _fail(doc, failure.reason, failure.message, launch.redact(failure.log_tail))
            doc["server"] = {"reused": False, "startup_s": time.monotonic() - t0, "info": {}}
        else:
            doc["server"] = {"reused": handle.reused, "startup_s": handle.startup_s,
                             "info": handle.info, "base_url": handle.base_url,
                             "log": str(handle.log_path) if handle.log_path else None}
            resultfile.write_atomic(path, doc)
            try:
                _benchmark(cfg, launcher, handle, doc, path)
            except LaunchFailure as failure:  # e.g. ssh_dropped while reading the log
                _fail(doc, failure.reason, failure.message, launch.redact(failure.log_tail))
            if doc["status"] == "running":
                doc["status"] = "ok"
    except KeyboardInterrupt as exc:
        interrupted = exc
        doc["status"] = "interrupted"
        doc["failure"] = {"reason": "interrupted", "message": "stopped by the user (Ctrl-C)", "log_tail": ""}
    except Exception as exc:  # a harness bug must not end the sweep
        log.exception("trial failed")
        _fail(doc, "error", f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=8))
    finally:
        doc["trial"]["finished"] = resultfile.now_iso()
        _finish_metrics(cfg, doc)
        if doc["status"] == "ok":
            _attach_baseline(cfg, doc, ctx, path)
            doc["metrics"]["speedup_vs_baseline"] = doc["speedup_vs_baseline"]
        resultfile.write_atomic(path, resultfile.clean_number(doc))
        if interrupted is not None:
            launchers.stop_all(force=True)  # Ctrl-C stops even a keep_server server
        elif ctx["sweep_dir"] is None:
            launchers.stop_all()  # respects launcher.keep_server
    _record(cfg, doc, ctx, path)  # an interrupted trial becomes a KILLED run
    if interrupted is not None:
        raise interrupted
    _summary(doc)
    return score.trial_return(doc, cfg.raw.get("objective") or {}, str(path))


def _record(cfg: TrialConfig, doc: dict[str, Any], ctx: Mapping[str, Any], path: Path) -> None:
    """MLflow, after the file is safe on disk; never fails the trial."""
    settings = cfg.raw.get("mlflow") or {}
    if not settings.get("enabled", True):
        return
    try:
        from sweep.tracking import Tracker

        tracker = Tracker(settings)
        parent = tracker.parent_for(ctx["sweep_dir"]) if ctx["sweep_dir"] else None
        run_id = tracker.log_trial(doc, Path(ctx["job_dir"]), parent_run_id=parent)
        if run_id:
            doc["mlflow"]["run_id"] = run_id
    except Exception as exc:  # noqa: BLE001 - tracking is best effort by design
        log.warning("MLflow logging failed (%s); result kept at %s, run `python -m sweep.sync`",
                    exc, path)


def _summary(doc: Mapping[str, Any]) -> None:
    try:
        from sweep.summary import print_trial

        print_trial(doc)
    except Exception as exc:  # noqa: BLE001 - a display bug never fails a trial
        log.warning("could not print the summary: %s", exc)
