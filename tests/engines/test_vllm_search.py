"""A 3-trial Optuna search over vLLM's n-gram draft length on the real engine, recorded in MLflow."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import explain, results

pytestmark = pytest.mark.slow


@pytest.mark.timeout(1800)
def test_optuna_search_over_the_ngram_budget(vllm_cli, tmp_path: Path):
    import optuna
    from mlflow.tracking import MlflowClient

    storage = f"sqlite:///{tmp_path}/study.db"
    tracking = f"sqlite:///{tmp_path}/mlflow.db"
    proc = vllm_cli("-m", "hydra/sweeper=optuna", "hydra/sweeper/space=vllm", "hydra.sweeper.n_trials=3",
                    "spec.budget=choice(2,4)", "spec.ngram_n_max=choice(3,4)", "spec.ngram_n_min=choice(1,2)",
                    f"hydra.sweeper.storage={storage}", "hydra.sweeper.plots.enabled=false",
                    f"hydra.sweep.dir={tmp_path}/sweep", f"mlflow.tracking_uri={tracking}",
                    mlflow=True, timeout=1500)
    assert proc.returncode == 0, explain(proc)
    study = optuna.load_study(study_name="cpu-ngram-vllm_ci-tok_s_lowc", storage=storage)
    trials = study.trials
    assert len(trials) == 3 and all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    # the spec's own values come first (the space's enqueued reference)
    assert trials[0].params == {"spec.budget": 4, "spec.ngram_n_max": 4, "spec.ngram_n_min": 2}
    assert all(t.value and t.value > 0 for t in trials)
    assert (tmp_path / "sweep" / "best.yaml").is_file()
    assert "--speculative-config" in proc.stdout  # the best config's server command
    docs = results(tmp_path / "sweep")
    # a configuration the sampler proposes again is not run again (same result)
    assert len(docs) == len({tuple(sorted(t.params.items())) for t in trials}) >= 2
    assert all(d["status"] == "ok" and d["acceptance"]["metrics"]["drafts"] > 0 for d in docs)

    client = MlflowClient(tracking_uri=tracking)
    exp = client.get_experiment_by_name("specsweep")
    runs = client.search_runs([exp.experiment_id], max_results=50)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(children) == len(docs)
    for r in children:
        assert r.data.params["server.name"] == "vllm"
        assert r.data.metrics["accept_len"] > 1.0 and 0 < r.data.metrics["accept_rate"] <= 1.0
        history = client.get_metric_history(r.info.run_id, "accept_pos")  # acceptance per draft position
        budget = int(r.data.params["spec.budget"])
        assert sorted(m.step for m in history) == list(range(budget))
