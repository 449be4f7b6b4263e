"""The MLflow parent run of a sweep: started, found again, finished with its plots.

Every multirun or search is one parent run with its trials nested under it.
Its state lives in ``<sweep_dir>/mlflow_parent.json`` (written before MLflow
is contacted, under a file lock, params masked): so the intent survives
MLflow being down, parallel jobs of one sweep create at most one parent, and
a later trial or ``python -m sweep.sync`` creates or ends the run. Ending it
logs the sweep-level plots, the trials table and summary metrics -- as the caller made
them with the report and handed them in (:class:`SweepArtifacts`): recording never
imports :mod:`sweep.report`.
"""

from __future__ import annotations

import fcntl
import logging
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol

from sweep import secrets
from sweep.io.atomic import write_atomic
from sweep.record._params import flatten_params
from sweep.record._run_content import TAG_KIND, TAG_SWEEP_KEY, git_sha, sweep_key

log = logging.getLogger(__name__)

PARENT_FILE = "mlflow_parent.json"
RUN_STATUSES = ("FINISHED", "FAILED", "KILLED")


class Tracker(Protocol):
    """What the parent run needs of :class:`sweep.record.tracking.Tracker` (which calls in here)."""

    @property
    def display_uri(self) -> str: ...
    @property
    def experiment(self) -> str: ...
    def connect(self) -> tuple[Any, str]: ...
    def find_run(self, tag: str, value: str, kind: str) -> Any: ...
    def create_run(self, **kwargs: Any) -> Any: ...
    def log_batch(self, run_id: str, *, params: Mapping[str, str] | None = None,
                  metrics: Iterable[tuple[str, float, int]] = (), timestamp: int | None = None) -> None: ...


# -- the sweep's record file ---------------------------------------------------
def sweep_id(sweep_dir: Path) -> str:
    """``<date>/<time>``, as the trials record it (the bare time repeats across days)."""
    sweep_dir = Path(sweep_dir).resolve()
    return f"{sweep_dir.parent.name}/{sweep_dir.name}"


def read_parent_file(sweep_dir: Path) -> dict[str, Any]:
    """The sweep's record; ``{}`` when there is none or it is not one (read through
    :mod:`sweep.io.readback`: a FIFO or a device in its place is never opened)."""
    from sweep.io import readback

    path = Path(sweep_dir) / PARENT_FILE
    if not path.exists():
        return {}
    try:
        doc = readback.read_json(path, limit=16 * 1024 * 1024)
    except readback.BadFile as exc:
        log.warning("%s", exc.line())
        return {}
    return dict(doc) if isinstance(doc, dict) else {}


def write_parent_file(sweep_dir: Path, record: Mapping[str, Any]) -> None:
    write_atomic(Path(sweep_dir) / PARENT_FILE, secrets.mask_tree(dict(record)))


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
        # A resumed sweep (same dir) keeps the name its parent run was given.
        record.update({"tracking_uri": tracker.display_uri, "experiment": tracker.experiment,
                       "sweep_id": sweep_id(sweep_dir), "name": record.get("name") or name,
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


def record_name(sweep_dir: Path) -> str:
    """The sweep's name as its parent run has it (the directory, before one was recorded)."""
    return str(read_parent_file(sweep_dir).get("name") or Path(sweep_dir).name)


@dataclass
class SweepArtifacts:
    """What the caller made of a sweep for its parent run (with :mod:`sweep.report`, which this
    package never imports): uploaded as handed."""

    metrics: dict[str, float] = field(default_factory=dict)  # trials, trials_ok, ..., best.*
    tags: dict[str, str] = field(default_factory=dict)  # best.trial(s), the deployment's tags
    table: dict[str, list[Any]] | None = None  # the trials table (trials.json); None: no trial
    files: list[Path] = field(default_factory=list)  # logged at the top of the artifacts (report.html)


# (sweep dir, a directory to write the run's files into) -> the rest of what the run shows
MakeSweepArtifacts = Callable[[Path, Path], SweepArtifacts]


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
                       "experiment": tracker.experiment, "experiment_id": exp})
        record.setdefault("sweep_id", sweep_id(sweep_dir))
        write_parent_file(sweep_dir, record)
        return run_id


def _active(client: Any, run_id: str) -> bool:
    try:
        return client.get_run(run_id).info.lifecycle_stage == "active"
    except Exception:  # noqa: BLE001 - a missing run is simply not active
        return False


def _create_parent(tracker: Tracker, sweep_dir: Path, record: Mapping[str, Any]) -> str:
    red = secrets.redactor(secrets.collect_secrets(record.get("params") or {}))
    tags = {TAG_KIND: "sweep", TAG_SWEEP_KEY: sweep_key(sweep_dir), "sweep.id": sweep_id(sweep_dir),
            "specsweep.sweep_dir": str(sweep_dir.resolve()), "git.sha": git_sha(),
            "mlflow.source.git.commit": git_sha()}
    run = tracker.create_run(run_name=str(record.get("name") or sweep_dir.name),
                             tags={k: red.text(str(v)) for k, v in tags.items() if v})
    run_id = str(run.info.run_id)
    tracker.log_batch(run_id, params=flatten_params(record.get("params") or {}, red))
    return run_id


def finalize_parent(tracker: Tracker, sweep_dir: Path, artifacts: MakeSweepArtifacts | None = None) -> str:
    """Sweep-level plots, the trials table and summary metrics, then end the run.

    What the parent run shows is made by ``artifacts`` (the caller's: the report's
    :func:`sweep.report.mlflow_artifacts.sweep_artifacts`), called once the run exists with a
    directory to write files into; this function only uploads what it is handed. Without it the
    run is ended with nothing but ``schedule.yaml``."""
    sweep_dir = Path(sweep_dir)
    run_id = ensure_parent(tracker, sweep_dir)
    client, _ = tracker.connect()
    table = None
    with tempfile.TemporaryDirectory(prefix="specsweep-parent-") as tmp:
        made = artifacts(sweep_dir, Path(tmp)) if artifacts is not None else SweepArtifacts()
        for tag, text in made.tags.items():
            client.set_tag(run_id, tag, text)
        tracker.log_batch(run_id, metrics=[(k, float(v), 0) for k, v in made.metrics.items()])
        if (sweep_dir / "schedule.yaml").is_file():
            client.log_artifact(run_id, str(sweep_dir / "schedule.yaml"))
        if any(Path(tmp).iterdir()):
            client.log_artifacts(run_id, tmp)
        for path in made.files:
            client.log_artifact(run_id, str(path))
        table = made.table
    if table is not None:
        client.log_table(run_id, data=table, artifact_file="trials.json")
    record = read_parent_file(sweep_dir)
    client.set_terminated(run_id, status=record.get("status") if record.get("ended") else "FINISHED")
    with sweep_lock(sweep_dir):
        record = read_parent_file(sweep_dir)
        record.update({"finalized": True, "ended": True, "status": record.get("status") or "FINISHED"})
        write_parent_file(sweep_dir, record)
    return run_id
