"""The Optuna sweeper driving a real Hydra app (tests/sweeper/speed_app) in subprocesses."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from optuna.trial import TrialState

from .conftest import SPACE, load


def executed(study) -> list:
    """Trials whose job actually ran (not repeats answered from the study)."""
    return [t for t in study.trials if "duplicate_of" not in t.user_attrs
            and t.state in (TrialState.COMPLETE, TrialState.FAIL)]


def test_resume_to_larger_n_trials_without_duplicates(run_app, tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path}/study.db"
    first = run_app("hydra.sweeper.n_trials=8")  # the app's ready-made space (no params given)
    study = load(storage)
    assert len(study.trials) == 8
    # one measurement per config and no declared spread: the top trial leads, undecided, or is best
    assert "best feasible: trial" in first.stdout or "leader, undecided (no best yet): trial" in first.stdout
    # The production config is enqueued first and passed to the job with its trial number.
    t0 = study.trials[0]
    assert t0.params == {"spec.budget": 8, "spec.topk": 4, "spec.window": 2048}
    assert t0.user_attrs["mlflow_run_id"] == "run-0"
    assert Path(t0.user_attrs["job_dir"]) == tmp_path / "sweep" / "0"

    run_app("hydra.sweeper.n_trials=14")
    study = load(storage)
    assert len(study.trials) == 14, [t.state for t in study.trials]
    assert [t.number for t in study.trials] == list(range(14))
    ran = executed(study)
    keys = Counter(tuple(sorted(t.params.items())) for t in ran)
    assert max(keys.values()) == 1, f"a config ran twice: {keys.most_common(2)}"
    for t in ran:  # every trial number <-> its own job dir and run id
        assert t.user_attrs["mlflow_run_id"] == f"run-{t.number}"
        assert (tmp_path / "sweep" / str(t.number)).is_dir()
    for t in study.trials:
        if t.state == TrialState.FAIL and t.params["spec.budget"] > 8:
            assert t.user_attrs["failure_reason"] == "cuda_graph"
        if t.state == TrialState.FAIL and t.params["spec.topk"] > t.params["spec.budget"]:
            assert t.user_attrs["failure_reason"] == "config_error"


def test_best_is_feasible_and_rerunnable(run_app, tmp_path: Path) -> None:
    import subprocess

    from .conftest import APP, env

    proc = run_app(*SPACE, "hydra.sweeper.n_trials=16", "hydra.sweeper.plots.enabled=true")
    study = load(f"sqlite:///{tmp_path}/study.db")
    best = study.best_trial
    assert all(v <= 0 for v in best.constraints.values())
    assert best.params["spec.window"] != 512 and best.params["spec.budget"] <= 8
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    fastest = max(complete, key=lambda t: t.value)
    feasible = [t for t in complete if all(v <= 0 for v in t.constraints.values())]
    assert best.value == max(t.value for t in feasible)
    if fastest.params["spec.window"] == 512:  # an infeasible config was faster: not reported
        assert fastest.value > best.value
    sweep_dir = tmp_path / "sweep"
    text = (sweep_dir / "best.yaml").read_text()
    assert "server command: python -m sweep.sim" in text
    assert "server command: python -m sweep.sim" in proc.stdout
    for png in ("history.png", "importance.png", "contour.png"):
        assert (sweep_dir / "plots" / png).stat().st_size > 1000
    results = yaml.safe_load((sweep_dir / "optimization_results.yaml").read_text())
    assert results["best_params"] == best.params
    # best.yaml is a primary config for the app: it reproduces the best trial's config.
    cfg = subprocess.run([sys.executable, str(APP), "--config-dir", str(sweep_dir), "--config-name",
                          "best", "--cfg", "job"], env=env(), capture_output=True, text=True,
                         check=True, cwd=tmp_path).stdout
    spec = yaml.safe_load(cfg)["spec"]
    assert {f"spec.{k}": spec[k] for k in ("budget", "topk", "window")} == best.params


def test_failed_configs_are_fail_with_reason_and_never_rerun(run_app, tmp_path: Path) -> None:
    # 4 configs, 2 of which crash; a random sampler proposes repeats: answered, never rerun.
    proc = run_app("spec.budget=choice(8,16)", "spec.topk=choice(1,2)", "spec.window=2048",
                   "hydra/sweeper/sampler=random", "hydra.sweeper.n_trials=30",
                   "hydra.sweeper.enqueue=[]")
    study = load(f"sqlite:///{tmp_path}/study.db")
    crashed = [t for t in study.trials if t.params.get("spec.budget") == 16]
    assert crashed and all(t.state == TrialState.FAIL for t in crashed)
    assert all(t.user_attrs["failure_reason"] == "cuda_graph" for t in crashed)
    ran = executed(study)
    assert len(ran) == 4  # each of the 4 configs ran exactly once
    repeats = [t for t in study.trials if "duplicate_of" in t.user_attrs]
    assert repeats, "a random sampler on 4 points repeats itself (seed 0)"
    for t in repeats:
        assert not (tmp_path / "sweep" / str(t.number)).exists()  # no job, no server start
    assert "every point of the search space has a result" in proc.stderr + proc.stdout


def test_exception_in_a_job_does_not_abort_the_study(run_app, tmp_path: Path) -> None:
    run_app("spec.budget=choice(4,8)", "spec.topk=choice(1,2)", "spec.window=choice(1024,2048)",
            "raise_at_window=1024", "hydra.sweeper.n_trials=6", "hydra.sweeper.enqueue=[]")
    study = load(f"sqlite:///{tmp_path}/study.db")
    assert len(study.trials) == 6
    raised = [t for t in study.trials if t.params["spec.window"] == 1024 and
              "duplicate_of" not in t.user_attrs]
    assert raised and all(t.state == TrialState.FAIL for t in raised)
    assert all(t.user_attrs["failure_reason"] == "exception" for t in raised)
    assert "RuntimeError" in raised[0].user_attrs["failure_message"]
    assert any(t.state == TrialState.COMPLETE for t in study.trials)


def test_journal_storage_resumes(run_app, tmp_path: Path) -> None:
    storage = f"journal:{tmp_path}/study.log"
    run_app(*SPACE, "hydra.sweeper.n_trials=4", storage=storage)
    run_app(*SPACE, "hydra.sweeper.n_trials=7", storage=storage)
    study = load(storage)
    assert len(study.trials) == 7
    assert all(t.state.is_finished() for t in study.trials)


def test_multi_objective_pareto_front(run_app, tmp_path: Path) -> None:
    proc = run_app(*SPACE, "hydra.sweeper.n_trials=10", "hydra.sweeper.direction=[maximize,maximize]",
                   "hydra.sweeper.metrics=[tok_s_c1,tok_s_peak]", "hydra/sweeper/sampler=nsgaii")
    study = load(f"sqlite:///{tmp_path}/study.db")
    front = study.best_trials
    assert front and all(all(v <= 0 for v in t.constraints.values()) for t in front)
    assert "Pareto front" in proc.stdout
    pareto = yaml.safe_load((tmp_path / "sweep" / "pareto.yaml").read_text())["pareto"]
    assert {p["trial"] for p in pareto} <= {t.number for t in study.trials}
    assert set(pareto[0]["values"]) == {"tok_s_c1", "tok_s_peak"}


@pytest.mark.parametrize("sampler", ["gp", "grid"])
def test_other_samplers(run_app, tmp_path: Path, sampler: str) -> None:
    run_app("spec.budget=choice(4,8,16)", "spec.topk=choice(1,4)", "spec.window=2048",
            f"hydra/sweeper/sampler={sampler}", "hydra.sweeper.n_trials=5")
    study = load(f"sqlite:///{tmp_path}/study.db")
    assert 1 <= len(study.trials) <= 5
    assert len(executed(study)) == len({tuple(sorted(t.params.items())) for t in executed(study)})
    assert all(t.state.is_finished() for t in study.trials)
