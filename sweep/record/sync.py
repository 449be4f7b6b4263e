"""Bring MLflow up to date with the result files on disk.

Why: results are written to disk first and MLflow second, so a tracking
server that was down (or a sweep run on a box without one) leaves
``result.json`` files with ``mlflow.synced: false``. :func:`sync_dir`
uploads them later, idempotently (a second sync finds every run by its
``specsweep.result_id`` tag and creates nothing), and keeps each sweep's
parent run in step (:mod:`sweep.record.parent`): created when missing, ended
with its plots once the sweep has ended. The command is ``python -m sweep.sync``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sweep.compose.settings import Mlflow
from sweep.record._tracking_off import is_timeout
from sweep.record._run_content import StagePlots
from sweep.record.parent import PARENT_FILE, MakeSweepArtifacts, ensure_parent, finalize_parent, read_parent_file
from sweep.record.result import TrialResult, iter_results
from sweep.record.tracking import Tracker


@dataclass
class SyncReport:
    uploaded: list[tuple[Path, str]] = field(default_factory=list)
    linked: list[tuple[Path, str]] = field(default_factory=list)  # run existed, file re-marked
    already: int = 0
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    failed: list[tuple[Path, str]] = field(default_factory=list)
    parents: list[tuple[Path, str]] = field(default_factory=list)


def _sweep_dir_of(path: Path, doc: TrialResult) -> Path | None:
    """Where the sweep's record lives; the job dir's parent if the tree moved. Sync writes the
    sweep's record there (``mlflow_parent.json``), so a directory a result file names is used only
    when the file is inside it: a file's content never chooses where sync writes."""
    recorded = doc.trial.sweep_dir
    cands = [c for c in ([Path(recorded)] if recorded else []) + [path.parent.parent] if _within(path, c)]
    for cand in cands:
        if (cand / PARENT_FILE).is_file():
            return cand
    return Path(recorded) if recorded and Path(recorded) in cands and Path(recorded).is_dir() else None


def _within(path: Path, root: Path) -> bool:
    import os

    try:
        base = os.path.realpath(root)
        return os.path.commonpath([base, os.path.realpath(path)]) == base
    except ValueError:  # different drives, a relative path against an absolute one
        return False


def _settings(doc: TrialResult, sweep_dir: Path | None, tracking_uri: str | None,
              experiment: str | None, recorded_uri: bool = False) -> Mlflow:
    """The URI: the CLI flag, else the current one ($MLFLOW_TRACKING_URI, else
    sqlite:///mlflow.db here) -- the recorded one (the sweep's, the trial's config)
    only with ``recorded_uri``: after an outage the recorded server may be the dead
    one. The experiment: the flag > the sweep's > the config's > the default."""
    record = read_parent_file(sweep_dir) if sweep_dir else {}
    config = doc.config_section("mlflow")
    recorded = (record.get("tracking_uri") or config.get("tracking_uri")) if recorded_uri else None
    return Mlflow.from_mapping({
        "enabled": True, "tracking_uri": tracking_uri or recorded,
        "experiment": experiment or record.get("experiment") or config.get("experiment"),
        "timeout_s": config.get("timeout_s")})


def _same_store(recorded: str | None, asked: str | None) -> bool:
    """Whether the store a result was synced to is the one asked for (no ``--tracking-uri``: yes).

    A result already in the run's own store is uploaded again when the user
    names another (a local sqlite file first, the team's server later); the
    recorded URI is masked, so the asked one is compared masked too.
    """
    if asked is None or recorded is None:
        return True
    from sweep import secrets

    return secrets.mask_text(asked, secrets.url_secrets(asked)) == recorded or asked == recorded


def sync_dir(root: Path, *, tracking_uri: str | None = None, experiment: str | None = None,
             include_running: bool = False, progress: Callable[[Path], Any] | None = None,
             recorded_uri: bool = False, plots: StagePlots | None = None,
             artifacts: MakeSweepArtifacts | None = None) -> SyncReport:
    """Upload every unsynced result under ``root``; finish parents of ended sweeps. ``plots`` and
    ``artifacts`` make what the runs show of the report (the caller's: this package never imports it)."""
    out = SyncReport()
    trackers: dict[tuple[Any, Any], Tracker] = {}
    sweeps: dict[Path, tuple[Tracker, bool]] = {}
    hung: dict[int, str] = {}  # a tracker whose server timed out: not asked again in this sync
    def unreadable(path: Path, exc: Exception) -> None:
        out.failed.append((path, f"unreadable result file: {exc}"))

    for path, doc in sorted(iter_results(Path(root), on_error=unreadable), key=lambda p: str(p[0])):
        sweep_dir = _sweep_dir_of(path, doc)
        settings = _settings(doc, sweep_dir, tracking_uri, experiment, recorded_uri)
        tracker = trackers.setdefault((settings.tracking_uri, settings.experiment), Tracker(settings))
        if sweep_dir is not None and sweep_dir not in sweeps:
            sweeps[sweep_dir] = (tracker, (sweep_dir / PARENT_FILE).is_file())
        if progress is not None:
            progress(path)
        if doc.mlflow.synced and _same_store(doc.mlflow.tracking_uri, tracking_uri):
            out.already += 1
            continue
        if doc.status == "running" and not include_running:
            out.skipped.append((path, "still running (or its process died): --include-running uploads it as KILLED"))
            continue
        if id(tracker) in hung:
            out.failed.append((path, hung[id(tracker)]))
            continue
        try:
            parent = ensure_parent(tracker, sweep_dir) if sweep_dir is not None else None
            run_id, created = tracker.upload_result(doc, path.parent, parent_run_id=parent, plots=plots)
            (out.uploaded if created else out.linked).append((path, run_id))
        except Exception as exc:  # noqa: BLE001 - report every file, go on with the next
            out.failed.append((path, str(exc)))
            if is_timeout(exc):
                hung[id(tracker)] = f"not tried: {exc}"
    for sweep_dir, (tracker, had_record) in sweeps.items():
        record = read_parent_file(sweep_dir)
        if record.get("finalized") or (had_record and not record.get("ended")) or id(tracker) in hung:
            continue  # already done, the sweep may still be running, or its server hangs
        try:
            out.parents.append((sweep_dir, finalize_parent(tracker, sweep_dir, artifacts)))
        except Exception as exc:  # noqa: BLE001
            out.failed.append((sweep_dir / PARENT_FILE, str(exc)))
    return out
