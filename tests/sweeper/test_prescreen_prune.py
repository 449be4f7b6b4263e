"""The twin pre-screen and the pruner end to end: real sweeper, real sim servers, a real MLflow store.

One search on b300 (quick workload: 4 cells, no coding eval, the sim at 10x speed):
the production config first, then a clearly slower seed (budget 4, topk 1: ~17%
below at C=1, far beyond the sim's 2% noise) that the median pruner must stop
after its first cell, then the pre-screen's two best points.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from optuna.trial import TrialState

from _support import free_port

from .conftest import load
from .test_e2e import sweep_cli

STUDY = "b300-ddtree-quick-tok_s_lowc"
SEEDS = ("hydra.sweeper.enqueue=[{spec.budget:8,spec.topk:4,spec.window:2048},"
         "{spec.budget:4,spec.topk:1,spec.window:512}]")


@pytest.mark.slow
def test_prescreen_and_pruner_on_the_simulator_with_mlflow(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    storage, uri, sweep_dir = f"sqlite:///{tmp_path}/study.db", f"sqlite:///{tmp_path}/mlflow.db", tmp_path / "sweep"
    proc = sweep_cli(
        "-m", "hydra/sweeper=optuna", f"hydra.sweeper.storage={storage}", "hydra.sweeper.n_trials=4",
        "workload=quick", "server.sim.load_seconds=0.2", "server.sim.time_scale=0.1",
        f"mlflow.tracking_uri={uri}", f"server.port={free_port()}", f"hydra.sweep.dir={sweep_dir}",
        "hydra.sweeper.plots.enabled=false", SEEDS, "hydra.sweeper.prescreen.top_k=2",
        "hydra/sweeper/pruner=median", "hydra.sweeper.pruner.n_startup_trials=1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    study = load(storage, STUDY)
    trials = study.trials

    # the pre-screen: every valid point ranked, recorded in the study, the 2 best queued
    pre = study.user_attrs["prescreen"]
    assert pre["top_k"] == 2 and pre["calibration"] == "default" and len(pre["ranking"]) == 40
    values = [r["predicted"] for r in pre["ranking"]]
    assert values == sorted(values, reverse=True) and all(v > 0 for v in values)
    best_two = [r["params"] for r in pre["ranking"][:2]]
    queued = [t.params for t in trials if "prescreen_rank" in t.user_attrs]
    assert queued and all(p in best_two for p in queued)
    assert (sweep_dir / "prescreen.csv").read_text().startswith("rank,spec.budget,spec.topk,spec.window")
    # the ones run first carry the twin's 80% band of their objective; the rest do not (a band costs ~1 s)
    for r in pre["ranking"][:2]:
        assert r["low"] < r["predicted"] < r["high"], r
    assert all(r["low"] is None and r["high"] is None for r in pre["ranking"][2:])
    assert "predicted_low,predicted_high" in (sweep_dir / "prescreen.csv").read_text().splitlines()[0]

    # the pruner: the slow seed stopped after its first cell, recorded PRUNED with that cell
    slow = trials[1]
    assert slow.params == {"spec.budget": 4, "spec.topk": 1, "spec.window": 512}
    assert slow.state == TrialState.PRUNED and slow.intermediate_values and slow.last_step == 0
    doc = json.loads(Path(slow.user_attrs["result_path"]).read_text())
    assert doc["status"] == "pruned" and doc["failure"]["reason"] == "pruned"
    assert [(c["context"], c["concurrency"]) for c in doc["cells"]] == [(60, 1)]
    assert trials[0].state == TrialState.COMPLETE and trials[0].intermediate_values  # reported too

    # predicted vs measured in every result file
    for t in trials:
        if "duplicate_of" in t.user_attrs:
            continue
        pred = json.loads(Path(t.user_attrs["result_path"]).read_text())["prediction"]
        assert pred["rank"] >= 1 and pred["objective"] > 0 and pred["calibration"].startswith("calibrated: b300")
        if t.state == TrialState.COMPLETE:
            assert pred["measured"] == pytest.approx(t.values[0], rel=1e-6)
            assert abs(pred["error"]) < 0.5  # the sim at time_scale 0.1, compared like with like

    # MLflow: the parent run holds the ranking; the pruned child is KILLED and says why
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("specsweep").experiment_id])
    parent = next(r for r in runs if r.data.tags.get("specsweep.kind") == "sweep")
    assert parent.data.params["prescreen.top_k"] == "2" and parent.data.params["prescreen.calibration"] == "default"
    assert "prescreen.json" in [a.path for a in client.list_artifacts(parent.info.run_id)]
    child = next(r for r in runs if r.info.run_id == doc["mlflow"]["run_id"])
    assert child.info.status == "KILLED" and child.data.tags["status"] == "pruned"
    assert child.data.metrics["predicted_objective"] > 0
