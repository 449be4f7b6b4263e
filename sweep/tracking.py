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

mlflow is imported inside functions only (``python -m sweep --help`` stays fast).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import socket
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping
from urllib.parse import urlsplit, urlunsplit


log = logging.getLogger(__name__)

PARENT_FILE = "mlflow_parent.json"
RESULT_FILE = "result.json"
DEFAULT_EXPERIMENT = "specsweep"
TAG_RESULT_ID = "specsweep.result_id"
TAG_KIND = "specsweep.kind"
TAG_COMPLETE = "specsweep.complete"
TAG_SWEEP_KEY = "specsweep.sweep_key"
TAG_PARENT = "mlflow.parentRunId"   # what MLflow's UI nests runs by
RUN_STATUS = {"ok": "FINISHED", "failed": "FAILED", "interrupted": "KILLED", "running": "KILLED"}
CELL_SERIES = (("tok_s", "output_tok_s"), ("per_stream_tok_s", "per_stream_tok_s"),
               ("ttft_ms_p50", "ttft_ms_p50"), ("itl_ms_p50", "itl_ms_p50"),
               ("tpot_ms_p50", "tpot_ms_p50"), ("accept_len", "accept_len"),
               ("errors", "errors"), ("usd_per_mtok", "usd_per_mtok"))
SERVER_LOG_MAX_BYTES = 16 * 1024 * 1024
NETWORK_PORTS = {"http": 80, "https": 443, "postgresql": 5432, "mysql": 3306, "mssql": 1433}
MAX_PARAM_VALUE = 6000   # mlflow.utils.validation.MAX_PARAM_VAL_LENGTH
MAX_TAG_VALUE = 8000     # mlflow.utils.validation.MAX_TAG_VAL_LENGTH
MAX_KEY = 250            # mlflow.utils.validation.MAX_ENTITY_KEY_LENGTH
# Subtrees that are long and already in config.yaml / command.txt.
DROP_FROM_PARAMS = frozenset({"render", "args", "sim_args"})
SECRET_NAME = re.compile(r"(?:^|[_\-.])(?:api[_-]?key|apikey|password|passwd|secret|token|"
                         r"credentials?)(?:$|[_\-.])", re.IGNORECASE)
NOT_SECRETS = frozenset({"true", "false", "none", "null", "yes", "no", "***"})
MASK = "***"
# A saved runs-table view of the MLflow UI: trials only, grouped by box, best first.
UI_VIEW_KEY = "specsweep-trials"
UI_VIEW_TAG = f"mlflow.sharedViewState.{UI_VIEW_KEY}"
UI_VIEW = {
    "searchFilter": "tags.`specsweep.kind` = 'trial'",
    "orderByKey": "metrics.`tok_s_c1`", "orderByAsc": False,
    "selectedColumns": ["params.`spec.budget`", "params.`spec.topk`", "params.`spec.window`",
                        "tags.`failure.reason`", "metrics.`tok_s_c1`", "metrics.`tok_s_peak`",
                        "metrics.`speedup_vs_baseline`", "metrics.`accept_len`",
                        "metrics.`coding_pass_rate`", "metrics.`ttft_ms_p50`", "metrics.`usd_per_mtok`"],
    "groupBy": {"aggregateFunction": "max", "groupByKeys": [{"mode": "tag", "groupByData": "hardware"}]},
}

_warned = False


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


def launch_dir() -> Path:
    """The directory the user launched from, even after Hydra changed cwd."""
    if "hydra" in sys.modules:
        try:
            from hydra.utils import get_original_cwd

            return Path(get_original_cwd())
        except (ImportError, ValueError):  # ValueError: Hydra is not running
            pass
    return Path(os.getcwd())


def _has_file_store(mlruns: Path) -> bool:
    """MLflow keeps ``./mlruns`` as its default when that holds a file store."""
    try:
        return any(p.is_dir() and p.name.isdigit() and (p / "meta.yaml").exists()
                   for p in mlruns.iterdir())
    except OSError:
        return False


