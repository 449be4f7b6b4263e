"""The experiment every run goes to, and the comparison view it carries in the UI.

The experiment is created with its artifacts next to a local sqlite store
(not under a Hydra job's cwd), opens on the runs table, and carries a saved
runs-table view: trials only, grouped like with like, best first, the objective and its interval
in the first columns, rounded values, at
``...#/experiments/<id>/runs?viewStateShareKey=specsweep-trials``.

"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

from sweep.score.names import LABELS

log = logging.getLogger("sweep.record.tracking")

UI_VIEW_KEY = "specsweep-trials"
UI_VIEW_TAG = f"mlflow.sharedViewState.{UI_VIEW_KEY}"
RUN_NAME, CREATED = "attributes.`Run Name`", "runDateAndNestInfo"  # the UI's column ids
DESCRIPTION, OBJECTIVE = "attributes.`Description`", "metrics.`objective`"
UI_VIEW = {
    "searchFilter": "tags.`specsweep.kind` = 'trial'",
    # each run's own objective (every objective is a maximum): a group sorts by its own
    "orderByKey": "metrics.`objective`", "orderByAsc": False,
    # At 1400 px the UI's side panels leave the table Run Name, Created, Duration and about two more
    # columns, and it places attributes before metrics before tags: the run's description (the
    # objective ± its interval and the config's knobs, _run_content.description) and the objective
    # metric come first. Then the headline figures, as short-named tags rounded to 4 significant
    # figures (_run_content.ROUNDED; the metrics keep full precision: sort by them, as the view does)
    "selectedColumns": [DESCRIPTION, OBJECTIVE, "tags.`status`",
                        *(f"tags.`{LABELS[k]}`" for k in (
                            "tok_s_lowc", "headline_concurrency", "speedup_vs_baseline", "accept_len", "accept_rate",
                            "max_load", "ttft_ms_p50", "tpot_ms_p50", "coding_pass_rate")),
                        "tags.`failure.reason`", *(f"tags.`{LABELS[k]}`" for k in ("tok_s_peak", "usd_per_mtok")),
                        "tags.`config`", "tags.`config.id`"],
    # The widths and order (by the UI's column ids) that keep the group's name, the description and
    # the objective on screen at 1400 px beside the side panels (about 790 px of table): the name
    # column shows "Group: " and the group name's first 20 characters (record/naming.group_name).
    "columnOrder": [RUN_NAME, CREATED, DESCRIPTION, OBJECTIVE, "duration"],
    "columnWidths": {RUN_NAME: 240, CREATED: 110, DESCRIPTION: 262, OBJECTIVE: 90},
    # like with like: one group per box, model, workload matrix and objective (sweep/score/configs.py
    # group_label: the report's groups), so a 12-cell run is never ranked with a one-cell one
    "groupBy": {"aggregateFunction": "max", "groupByKeys": [{"mode": "tag", "groupByData": "group"}]},
}
# The MLflow 3 UI opens every experiment in its GenAI view unless the page's address asks for the
# classic one (3.17: the workflowType query parameter, else what the user picked last, else GenAI);
# newer releases also follow the experiment's mlflow.experimentKind tag, which we set at creation.
EXPERIMENT_KIND = "custom_model_development"
CLASSIC_VIEW = "workflowType=machine_learning"


def ui_path(experiment_id: str | None, run_id: str | None = None) -> str:
    """The UI's address (after host:port) of an experiment's trials view or of one run, in the
    classic (model training) view."""
    if experiment_id is None:
        return f"/#/experiments?{CLASSIC_VIEW}"
    if run_id:
        return f"/#/experiments/{experiment_id}/runs/{run_id}?{CLASSIC_VIEW}"
    return f"/#/experiments/{experiment_id}/runs?viewStateShareKey={UI_VIEW_KEY}&{CLASSIC_VIEW}"


def ensure_experiment(client: Any, name: str, tracking_uri: str) -> str:
    """Id of experiment ``name`` (restored if deleted, created if missing)."""
    from mlflow.exceptions import MlflowException

    exp = client.get_experiment_by_name(name)
    if exp is not None:
        if exp.lifecycle_stage == "deleted":
            client.restore_experiment(exp.experiment_id)
        ui_defaults(client, exp)
        return str(exp.experiment_id)
    location = None
    if tracking_uri.startswith("sqlite:///"):
        # MLflow would root artifacts at <cwd>/mlruns, and cwd may be a Hydra job dir.
        db = Path(tracking_uri[len("sqlite:///"):].partition("?")[0])
        location = (db.parent / "mlruns" / re.sub(r"[^\w.-]", "_", name)).as_uri()
    try:  # a classic experiment from its first moment (the kind is a tag of the creation itself)
        exp_id = str(client.create_experiment(name, artifact_location=location,
                                              tags={"mlflow.experimentKind": EXPERIMENT_KIND}))
    except MlflowException:  # created meanwhile by a parallel job
        if (exp := client.get_experiment_by_name(name)) is None:
            raise
        return str(exp.experiment_id)
    ui_defaults(client, client.get_experiment(exp_id))
    return exp_id


def ui_defaults(client: Any, exp: Any) -> None:
    """Open the experiment on its runs table and register the comparison view.
    Best effort: the view's JSON is the UI's, an unknown shape only hides it."""
    tags = dict(exp.tags or {})
    wanted = {UI_VIEW_TAG: json.dumps(UI_VIEW, sort_keys=True)}
    if "mlflow.experimentKind" not in tags:  # never override the user's choice
        wanted["mlflow.experimentKind"] = EXPERIMENT_KIND
    for key, value in wanted.items():
        if tags.get(key) != value:
            try:
                client.set_experiment_tag(exp.experiment_id, key, value)
            except Exception as exc:  # noqa: BLE001 - cosmetic only
                log.debug("could not set %s on the experiment: %s", key, exc)


def ui_url(tracking_uri: str | None, experiment_id: str | None, run_id: str | None = None) -> str:
    """Where a person opens a run (or the experiment's trials view): the tracking server itself;
    for a local store the ``mlflow ui``/``mlflow server`` running on this machine for it (its own
    ``--host``/``--port``; ``MLFLOW_UI_URL`` overrides), else what ``mlflow ui`` serves by default."""
    uri = str(tracking_uri or "")
    if uri.startswith(("http://", "https://")):
        base = uri.rstrip("/")
    else:
        base = (os.environ.get("MLFLOW_UI_URL") or running_ui(uri) or DEFAULT_UI).rstrip("/")
    return base + ui_path(experiment_id, run_id)


DEFAULT_UI = "http://127.0.0.1:5000"


def running_ui(tracking_uri: str) -> str | None:
    """The address of an ``mlflow ui``/``mlflow server`` process of this machine that serves
    ``tracking_uri`` (its ``--backend-store-uri``, or the default store of its own directory),
    read from its command line (``--host``, ``--port``, ``-h``, ``-p``); None when none does."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    want = _store(tracking_uri)
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = [a.decode(errors="replace") for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        at = next((i for i, a in enumerate(argv) if a.endswith("mlflow") or a == "mlflow"
                   or (a == "-m" and i + 1 < len(argv) and argv[i + 1] == "mlflow")), None)
        if at is None or not ({"ui", "server"} & set(argv[at:at + 3])):
            continue
        opts = _options(argv[at:])
        store = opts.get("--backend-store-uri") or "sqlite:///mlflow.db"
        if want is not None and _store(store, cwd) != want:
            continue
        host = opts.get("--host") or "127.0.0.1"
        host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        return f"http://{host}:{opts.get('--port') or '5000'}"
    return None


def _options(argv: list[str]) -> dict[str, str]:
    short = {"-h": "--host", "-p": "--port"}
    out: dict[str, str] = {}
    for i, a in enumerate(argv):
        key, eq, value = a.partition("=")
        key = short.get(key, key)
        if key in ("--host", "--port", "--backend-store-uri"):
            if eq:
                out[key] = value
            elif i + 1 < len(argv):
                out[key] = argv[i + 1]
    return out


def _store(uri: str, cwd: Path | None = None) -> str | None:
    """A local store's file, absolute (None: not a local sqlite/file store)."""
    if uri.startswith("sqlite:///"):
        path = Path(uri[len("sqlite:///"):])
    elif uri.startswith("file:"):
        path = Path(uri[len("file:"):].lstrip("/") and "/" + uri[len("file:"):].lstrip("/"))
    elif uri and "://" not in uri:
        path = Path(uri)
    else:
        return None
    if not path.is_absolute():
        path = (cwd or Path.cwd()) / path
    return str(path.resolve())

