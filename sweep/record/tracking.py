"""Record trials in MLflow: one child run per trial under one parent per sweep.

Why it is shaped this way:

* ``result.json`` on disk is the source of truth. MLflow is a *view* of it,
  written after the file is safe, so a dead tracking server costs a warning
  (once per process), never a trial. ``python -m sweep.sync`` uploads later.
* Uploads are idempotent: every child carries ``specsweep.result_id`` (a
  hash of the result document) and is looked up before it is created, so
  syncing twice, or syncing what a live trial already logged, adds nothing.
* The tracking URI follows MLflow's own default, pinned to the directory the
  user launched from (Hydra may have changed cwd), so ``mlflow ui`` there
  shows everything.
* Secrets never leave the machine: every param, tag and artifact is masked
  by :mod:`sweep.secrets` (by name and by value).

This module is the ``Tracker`` facade; the parts live in modules named after
what they do:

* ``sweep.record._tracking_uri``      where runs go (URI resolution, reachability probe)
* ``sweep.record._params``            the config as params within MLflow's limits
* ``sweep.record._run_content``       what a trial becomes: id, tags, metrics, artifacts
* ``sweep.record._mlflow_experiment`` the experiment and its comparison view in the UI
* ``sweep.record.parent``             the sweep's parent run and its record file

mlflow is imported inside functions only (``python -m sweep --help`` stays fast).
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping
from urllib.parse import urlsplit

from sweep import secrets
from sweep.errors import EXIT_FAILED, SweepError
from sweep.io.atomic import write_atomic
from sweep.compose.settings import Mlflow
from sweep.record import _tracking_off
from sweep.record import parent as _parent
from sweep.record._mlflow_experiment import UI_VIEW_KEY, ensure_experiment, ui_url
from sweep.record._params import MAX_TAG_VALUE, flatten_params, truncate
from sweep.record.parent import MakeSweepArtifacts
from sweep.record._run_content import (RUN_STATUS, TAG_COMPLETE, TAG_KIND, TAG_RESULT_ID, StagePlots, _ms,
                                       cell_table, normalize, result_id, stage_artifacts,
                                       trial_metrics, trial_tags)
from sweep.record._tracking_uri import launch_dir, probe as _probe, resolve_tracking_uri, safe_uri
from sweep.record.result import FILENAME as RESULT_FILE
from sweep.record.result import MlflowInfo, TrialResult

__all__ = ["PARENT_FILE", "UI_VIEW_KEY", "Tracker", "TrackingUnavailable", "launch_dir",
           "resolve_tracking_uri", "run_line", "safe_uri", "sweep_line"]

log = logging.getLogger(__name__)

PARENT_FILE = _parent.PARENT_FILE

_warned = False
# (tracking URI, experiment name) -> id, once per process: the jobs of a
# multirun share one interpreter, and each one would look it up again.
_experiment_ids: dict[tuple[str, str], str] = {}
# What MLflow answers when a cached experiment was deleted (or removed) since.
_STALE_EXPERIMENT = frozenset({"INVALID_PARAMETER_VALUE", "INVALID_STATE", "RESOURCE_DOES_NOT_EXIST"})


class TrackingUnavailable(SweepError):
    """MLflow cannot be reached; the message says where and why (``timed_out``: it hung).

    Trials and sync record it and go on; at a boundary it is one line, exit 1.
    """

    exit_code = EXIT_FAILED

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


def _warn_once(message: str) -> None:
    """Warn the first time per process; a 100-trial sweep must not print 100 warnings."""
    global _warned
    if _warned:
        log.debug(message)
        return
    _warned = True
    log.warning(message)


class Tracker:
    """MLflow logging for one ``mlflow`` config block ``{enabled, tracking_uri, experiment}``.

    Every public method is best effort: with MLflow unreachable it warns once
    per process and returns None; ``upload``/``connect`` raise instead (sync)."""

    def __init__(self, settings: Mlflow | Mapping[str, Any] | None = None) -> None:
        if not isinstance(settings, Mlflow):
            settings = Mlflow.from_mapping(settings)
        self.enabled = settings.enabled
        self.experiment = settings.experiment
        self.timeout_s = settings.timeout_s
        self._configured = settings.tracking_uri
        self._base = launch_dir()
        self._uri: str | None = None
        self._client: Any = None
        self._experiment_id: str | None = None
        self._cached_experiment = False

    @property
    def tracking_uri(self) -> str:
        if self._uri is None:
            self._uri = resolve_tracking_uri(self._configured, self._base)
        return self._uri

    @property
    def display_uri(self) -> str:
        return safe_uri(self.tracking_uri)

    def _dir(self, path: str | Path) -> Path:
        """Hydra's sweep dir is relative to the launch dir, not to a job's cwd."""
        path = Path(path)
        return path if path.is_absolute() else self._base / path

    def connect(self) -> tuple[Any, str]:
        """(client, experiment id); raises TrackingUnavailable with the reason."""
        if self._client is not None and self._experiment_id is not None:
            return self._client, self._experiment_id
        uri = self.tracking_uri
        if problem := _probe(uri, timeout=self.timeout_s):
            raise TrackingUnavailable(f"MLflow at {safe_uri(uri)} is unreachable: {problem}",
                                      timed_out=problem.timed_out)
        if urlsplit(uri).scheme in ("http", "https"):
            # Bound MLflow's retry loop (7 retries with exponential backoff by default).
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
        # log_table downloads an existing table first: no tqdm bars in a sweep's output.
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        from mlflow.tracking import MlflowClient

        from sweep.record import _sqlite_store

        _sqlite_store.prepare(uri)  # a new local store without a thousand fsyncs
        key = (uri, self.experiment)
        self._cached_experiment = key in _experiment_ids
        try:
            client = MlflowClient(tracking_uri=uri)
            self._experiment_id = _experiment_ids.get(key) or self._ensure_experiment(client)
        except Exception as exc:
            raise TrackingUnavailable(f"MLflow at {safe_uri(uri)} failed: {exc}") from exc
        _experiment_ids[key] = self._experiment_id
        self._client = client
        return client, self._experiment_id

    def _forget_experiment(self) -> None:
        """After a failure: the next connect looks the experiment up again
        (it may have been deleted, and is then restored)."""
        if self._uri is not None:
            _experiment_ids.pop((self._uri, self.experiment), None)
        self._client = self._experiment_id = None

    def create_run(self, **kwargs: Any) -> Any:
        """``client.create_run`` in this tracker's experiment. An id cached by
        an earlier job of this process whose experiment was deleted since is
        looked up once more (which restores the experiment)."""
        client, exp = self.connect()
        try:
            return client.create_run(exp, **kwargs)
        except Exception as exc:
            if not self._cached_experiment or getattr(exc, "error_code", None) not in _STALE_EXPERIMENT:
                raise
        self._forget_experiment()
        client, exp = self.connect()
        return client.create_run(exp, **kwargs)

    def _ensure_experiment(self, client: Any) -> str:
        return ensure_experiment(client, self.experiment, self.tracking_uri)

    def find_run(self, tag: str, value: str, kind: str) -> Any:
        client, exp = self.connect()
        found = client.search_runs([exp], max_results=5, filter_string=(
            f"tags.`{tag}` = '{value}' and tags.`{TAG_KIND}` = '{kind}'"))
        return found[0] if found else None

    def log_batch(self, run_id: str, *, params: Mapping[str, str] | None = None,
                  metrics: Iterable[tuple[str, float, int]] = (), timestamp: int | None = None) -> None:
        """Params and metrics in batches within MLflow's per-request limits."""
        import time

        from mlflow.entities import Metric, Param

        client, _ = self.connect()
        plist = [Param(k, v) for k, v in (params or {}).items()]
        ts = timestamp or int(time.time() * 1000)
        mlist = [Metric(k, v, ts, step) for k, v, step in metrics]
        # Params and metrics share requests: up to 100 params and 1000
        # entities in all per request (mlflow.utils.validation.MAX_*_PER_BATCH).
        while plist or mlist:
            p, plist = plist[:100], plist[100:]
            m, mlist = mlist[:1000 - len(p)], mlist[1000 - len(p):]
            client.log_batch(run_id, metrics=m, params=p)

    # -- trials ---------------------------------------------------------------
    def log_trial(self, result: TrialResult | Mapping[str, Any], job_dir: Path, *,
                  parent_run_id: str | None = None, plots: StagePlots | None = None) -> str | None:
        """One child run for one result; None (warned once) when MLflow is down. ``plots`` writes
        the trial's plots among the artifacts (the caller's, from the report)."""
        if not self.enabled:
            return None
        sweep_dir = normalize(result).trial.sweep_dir
        scope = self._dir(sweep_dir) if sweep_dir else None
        if why := _tracking_off.reason(scope):
            log.debug("not logged to MLflow (tracking is off: %s)", why)
            return None
        try:
            return self.upload(result, Path(job_dir), parent_run_id=parent_run_id, plots=plots)
        except Exception as exc:  # noqa: BLE001 - the trial must never fail because of MLflow
            self._forget_experiment()
            where = sweep_dir or job_dir
            if _tracking_off.is_timeout(exc):
                _tracking_off.switch_off(scope, str(exc), where)
                return None
            _warn_once(secrets.mask_text(f"{exc}; results stay on disk ({Path(job_dir) / RESULT_FILE}): "
                                         f"`python -m sweep.sync {where}` uploads them later"))
            return None

    def upload(self, result: TrialResult | Mapping[str, Any], job_dir: Path, *,
               parent_run_id: str | None = None, plots: StagePlots | None = None) -> str:
        """Create the run unless this exact result is already complete in
        MLflow; then mark result.json synced. Raises on any MLflow error."""
        return self.upload_result(result, job_dir, parent_run_id=parent_run_id, plots=plots)[0]

    def upload_result(self, result: TrialResult | Mapping[str, Any], job_dir: Path, *,
                      parent_run_id: str | None = None, plots: StagePlots | None = None) -> tuple[str, bool]:
        """``upload`` that also says whether a run was created (False: found)."""
        doc = normalize(result)
        rid = result_id(doc)
        client, exp = self.connect()
        sweep_dir = doc.trial.sweep_dir
        if parent_run_id is None and sweep_dir and (self._dir(sweep_dir) / PARENT_FILE).exists():
            # start_parent ran while MLflow was down
            parent_run_id = _parent.ensure_parent(self, self._dir(sweep_dir))
        existing = self.find_run(TAG_RESULT_ID, rid, "trial")
        created = not (existing is not None and existing.data.tags.get(TAG_COMPLETE) == "true")
        if not created:
            run_id = str(existing.info.run_id)
        else:
            if existing is not None:  # an upload that died half way
                client.delete_run(existing.info.run_id)
            run_id = self._create_trial_run(doc, rid, Path(job_dir), parent_run_id, plots)
        self._write_back(result, Path(job_dir), run_id)
        return run_id, created

    def _create_trial_run(self, doc: TrialResult, rid: str, job_dir: Path, parent: str | None,
                          plots: StagePlots | None) -> str:
        trial = doc.trial
        red = secrets.redactor(secrets.collect_secrets(doc.to_dict()))
        tags = {k: truncate(red.text(str(v)), MAX_TAG_VALUE)
                for k, v in trial_tags(doc, rid, parent, job_dir).items()}
        from sweep.score.configs import short_name

        # the group (box, model, workload) is the view's grouping: the run's name is what tells
        # the configs inside it apart (the full name is the ``config`` tag)
        run = self.create_run(start_time=_ms(trial.started), tags=tags,
                              run_name=str(short_name(doc) if trial.name != "?" else job_dir.name))
        run_id = str(run.info.run_id)
        client, _ = self.connect()
        self.log_batch(run_id, params=flatten_params(doc.config, red),
                       metrics=trial_metrics(doc), timestamp=_ms(trial.finished))
        with tempfile.TemporaryDirectory(prefix="specsweep-mlflow-") as tmp:
            stage_artifacts(doc, job_dir, Path(tmp), red, plots)
            client.log_artifacts(run_id, tmp)
        if doc.cells:
            client.log_table(run_id, data=cell_table(doc), artifact_file="cells.json")
        client.set_terminated(run_id, status=RUN_STATUS.get(str(doc.status), "FAILED"),
                              end_time=_ms(trial.finished))
        client.set_tag(run_id, TAG_COMPLETE, "true")
        return run_id

    def _write_back(self, result: TrialResult | Mapping[str, Any], job_dir: Path, run_id: str) -> None:
        """``mlflow: {run_id, synced: true, ...}`` into result.json (atomic)."""
        info = MlflowInfo(run_id=run_id, synced=True, tracking_uri=self.display_uri,
                          experiment=self.experiment, experiment_id=self._experiment_id)
        if isinstance(result, TrialResult):
            result.mlflow = info  # keep the caller's copy in step with the file
        elif isinstance(result, dict):
            result["mlflow"] = info.to_dict()
        path = job_dir / RESULT_FILE
        from sweep.io import readback

        try:  # the file as it is on disk, through the reader of files read back (never a FIFO, bounded)
            doc = readback.read_json(path)
            if not isinstance(doc, dict):
                raise ValueError("not a result document")
        except (OSError, ValueError):
            doc = normalize(result).masked()
        doc["mlflow"] = info.to_dict()
        write_atomic(path, doc)

    # -- the sweep's parent run (sweep.record.parent) ----------------------------
    def start_parent(self, sweep_dir: Path, name: str, params: Mapping[str, Any]) -> str | None:
        """Parent run of a multirun/search; ``<sweep_dir>/mlflow_parent.json`` is
        written even when MLflow is down, so a later trial or sync creates it."""
        if not self.enabled:
            return None
        sweep_dir = self._dir(sweep_dir)
        _tracking_off.clear(sweep_dir)  # a new run of the sweep tries MLflow again
        _parent.record_parent_start(self, sweep_dir, name, params)
        try:
            run_id = _parent.ensure_parent(self, sweep_dir)
            client, _ = self.connect()
            if client.get_run(run_id).info.status != "RUNNING":  # a resumed sweep: running again
                client.update_run(run_id, status="RUNNING")
            return run_id
        except Exception as exc:  # noqa: BLE001 - tracking never fails the sweep
            if _tracking_off.is_timeout(exc):
                _tracking_off.switch_off(sweep_dir, str(exc), sweep_dir)
            else:
                _warn_once(secrets.mask_text(f"{exc}; the sweep goes on with results on disk: "
                                             f"`python -m sweep.sync {sweep_dir}` uploads them later"))
            return None

    def parent_for(self, sweep_dir: Path) -> str | None:
        """Run id recorded by start_parent (None when MLflow was down then)."""
        return _parent.read_parent_file(self._dir(sweep_dir)).get("run_id") or None

    def end_parent(self, sweep_dir: Path, status: str = "FINISHED",
                   artifacts: MakeSweepArtifacts | None = None) -> None:
        """Sweep-level plots and summary table (what ``artifacts`` makes: the caller's, from the
        report), then end the parent run."""
        if not self.enabled:
            return
        sweep_dir = self._dir(sweep_dir)
        _parent.record_parent_end(sweep_dir, status)
        if _tracking_off.reason(sweep_dir):
            return  # `python -m sweep.sync` finishes the parent run later
        try:
            _parent.finalize_parent(self, sweep_dir, artifacts)
        except Exception as exc:  # noqa: BLE001 - tracking never fails the sweep
            if _tracking_off.is_timeout(exc):
                _tracking_off.switch_off(sweep_dir, str(exc), sweep_dir)
                return
            _warn_once(secrets.mask_text(f"{exc}; `python -m sweep.sync {sweep_dir}` finishes "
                                         "the parent run later"))