def resolve_tracking_uri(configured: str | None = None, base: Path | None = None) -> str:
    """configured > $MLFLOW_TRACKING_URI > MLflow's default; local paths made
    absolute against ``base`` (the launch dir) so every job writes one store."""
    from mlflow.store.tracking import DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH, DEFAULT_TRACKING_URI

    base = Path(base) if base else launch_dir()
    uri = str(configured or os.environ.get("MLFLOW_TRACKING_URI") or "")
    if not uri:
        legacy = base / DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH
        uri = legacy.resolve().as_uri() if _has_file_store(legacy) else DEFAULT_TRACKING_URI
    scheme = urlsplit(uri).scheme
    if scheme == "sqlite" and uri.startswith("sqlite:///"):
        path, sep, query = uri[len("sqlite:///"):].partition("?")
        if path and path != ":memory:" and not os.path.isabs(path):
            return f"sqlite:///{(base / path).resolve()}{sep}{query}"
        return uri
    if scheme == "" or (len(scheme) == 1 and os.name == "nt"):
        return (base / uri).resolve().as_uri()
    return uri


def _probe(uri: str, timeout: float = 3.0) -> str | None:
    """A quick TCP connect for network stores: MLflow's own retries would
    otherwise hold a trial for minutes against a closed port."""
    parts = urlsplit(uri)
    scheme = parts.scheme.split("+")[0]
    if scheme not in NETWORK_PORTS or not parts.hostname:
        return None
    port = parts.port or NETWORK_PORTS[scheme]
    if scheme in ("http", "https"):
        import urllib.request

        if urllib.request.getproxies().get(scheme) and not urllib.request.proxy_bypass(parts.hostname):
            return None  # reached through a proxy: let MLflow's client try
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
    except OSError as exc:
        return f"cannot connect to {parts.hostname}:{port} ({exc.strerror or exc})"
    return None


@lru_cache(maxsize=1)
def git_sha() -> str | None:
    """HEAD of the specsweep checkout this code runs from; None when installed
    from a wheel (the package's parent must be the repository's top level)."""
    pkg = Path(__file__).resolve().parent
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


def normalize(result: Mapping[str, Any]) -> dict[str, Any]:
    """The document as it reads back from disk (no NaN, only JSON types)."""
    from sweep.result import clean_number

    return json.loads(json.dumps(clean_number(dict(result)), default=_json_default))


def result_id(doc: Mapping[str, Any]) -> str:
    """Stable id of a result: a hash of everything but its ``mlflow`` block."""
    body = {k: v for k, v in doc.items() if k != "mlflow"}
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




# -- secrets ---------------------------------------------------------------
def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(str(name)))


def _secret_value(value: Any) -> str | None:
    """Strings only (a numeric "token budget" is not a secret), long enough
    that masking it cannot garble numbers or words in a log."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    if len(value) < 4 or value.lower() in NOT_SECRETS:
        return None
    return value


def collect_secrets(*trees: Any, environ: Mapping[str, str] | None = None) -> set[str]:
    """Values of keys named like api_key/password/secret/token in the given
    trees and in the environment (where ``${oc.env:...}`` secrets come from)."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for k, v in node.items():
                if is_secret_name(k) and (s := _secret_value(v)):
                    found.add(s)
                walk(v)
        elif isinstance(node, (list, tuple)):
            for v in node:
                walk(v)

    for tree in trees:
        walk(tree)
    for name, value in (os.environ if environ is None else environ).items():
        if is_secret_name(name) and (s := _secret_value(value)):
            found.add(s)
    return found


class Redactor:
    """Masks known secret values in any text that leaves the machine."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def text(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return text


def redactor_for(*trees: Any) -> Redactor:
    return Redactor(collect_secrets(*trees))


def mask_tree(node: Any) -> Any:
    """A copy with every string under a secret-named key replaced by ***
    (numbers such as ``experts_per_token`` are not secrets)."""
    if isinstance(node, Mapping):
        return {k: (MASK if is_secret_name(k) and isinstance(v, str) and v else mask_tree(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [mask_tree(v) for v in node]
    return node


def safe_uri(uri: str) -> str:
    """The URI without user:password (what is stored in files and tags)."""
    parts = urlsplit(uri)
    if not (parts.username or parts.password) or not parts.hostname:
        return uri
    netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _param_key(key: str) -> str:
    key = re.sub(r"[^/\w.\- ]", "_", key).strip("/ ")
    return truncate(key.replace("..", "_"), MAX_KEY)


def flatten_params(tree: Mapping[str, Any], red: Redactor | None = None) -> dict[str, str]:
    """Dotted, readable keys (``spec.budget``); lists as JSON strings; the
    rendering subtrees dropped; secrets masked; MLflow's length limits kept."""
    out: dict[str, str] = {}

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for k, v in node.items():
            if str(k) in DROP_FROM_PARAMS:
                continue
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, Mapping) and v:
                walk(v, key)
                continue
            if is_secret_name(k) and isinstance(v, str) and v:
                text = MASK
            elif isinstance(v, (list, tuple, Mapping)):
                text = json.dumps(v, default=str)
            else:
                text = str(v)
            out[_param_key(key)] = truncate(red.text(text) if red else text, MAX_PARAM_VALUE)

    walk(tree, "")
    return out


