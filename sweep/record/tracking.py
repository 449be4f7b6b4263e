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
* Secrets never leave the machine: values of config keys and environment
  variables named like api_key/password/secret/token are masked in every
  param, tag and artifact.

This module is the ``Tracker`` facade; the parts live in private modules
named after what they do, and their public names are re-exported here:

* ``sweep._tracking_uri``      where runs go (URI resolution, reachability probe)
* ``sweep._redact``            secret masking, param flattening, MLflow's limits
* ``sweep._run_content``       what a trial becomes: id, tags, metrics, artifacts
* ``sweep._mlflow_experiment`` the experiment and its comparison view in the UI

mlflow is imported inside functions only (``python -m sweep --help`` stays fast).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping
from urllib.parse import urlsplit

from sweep._mlflow_experiment import UI_VIEW, UI_VIEW_KEY, UI_VIEW_TAG, ensure_experiment
from sweep._redact import (DROP_FROM_PARAMS, MASK, MAX_KEY, MAX_PARAM_VALUE, MAX_TAG_VALUE, NOT_SECRETS,
                           SECRET_NAME, Redactor, collect_secrets, flatten_params, is_secret_name,
                           mask_tree, redactor_for, safe_uri, truncate)
from sweep._run_content import (CELL_SERIES, RUN_STATUS, SERVER_LOG_MAX_BYTES, TAG_COMPLETE, TAG_KIND,
                                TAG_PARENT, TAG_RESULT_ID, TAG_SWEEP_KEY, _ms, cell_table, git_sha,
                                normalize, result_id, stage_artifacts, sweep_key, trial_metrics,
                                trial_tags)
from sweep._tracking_uri import NETWORK_PORTS, launch_dir, probe as _probe, resolve_tracking_uri

__all__ = [
    "CELL_SERIES", "DEFAULT_EXPERIMENT", "DROP_FROM_PARAMS", "MASK", "MAX_KEY", "MAX_PARAM_VALUE",
    "MAX_TAG_VALUE", "NETWORK_PORTS", "NOT_SECRETS", "PARENT_FILE", "RESULT_FILE", "RUN_STATUS",
    "SECRET_NAME", "SERVER_LOG_MAX_BYTES", "TAG_COMPLETE", "TAG_KIND", "TAG_PARENT", "TAG_RESULT_ID",
    "TAG_SWEEP_KEY", "UI_VIEW", "UI_VIEW_KEY", "UI_VIEW_TAG", "Redactor", "Tracker", "TrackingUnavailable",
    "cell_table", "collect_secrets", "flatten_params", "git_sha", "is_secret_name", "launch_dir",
    "mask_tree", "normalize", "redactor_for", "resolve_tracking_uri", "result_id", "safe_uri",
    "stage_artifacts", "sweep_key", "trial_metrics", "trial_tags", "truncate",
]

log = logging.getLogger(__name__)

PARENT_FILE = "mlflow_parent.json"
RESULT_FILE = "result.json"
DEFAULT_EXPERIMENT = "specsweep"

_warned = False
# (tracking URI, experiment name) -> id, once per process: the jobs of a
# multirun share one interpreter, and each one would look it up again.
_experiment_ids: dict[tuple[str, str], str] = {}
# What MLflow answers when a cached experiment was deleted (or removed) since.
_STALE_EXPERIMENT = frozenset({"INVALID_PARAMETER_VALUE", "INVALID_STATE", "RESOURCE_DOES_NOT_EXIST"})