# -- where a person finds a run ------------------------------------------------------------------
def _open_hint(tracking_uri: str | None) -> str:
    uri = str(tracking_uri or "")
    if uri.startswith(("http://", "https://")):
        return "open"
    where = launch_dir()
    here = where.resolve() == Path.cwd().resolve()
    return "run `mlflow ui`" + ("" if here else f" in {where}") + ", then open"


def run_line(doc: TrialResult) -> str | None:
    """One line: the trial's MLflow run and the address of its page (None when not logged)."""
    info = doc.mlflow
    if info is None or not info.run_id:
        return None
    from sweep.record.naming import group_name
    from sweep.score.configs import short_name

    return (f"run '{short_name(doc)}' in group '{group_name(doc)}' of experiment '{info.experiment}' "
            f"({info.tracking_uri}): "
            f"{_open_hint(info.tracking_uri)} {ui_url(info.tracking_uri, info.experiment_id, info.run_id)} "
            "(its Artifacts tab: result.json, server.log, plots/)")


def sweep_line(sweep_dir: Path) -> str | None:
    """One line: the sweep's parent run and the address of its trials' view (None when not logged)."""
    record = _parent.read_parent_file(Path(sweep_dir))
    if not record.get("run_id"):
        return None
    uri = record.get("tracking_uri")
    return (f"parent run '{record.get('name') or Path(sweep_dir).name}' in experiment "
            f"'{record.get('experiment')}' ({uri}), its trials nested under it: {_open_hint(uri)} "
            f"{ui_url(uri, record.get('experiment_id'))}")