# -- what a trial becomes in MLflow ------------------------------------------
def _server_version(info: Mapping[str, Any]) -> Any:
    for key in ("version", "server_version", "sglang_version", "vllm_version"):
        if info.get(key):
            return info[key]
    return None


def trial_tags(doc: Mapping[str, Any], rid: str, parent: str | None, job_dir: Path) -> dict[str, Any]:
    trial, server = doc.get("trial") or {}, doc.get("server") or {}
    failure = (doc.get("failure") or {}) if doc.get("status") != "ok" else {}
    tags: dict[str, Any] = {
        TAG_KIND: "trial", TAG_RESULT_ID: rid, TAG_PARENT: parent,
        "simulated": str(bool(doc.get("simulated"))).lower(), "hardware": trial.get("hardware"),
        "spec.algorithm": trial.get("spec"), "fingerprint": doc.get("fingerprint"),
        "status": doc.get("status"), "failure.reason": failure.get("reason"),
        "failure.message": failure.get("message"), "sweep.id": trial.get("sweep_id"),
        "sweep.job_num": trial.get("job_num"), "git.sha": git_sha(),
        "mlflow.source.git.commit": git_sha(),
        "server.version": _server_version(server.get("info") or {}),
        "server.reused": None if server.get("reused") is None else str(bool(server["reused"])).lower(),
        "overrides": " ".join(map(str, trial.get("overrides") or [])),
        "specsweep.job_dir": trial.get("job_dir") or str(job_dir),
    }
    optuna = (doc.get("config") or {}).get("optuna") or {}  # ++optuna.* from the search sweeper
    if isinstance(optuna, Mapping):
        tags.update({f"optuna.{k}": optuna.get(k) for k in ("study_name", "trial_number")
                     if optuna.get(k) is not None})
    if failure.get("reason"):
        tags["mlflow.note.content"] = (f"**{doc.get('status')}**: `{failure['reason']}` - "
                                       f"{failure.get('message') or ''}")
    return {k: v for k, v in tags.items() if v is not None and v != ""}


def trial_metrics(doc: Mapping[str, Any]) -> list[tuple[str, float, int]]:
    """(key, value, step): headline metrics at step 0, the matrix as
    ``tok_s.ctx<context>`` (and latency companions) with step = concurrency."""
    out = [(k, v, 0) for k, raw in (doc.get("metrics") or {}).items() if (v := _number(raw)) is not None]
    for cell in doc.get("cells") or []:
        if _number(cell.get("context")) is None or _number(cell.get("concurrency")) is None:
            continue
        for prefix, field in CELL_SERIES:
            if (v := _number(cell.get(field))) is not None:
                out.append((f"{prefix}.ctx{int(cell['context'])}", v, int(cell["concurrency"])))
    return out