class TrackingUnavailable(RuntimeError):
    """MLflow cannot be reached; the message says where and why."""


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

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        settings = dict(settings or {})
        self.enabled = bool(settings.get("enabled", True))
        self.experiment = str(settings.get("experiment") or DEFAULT_EXPERIMENT)
        self._configured = settings.get("tracking_uri")
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
        if problem := _probe(uri):
            raise TrackingUnavailable(f"MLflow at {safe_uri(uri)} is unreachable: {problem}")
        if urlsplit(uri).scheme in ("http", "https"):
            # Bound MLflow's retry loop (7 retries with exponential backoff by default).
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
        from mlflow.tracking import MlflowClient

        from sweep import _sqlite_store

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
    def log_trial(self, result: dict[str, Any], job_dir: Path, *,
                  parent_run_id: str | None = None) -> str | None:
        """One child run for one result; None (warned once) when MLflow is down."""
        if not self.enabled:
            return None
        try:
            return self.upload(result, Path(job_dir), parent_run_id=parent_run_id)
        except Exception as exc:  # noqa: BLE001 - the trial must never fail because of MLflow
            self._forget_experiment()
            where = (result.get("trial") or {}).get("sweep_dir") or job_dir
            _warn_once(f"{exc}; results stay on disk ({Path(job_dir) / RESULT_FILE}): "
                       f"`python -m sweep.sync {where}` uploads them later")
            return None

    def upload(self, result: dict[str, Any], job_dir: Path, *, parent_run_id: str | None = None) -> str:
        """Create the run unless this exact result is already complete in
        MLflow; then mark result.json synced. Raises on any MLflow error."""
        return self.upload_result(result, job_dir, parent_run_id=parent_run_id)[0]

    def upload_result(self, result: dict[str, Any], job_dir: Path, *,
                      parent_run_id: str | None = None) -> tuple[str, bool]:
        """``upload`` that also says whether a run was created (False: found)."""
        doc = normalize(result)
        rid = result_id(doc)
        client, exp = self.connect()
        sweep_dir = (doc.get("trial") or {}).get("sweep_dir")
        if parent_run_id is None and sweep_dir and (self._dir(sweep_dir) / PARENT_FILE).exists():
            from sweep.sync import ensure_parent  # start_parent ran while MLflow was down

            parent_run_id = ensure_parent(self, self._dir(sweep_dir))
        existing = self.find_run(TAG_RESULT_ID, rid, "trial")
        created = not (existing is not None and existing.data.tags.get(TAG_COMPLETE) == "true")
        if not created:
            run_id = str(existing.info.run_id)
        else:
            if existing is not None:  # an upload that died half way
                client.delete_run(existing.info.run_id)
            run_id = self._create_trial_run(doc, rid, Path(job_dir), parent_run_id)
        self._write_back(result, Path(job_dir), run_id)
        return run_id, created

    def _create_trial_run(self, doc: dict[str, Any], rid: str, job_dir: Path, parent: str | None) -> str:
        trial = doc.get("trial") or {}
        red = redactor_for(doc)
        tags = {k: truncate(red.text(str(v)), MAX_TAG_VALUE)
                for k, v in trial_tags(doc, rid, parent, job_dir).items()}
        run = self.create_run(start_time=_ms(trial.get("started")), tags=tags,
                              run_name=str(trial.get("name") or job_dir.name))
        run_id = str(run.info.run_id)
        client, _ = self.connect()
        self.log_batch(run_id, params=flatten_params(doc.get("config") or {}, red),
                       metrics=trial_metrics(doc), timestamp=_ms(trial.get("finished")))
        with tempfile.TemporaryDirectory(prefix="specsweep-mlflow-") as tmp:
            stage_artifacts(doc, job_dir, Path(tmp), red)
            client.log_artifacts(run_id, tmp)
        if doc.get("cells"):
            client.log_table(run_id, data=cell_table(doc), artifact_file="cells.json")
        client.set_terminated(run_id, status=RUN_STATUS.get(str(doc.get("status")), "FAILED"),
                              end_time=_ms(trial.get("finished")))
        client.set_tag(run_id, TAG_COMPLETE, "true")
        return run_id

    def _write_back(self, result: dict[str, Any], job_dir: Path, run_id: str) -> None:
        """``mlflow: {run_id, synced: true, ...}`` into result.json (atomic)."""
        from sweep.result import write_atomic

        info = {"run_id": run_id, "synced": True, "tracking_uri": self.display_uri,
                "experiment": self.experiment}
        if isinstance(result, dict):
            result["mlflow"] = dict(info)  # keep the caller's copy in step with the file
        path = job_dir / RESULT_FILE
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            doc = normalize(result)
        doc["mlflow"] = info
        write_atomic(path, doc)

    # -- the sweep's parent run (record file + logic in sweep.sync) -------------
    def start_parent(self, sweep_dir: Path, name: str, params: Mapping[str, Any]) -> str | None:
        """Parent run of a multirun/search; ``<sweep_dir>/mlflow_parent.json`` is
        written even when MLflow is down, so a later trial or sync creates it."""
        if not self.enabled:
            return None
        from sweep.sync import ensure_parent, record_parent_start

        sweep_dir = self._dir(sweep_dir)
        record_parent_start(self, sweep_dir, name, params)
        try:
            return ensure_parent(self, sweep_dir)
        except Exception as exc:  # noqa: BLE001 - tracking never fails the sweep
            _warn_once(f"{exc}; the sweep goes on with results on disk: "
                       f"`python -m sweep.sync {sweep_dir}` uploads them later")
            return None

    def parent_for(self, sweep_dir: Path) -> str | None:
        """Run id recorded by start_parent (None when MLflow was down then)."""
        from sweep.sync import read_parent_file

        return read_parent_file(self._dir(sweep_dir)).get("run_id") or None

    def end_parent(self, sweep_dir: Path, status: str = "FINISHED") -> None:
        """Sweep-level plots and summary table, then end the parent run."""
        if not self.enabled:
            return
        from sweep.sync import finalize_parent, record_parent_end

        sweep_dir = self._dir(sweep_dir)
        record_parent_end(sweep_dir, status)
        try:
            finalize_parent(self, sweep_dir)
        except Exception as exc:  # noqa: BLE001 - tracking never fails the sweep
            _warn_once(f"{exc}; `python -m sweep.sync {sweep_dir}` finishes the parent run later")
