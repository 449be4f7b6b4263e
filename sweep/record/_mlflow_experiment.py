"""The experiment every run goes to, and the comparison view it carries in the UI.

The experiment is created with its artifacts next to a local sqlite store
(not under a Hydra job's cwd), opens on the runs table, and carries a saved
runs-table view: trials only, grouped by box, best first, at
``...#/experiments/<id>/runs?viewStateShareKey=specsweep-trials``.

"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

log = logging.getLogger("sweep.record.tracking")

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
    try:
        exp_id = str(client.create_experiment(name, artifact_location=location))
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
        wanted["mlflow.experimentKind"] = "custom_model_development"
    for key, value in wanted.items():
        if tags.get(key) != value:
            try:
                client.set_experiment_tag(exp.experiment_id, key, value)
            except Exception as exc:  # noqa: BLE001 - cosmetic only
                log.debug("could not set %s on the experiment: %s", key, exc)