def cell_table(doc: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Columns for ``log_table`` (nested values as JSON text)."""
    cells = list(doc.get("cells") or [])
    keys = list(dict.fromkeys(k for c in cells for k in c))
    return {k: [json.dumps(c.get(k)) if isinstance(c.get(k), (dict, list)) else c.get(k)
                for c in cells] for k in keys}


def _read_log(doc: Mapping[str, Any], job_dir: Path) -> str | None:
    candidates = [job_dir / "server.log", (doc.get("server") or {}).get("log")]
    for cand in candidates:
        if cand and Path(cand).is_file():
            with open(cand, "rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(0, size - SERVER_LOG_MAX_BYTES))
                return fh.read().decode("utf-8", errors="replace")
    return None


def stage_artifacts(doc: Mapping[str, Any], job_dir: Path, out: Path, red: Redactor) -> None:
    """Everything a run shows under Artifacts, secrets masked, into ``out``."""
    import yaml

    from sweep import plots

    def write(name: str, text: str) -> None:
        (out / name).write_text(red.text(text))

    masked = mask_tree(doc)
    write("result.json", json.dumps(masked, indent=2, default=str) + "\n")
    if masked.get("config"):
        write("config.yaml", yaml.safe_dump(masked["config"], sort_keys=False))
    if doc.get("command"):
        write("command.txt", str(doc["command"]).rstrip("\n") + "\n")
    if (text := _read_log(doc, job_dir)) is not None:
        write("server.log", text)
    tail = (doc.get("failure") or {}).get("log_tail") if doc.get("status") != "ok" else None
    if tail:
        write("log_tail.txt", str(tail).rstrip("\n") + "\n")
    plots.trial_plots(doc, out / "plots")


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

        try:
            client = MlflowClient(tracking_uri=uri)
            self._experiment_id = self._ensure_experiment(client)
        except Exception as exc:
            raise TrackingUnavailable(f"MLflow at {safe_uri(uri)} failed: {exc}") from exc
        self._client = client
        return client, self._experiment_id

    def _ensure_experiment(self, client: Any) -> str:
        from mlflow.exceptions import MlflowException

        exp = client.get_experiment_by_name(self.experiment)
        if exp is not None:
            if exp.lifecycle_stage == "deleted":
                client.restore_experiment(exp.experiment_id)
            self._ui_defaults(client, exp)
            return str(exp.experiment_id)
        location = None
        if self.tracking_uri.startswith("sqlite:///"):
            # MLflow would root artifacts at <cwd>/mlruns, and cwd may be a Hydra job dir.
            db = Path(self.tracking_uri[len("sqlite:///"):].partition("?")[0])
            name = re.sub(r"[^\w.-]", "_", self.experiment)
            location = (db.parent / "mlruns" / name).as_uri()
        try:
            exp_id = str(client.create_experiment(self.experiment, artifact_location=location))
        except MlflowException:  # created meanwhile by a parallel job
            if (exp := client.get_experiment_by_name(self.experiment)) is None:
                raise
            return str(exp.experiment_id)
        self._ui_defaults(client, client.get_experiment(exp_id))
        return exp_id

    @staticmethod
    def _ui_defaults(client: Any, exp: Any) -> None:
        """Open the experiment on its runs table, and register the comparison
        view (``...#/experiments/<id>/runs?viewStateShareKey=specsweep-trials``).
        Best effort: the view's JSON is the UI's, an unknown shape only hides it."""
        tags = dict(exp.tags or {})
        wanted = {UI_VIEW_TAG: json.dumps(UI_VIEW, sort_keys=True)}
        if "mlflow.experimentKind" not in tags:  # never override the user's choice
            wanted["mlflow.experimentKind"] = "custom_model_development"
        for key, value in wanted.items():
            if tags.get(key) != value:
                try:
                    client.set_experiment_tag(exp.experiment_id, key, value)
                except Exception as exc:  # noqa: BLE001 - cosmetic only
                    log.debug("could not set %s on the experiment: %s", key, exc)

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
        for i in range(0, len(plist), 100):
            client.log_batch(run_id, params=plist[i:i + 100])
        ts = timestamp or int(time.time() * 1000)
        mlist = [Metric(k, v, ts, step) for k, v, step in metrics]
        for i in range(0, len(mlist), 1000):
            client.log_batch(run_id, metrics=mlist[i:i + 1000])

    # -- trials ---------------------------------------------------------------
    def log_trial(self, result: dict[str, Any], job_dir: Path, *,
                  parent_run_id: str | None = None) -> str | None:
        """One child run for one result; None (warned once) when MLflow is down."""
        if not self.enabled:
            return None
        try:
            return self.upload(result, Path(job_dir), parent_run_id=parent_run_id)
        except Exception as exc:  # noqa: BLE001 - the trial must never fail because of MLflow
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
        client, exp = self.connect()
        trial = doc.get("trial") or {}
        red = redactor_for(doc)
        tags = {k: truncate(red.text(str(v)), MAX_TAG_VALUE)
                for k, v in trial_tags(doc, rid, parent, job_dir).items()}
        run = client.create_run(exp, start_time=_ms(trial.get("started")), tags=tags,
                                run_name=str(trial.get("name") or job_dir.name))
        run_id = str(run.info.run_id)
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
