"""Bring MLflow up to date with the result files on disk.

Why: results are written to disk first and MLflow second, so a tracking
server that was down (or a sweep run on a box without one) leaves
``result.json`` files with ``mlflow.synced: false``. This module uploads
them later, idempotently (a second sync finds every run by its
``specsweep.result_id`` tag and creates nothing), and keeps each sweep's
parent run in step through ``<sweep_dir>/mlflow_parent.json``: created when
missing, ended with its plots once the sweep has ended.

    python -m sweep.sync multirun/2026-01-01/12-00-00 [--tracking-uri URI] [--experiment NAME]
"""

from __future__ import annotations

import argparse
import fcntl
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from sweep.tracking import (PARENT_FILE, TAG_KIND, TAG_SWEEP_KEY, Tracker,
                            flatten_params, git_sha, redactor_for, sweep_key)

RUN_STATUSES = ("FINISHED", "FAILED", "KILLED")


# -- the sweep's record file ---------------------------------------------------
def read_parent_file(sweep_dir: Path) -> dict[str, Any]:
    import json

    try:
        return dict(json.loads((Path(sweep_dir) / PARENT_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return {}


def write_parent_file(sweep_dir: Path, record: Mapping[str, Any]) -> None:
    from sweep.result import write_atomic

    write_atomic(Path(sweep_dir) / PARENT_FILE, record)


@contextmanager
def sweep_lock(sweep_dir: Path) -> Iterator[None]:
    """Parallel jobs of one sweep must create at most one parent run."""
    sweep_dir = Path(sweep_dir)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    with open(sweep_dir / ".mlflow_parent.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def record_parent_start(tracker: Tracker, sweep_dir: Path, name: str, params: Mapping[str, Any]) -> None:
    """Written before MLflow is contacted: the intent survives MLflow being down."""
    with sweep_lock(sweep_dir):
        record = read_parent_file(sweep_dir)
        record.update({"tracking_uri": tracker.display_uri, "experiment": tracker.experiment,
                       "sweep_id": Path(sweep_dir).name, "name": name,
                       "params": {str(k): v for k, v in dict(params or {}).items()},
                       "ended": False, "finalized": False, "status": "RUNNING"})
        record.setdefault("run_id", None)
        write_parent_file(sweep_dir, record)


def record_parent_end(sweep_dir: Path, status: str) -> None:
    status = str(status).upper()
    with sweep_lock(sweep_dir):
        record = read_parent_file(sweep_dir)
        record.update({"ended": True, "status": status if status in RUN_STATUSES else "FINISHED"})
        write_parent_file(sweep_dir, record)


# -- the parent run ------------------------------------------------------------------
def ensure_parent(tracker: Tracker, sweep_dir: Path) -> str:
    """The recorded parent run, else one found by the sweep's key, else a new
    one (named and parametrised from the record). Raises when MLflow is down."""
    sweep_dir = Path(sweep_dir)
    with sweep_lock(sweep_dir):
        record = read_parent_file(sweep_dir)
        client, exp = tracker.connect()
        run_id = record.get("run_id")
        same_store = (record.get("tracking_uri") == tracker.display_uri
                      and record.get("experiment") == tracker.experiment)
        if run_id and same_store and _active(client, str(run_id)):
            return str(run_id)
        found = tracker.find_run(TAG_SWEEP_KEY, sweep_key(sweep_dir), "sweep")
        run_id = str(found.info.run_id) if found else _create_parent(tracker, sweep_dir, record)
        record.update({"run_id": run_id, "tracking_uri": tracker.display_uri,
                       "experiment": tracker.experiment})
        record.setdefault("sweep_id", sweep_dir.name)
        write_parent_file(sweep_dir, record)
        return run_id


def _active(client: Any, run_id: str) -> bool:
    try:
        return client.get_run(run_id).info.lifecycle_stage == "active"
    except Exception:  # noqa: BLE001 - a missing run is simply not active
        return False


def _create_parent(tracker: Tracker, sweep_dir: Path, record: Mapping[str, Any]) -> str:
    red = redactor_for(record.get("params") or {})
    tags = {TAG_KIND: "sweep", TAG_SWEEP_KEY: sweep_key(sweep_dir), "sweep.id": sweep_dir.name,
            "specsweep.sweep_dir": str(sweep_dir.resolve()), "git.sha": git_sha(),
            "mlflow.source.git.commit": git_sha()}
    run = tracker.create_run(run_name=str(record.get("name") or sweep_dir.name),
                             tags={k: red.text(str(v)) for k, v in tags.items() if v})
    run_id = str(run.info.run_id)
    tracker.log_batch(run_id, params=flatten_params(record.get("params") or {}, red))
    return run_id


def finalize_parent(tracker: Tracker, sweep_dir: Path) -> str:
    """Sweep-level plots, the trials table and summary metrics, then end the run."""
    from sweep import plots, report
    from sweep.result import iter_results

    sweep_dir = Path(sweep_dir)
    run_id = ensure_parent(tracker, sweep_dir)
    client, _ = tracker.connect()
    docs = [doc for _, doc in sorted(iter_results(sweep_dir), key=lambda p: str(p[0]))]
    rows = report.rows_from_docs(docs)
    best = report.best_feasible(rows)
    metrics = {"trials": len(rows), "trials_ok": sum(r.status == "ok" for r in rows),
               "trials_failed": sum(r.status == "failed" for r in rows),
               "trials_feasible": sum(r.feasible for r in rows)}
    if best is not None:
        for key in ("tok_s_c1", "tok_s_peak", "speedup_vs_baseline"):
            if best.metrics.get(key) is not None:
                metrics[f"best.{key}"] = best.metrics[key]
        client.set_tag(run_id, "best.trial", best.name)
    tracker.log_batch(run_id, metrics=[(k, float(v), 0) for k, v in metrics.items()])
    with tempfile.TemporaryDirectory(prefix="specsweep-parent-") as tmp:
        if plots.sweep_plots(docs, Path(tmp) / "plots"):
            client.log_artifacts(run_id, tmp)
    if rows:
        client.log_table(run_id, data=report.table_columns(rows), artifact_file="trials.json")
    record = read_parent_file(sweep_dir)
    client.set_terminated(run_id, status=record.get("status") if record.get("ended") else "FINISHED")
    with sweep_lock(sweep_dir):
        record = read_parent_file(sweep_dir)
        record.update({"finalized": True, "ended": True, "status": record.get("status") or "FINISHED"})
        write_parent_file(sweep_dir, record)
    return run_id


# -- sync -----------------------------------------------------------------------
@dataclass
class SyncReport:
    uploaded: list[tuple[Path, str]] = field(default_factory=list)
    linked: list[tuple[Path, str]] = field(default_factory=list)  # run existed, file re-marked
    already: int = 0
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    failed: list[tuple[Path, str]] = field(default_factory=list)
    parents: list[tuple[Path, str]] = field(default_factory=list)


def _sweep_dir_of(path: Path, doc: Mapping[str, Any]) -> Path | None:
    """Where the sweep's record lives; the job dir's parent if the tree moved."""
    recorded = (doc.get("trial") or {}).get("sweep_dir")
    for cand in ([Path(recorded)] if recorded else []) + [path.parent.parent]:
        if (cand / PARENT_FILE).is_file():
            return cand
    return Path(recorded) if recorded and Path(recorded).is_dir() else None


def _settings(doc: Mapping[str, Any], sweep_dir: Path | None, tracking_uri: str | None,
              experiment: str | None) -> dict[str, Any]:
    """CLI flag > what the sweep recorded > the trial's config > MLflow's default."""
    record = read_parent_file(sweep_dir) if sweep_dir else {}
    config = ((doc.get("config") or {}).get("mlflow") or {})
    return {"enabled": True,
            "tracking_uri": tracking_uri or record.get("tracking_uri") or config.get("tracking_uri"),
            "experiment": experiment or record.get("experiment") or config.get("experiment")}


def sync_dir(root: Path, *, tracking_uri: str | None = None, experiment: str | None = None,
             include_running: bool = False, progress: Any = None) -> SyncReport:
    """Upload every unsynced result under ``root``; finish parents of ended sweeps."""
    from sweep.result import iter_results

    out = SyncReport()
    trackers: dict[tuple[Any, Any], Tracker] = {}
    sweeps: dict[Path, tuple[Tracker, bool]] = {}
    for path, doc in sorted(iter_results(Path(root)), key=lambda p: str(p[0])):
        sweep_dir = _sweep_dir_of(path, doc)
        settings = _settings(doc, sweep_dir, tracking_uri, experiment)
        tracker = trackers.setdefault((settings["tracking_uri"], settings["experiment"]), Tracker(settings))
        if sweep_dir is not None and sweep_dir not in sweeps:
            sweeps[sweep_dir] = (tracker, (sweep_dir / PARENT_FILE).is_file())
        if progress is not None:
            progress(path)
        if (doc.get("mlflow") or {}).get("synced"):
            out.already += 1
            continue
        if doc.get("status") == "running" and not include_running:
            out.skipped.append((path, "still running (or its process died): --include-running uploads it as KILLED"))
            continue
        try:
            parent = ensure_parent(tracker, sweep_dir) if sweep_dir is not None else None
            run_id, created = tracker.upload_result(doc, path.parent, parent_run_id=parent)
            (out.uploaded if created else out.linked).append((path, run_id))
        except Exception as exc:  # noqa: BLE001 - report every file, go on with the next
            out.failed.append((path, str(exc)))
    for sweep_dir, (tracker, had_record) in sweeps.items():
        record = read_parent_file(sweep_dir)
        if record.get("finalized") or (had_record and not record.get("ended")):
            continue  # already done, or the sweep may still be running
        try:
            out.parents.append((sweep_dir, finalize_parent(tracker, sweep_dir)))
        except Exception as exc:  # noqa: BLE001
            out.failed.append((sweep_dir / PARENT_FILE, str(exc)))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sweep.sync", description=(
        "Upload result.json files that are not in MLflow yet (mlflow.synced false). "
        "Idempotent: running it twice creates no duplicate runs."))
    parser.add_argument("dir", type=Path, help="a results directory (multirun/..., outputs/...)")
    parser.add_argument("--tracking-uri", help="default: the sweep's recorded URI, else the config's, "
                        "else $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db in this directory")
    parser.add_argument("--experiment", help="default: the sweep's / config's (specsweep)")
    parser.add_argument("--include-running", action="store_true",
                        help="also upload results still marked running (as KILLED runs)")
    args = parser.parse_args(argv)
    from rich.console import Console

    console = Console(stderr=True, highlight=False, soft_wrap=True)  # one line per file, never wrapped
    if not args.dir.is_dir():
        console.print(f"[red]error[/red]: {args.dir}: not a directory")
        return 2
    with console.status("syncing results to MLflow ...") as status:
        report = sync_dir(args.dir, tracking_uri=args.tracking_uri, experiment=args.experiment,
                          include_running=args.include_running,
                          progress=lambda p: status.update(f"syncing {p} ..."))
    for path, run_id in report.uploaded:
        console.print(f"[green]uploaded[/green] {path} -> run {run_id}")
    for path, run_id in report.linked:
        console.print(f"[cyan]linked[/cyan]   {path} -> existing run {run_id}")
    for path, run_id in report.parents:
        console.print(f"[green]parent[/green]   {path} -> run {run_id} (ended)")
    for path, why in report.skipped:
        console.print(f"[yellow]skipped[/yellow]  {path}: {why}")
    for path, why in report.failed:
        console.print(f"[red]failed[/red]   {path}: {why}")
    console.print(f"{len(report.uploaded)} uploaded, {len(report.linked)} linked to existing runs, "
                  f"{report.already} already in MLflow, "
                  f"{len(report.skipped)} skipped, {len(report.failed)} failed")
    if report.failed and any(isinstance(e, str) and "unreachable" in e for _, e in report.failed):
        console.print("start the tracking server (or pass --tracking-uri) and run sync again")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
