"""An Optuna search over llama.cpp's draft length, recorded in MLflow, on the real engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import explain, results

pytestmark = pytest.mark.slow


def test_optuna_search_with_mlflow_runs(sweep_cli, tmp_path: Path):
    import optuna
    from mlflow.tracking import MlflowClient

    storage = f"sqlite:///{tmp_path}/study.db"
    tracking = f"sqlite:///{tmp_path}/mlflow.db"
    proc = sweep_cli("-m", "hydra/sweeper=optuna", "hydra/sweeper/space=llamacpp", "spec=llamacpp_draft",
                     "hydra.sweeper.n_trials=3", "spec.budget=choice(1,2,4)",
                     f"hydra.sweeper.storage={storage}", "hydra.sweeper.plots.enabled=false",
                     f"hydra.sweep.dir={tmp_path}/sweep", f"mlflow.tracking_uri={tracking}",
                     mlflow=True)
    assert proc.returncode == 0, explain(proc)
    study = optuna.load_study(study_name="cpu-draft-llamacpp_ci-tok_s_c1", storage=storage)
    trials = study.trials
    assert len(trials) == 3 and all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    assert trials[0].params == {"spec.budget": 4}  # the enqueued reference comes first
    assert all(t.value and t.value > 0 for t in trials)
    assert study.best_trial.params["spec.budget"] in (1, 2, 4)
    assert (tmp_path / "sweep" / "best.yaml").is_file()
    assert "--spec-draft-n-max" in proc.stdout  # the best config's server command
    docs = results(tmp_path / "sweep")
    # a configuration the sampler proposes again is not run again (same result)
    assert len(docs) == len({t.params["spec.budget"] for t in trials}) >= 2
    assert all(d["status"] == "ok" for d in docs)

    client = MlflowClient(tracking_uri=tracking)
    exp = client.get_experiment_by_name("specsweep")
    runs = client.search_runs([exp.experiment_id], max_results=50)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(children) == len(docs) and len(runs) == len(docs) + 1
    ids = {d["mlflow"]["run_id"] for d in docs}
    assert ids == {r.info.run_id for r in children}
    for r in children:
        assert r.data.params["server.name"] == "llamacpp"
        assert r.data.metrics["tok_s_c1"] > 0
        assert r.data.metrics["accept_len"] >= 1.0  # read from llama.cpp's per-request timings
