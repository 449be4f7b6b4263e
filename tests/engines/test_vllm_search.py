"""docs/vllm.md's 3-trial Optuna search over vLLM's n-gram drafting on the real engine, recorded in MLflow."""

from __future__ import annotations

from pathlib import Path

import pytest

from _support import docs_commands

from .conftest import explain, results

pytestmark = pytest.mark.slow


@pytest.mark.timeout(1800)
def test_the_docs_search_over_the_ngram_draft(vllm_engine, tmp_path: Path, request: pytest.FixtureRequest):
    """docs/vllm.md's search, run as printed: three Optuna trials over the draft length and the lookup
    window (hydra/sweeper/space=vllm), the spec=none baseline first, the study and runs where the
    page says (./multirun, ./mlflow.db)."""
    import optuna
    from mlflow.tracking import MlflowClient

    proc = docs_commands.run("docs/vllm.md", "python -m sweep -m server=vllm hydra/sweeper=optuna", tmp_path, request)
    assert proc.returncode == 0, explain(proc)
    (study_db,) = (tmp_path / "multirun").rglob("optuna.db")  # hydra.sweeper.storage null: the sweep dir's
    sweep_dir = study_db.parent
    study = optuna.load_study(study_name="cpu-ngram-vllm_ci-tok_s_lowc", storage=f"sqlite:///{study_db}")
    trials = study.trials
    assert len(trials) == 3 and all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    # the spec's own values come first (the space's enqueued reference)
    assert trials[0].params == {"spec.budget": 4, "spec.ngram_n_max": 4, "spec.ngram_n_min": 2}
    assert all(t.value and t.value > 0 for t in trials)
    assert (sweep_dir / "best.yaml").is_file()
    assert "--speculative-config" in proc.stdout  # the best config's server command
    every = results(sweep_dir)
    base = [d for d in every if d["config"]["spec"]["algorithm"] == "none"]
    docs = [d for d in every if d["config"]["spec"]["algorithm"] == "ngram"]
    assert len(base) == 1 and base[0]["status"] == "ok"  # run once, before the first trial; the others find it
    # a configuration the sampler proposes again is not run again (same result)
    assert len(docs) == len({tuple(sorted(t.params.items())) for t in trials}) >= 2
    assert all(d["status"] == "ok" and d["acceptance"]["metrics"]["drafts"] > 0 for d in docs)
    assert all(d["speedup_vs_baseline"] > 0 for d in docs)

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("specsweep")
    runs = client.search_runs([exp.experiment_id], max_results=50)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")
                and r.data.params.get("spec.algorithm") == "ngram"]
    assert len(children) == len(docs)
    for r in children:
        assert r.data.params["server.name"] == "vllm"
        assert r.data.metrics["accept_len"] > 1.0 and 0 < r.data.metrics["accept_rate"] <= 1.0
        history = client.get_metric_history(r.info.run_id, "accept_pos")  # acceptance per draft position
        budget = int(r.data.params["spec.budget"])
        assert sorted(m.step for m in history) == list(range(budget))
