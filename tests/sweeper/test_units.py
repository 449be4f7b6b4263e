"""In-process checks of the plugin's parts: params syntax, return contract, sampler view."""

from __future__ import annotations

import os
import socket
import time

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from hydra_plugins.specsweep_optuna_sweeper import _result, _sampler, _space, _storage
from hydra_plugins.specsweep_optuna_sweeper._loop import SearchLoop


def test_params_syntax_matches_hydras_optuna_sweeper() -> None:
    space = _space.parse({"a": "choice(1, 2, 4)", "b": "range(1, 10, 3)", "c": "interval(0.1, 1.0)",
                          "d": "tag(log, int(interval(1, 1024)))",
                          "h": "interval(1, 8)", "e": "x,y", "f": "range(0.5, 2.0, 0.5)",
                          "g": "tag(log, interval(1e-4, 1e-1))"},
                         ["workload=smoke", "+extra=choice(true,false)", "c=0.5"])
    d = space.distributions
    assert d["a"] == CategoricalDistribution([1, 2, 4])
    assert d["b"] == IntDistribution(1, 7, step=3)          # range: stop exclusive, like Hydra
    assert d["d"] == IntDistribution(1, 1024, log=True)
    assert d["h"] == FloatDistribution(1.0, 8.0)            # Hydra's interval is float unless int()
    assert d["e"] == CategoricalDistribution(["x", "y"])
    assert d["f"] == FloatDistribution(0.5, 1.5, step=0.5)
    assert d["g"] == FloatDistribution(1e-4, 1e-1, log=True)
    assert "c" not in d and space.fixed["c"] == "c=0.5"     # a fixed override narrows the space
    assert space.keys["extra"] == "+extra"
    assert space.overrides({"a": 2, "extra": True}) == ["workload=smoke", "c=0.5", "a=2", "+extra=true"]
    assert space.check_params({"a": 3}) and space.check_params({"zz": 1})
    assert space.check_params({"a": 4, "b": 7}) is None
    with pytest.raises(_space.SearchSpaceError):
        _space.parse({"a": "glob(*)"}, [])


def test_return_contract() -> None:
    ok = _result.from_return({"status": "ok", "objective": 291.5, "values": {"tok_s_c1": 291.5,
                              "tok_s_peak": 3000.0}, "constraints": [0.0, float("nan")],
                              "constraint_names": ["coding_pass_rate", "errors"], "feasible": False,
                              "mlflow_run_id": "abc", "result_path": "/r.json"}, None, 1)
    assert ok.state == TrialState.COMPLETE and ok.values == [291.5]
    assert ok.constraints == {"crashed": 0.0, "coding_pass_rate": 0.0, "errors": 1.0}
    assert ok.user_attrs["mlflow_run_id"] == "abc"
    multi = _result.from_return({"status": "ok", "values": {"tok_s_c1": 1.0, "tok_s_peak": 2.0}},
                                ["tok_s_c1", "tok_s_peak"], 2)
    assert multi.values == [1.0, 2.0]
    crash = _result.from_return({"status": "failed", "failure_reason": "cuda_graph"}, None, 1)
    assert crash.state == TrialState.FAIL and crash.failure_reason == "cuda_graph"
    assert _result.from_return({"status": "interrupted"}, None, 1).interrupted
    assert _result.from_return({"status": "ok", "objective": None}, None, 1).failure_reason == "no_objective"
    assert _result.from_return(3.5, None, 1).values == [3.5]

    from sweep.errors import ConfigError

    class NamedLikeIt(ValueError):  # recognised by type, not by its class name
        pass

    NamedLikeIt.__name__ = "ConfigError"
    assert _result.from_exception(ConfigError("spec.topk", "must be <= 4")).failure_reason == "config_error"
    assert _result.from_exception(NamedLikeIt("spec.topk")).failure_reason == "exception"
    assert _result.from_exception(RuntimeError("bug")).failure_reason == "exception"


def test_sampler_sees_crashes_as_infeasible_but_study_keeps_fail() -> None:
    space = _space.parse({"b": "choice(4, 8, 16)"}, [])
    study = optuna.create_study(direction="maximize")
    study.sampler = _sampler.build({"name": "tpe", "n_startup_trials": 1}, seed=0, n_objectives=1,
                                   space=space, deterministic=["cuda_graph"])
    outcomes = {4: (100.0, None), 8: (200.0, None), 16: (None, "cuda_graph")}

    def job(number: int, overrides: list[str]) -> _result.Outcome:
        value, reason = outcomes[int(overrides[0].split("=")[1])]
        if reason:
            return _result.failed(reason)
        return _result.Outcome(TrialState.COMPLETE, [value], {"crashed": 0.0}, {"status": "ok"})

    loop = SearchLoop(study, space, job, n_trials=20, deterministic=["cuda_graph"])
    loop.enqueue([{"b": 16}, {"b": 4}, {"b": 8}])
    loop.run()
    stored = study.trials
    assert stored[0].state == TrialState.FAIL and stored[0].user_attrs["failure_reason"] == "cuda_graph"
    assert loop.executed == 3  # each config ran once; then every point had a result
    view = study.sampler._view(study)
    seen = view.get_trials(deepcopy=False)
    assert seen[0].state == TrialState.COMPLETE and seen[0].constraints["crashed"] == 1.0
    assert seen[0].values == [100.0]  # the worst observed value
    assert list(seen[1].constraints) == list(seen[0].constraints)
    assert study.best_trial.params == {"b": 8}


def test_stale_reason() -> None:
    class T:
        datetime_start = None

        def __init__(self, attrs: dict) -> None:
            self.system_attrs = attrs

    host = socket.gethostname()
    dead = {_storage.OWNER_KEY: {"host": host, "pid": 2 ** 22 + 12345},
            _storage.HEARTBEAT_KEY: time.time()}
    alive = {_storage.OWNER_KEY: {"host": host, "pid": os.getppid()},
             _storage.HEARTBEAT_KEY: time.time()}
    old = {_storage.OWNER_KEY: {"host": "elsewhere", "pid": 1}, _storage.HEARTBEAT_KEY: 0.0}
    assert "gone" in (_storage.stale_reason(T(dead), 600) or "")
    assert _storage.stale_reason(T(alive), 600) is None
    assert "heartbeat" in (_storage.stale_reason(T(old), 600) or "")


def test_best_rerun_line_drops_the_host_pool() -> None:
    """The rerun of the best config is one plain run: no launcher.hosts pool."""
    import optuna

    from hydra_plugins.specsweep_optuna_sweeper._report import overrides_of
    from hydra_plugins.specsweep_optuna_sweeper._space import SearchSpace

    space = SearchSpace(
        distributions={"spec.budget": optuna.distributions.CategoricalDistribution([4, 8])},
        keys={"spec.budget": "spec.budget"},
        fixed={"workload": "workload=smoke",
               "launcher.hosts": "launcher.hosts=[{server_port: 31001}, {server_port: 31002}]"})
    trial = optuna.trial.create_trial(params={"spec.budget": 8}, distributions=space.distributions,
                                      value=1.0)
    assert overrides_of(trial, space) == ["workload=smoke", "spec.budget=8"]


def test_a_per_load_studys_verification_gets_its_launch_overrides() -> None:
    """Identity, workload, objective and Hydra's settings come from the table; how the server is
    launched and reached comes from the study's command line (the export never carries it)."""
    from hydra_plugins.specsweep_optuna_sweeper._per_load import passed_on

    assert passed_on(["hydra/sweeper=optuna", "hydra.sweeper.n_trials=3", "server=vllm", "server.api_key=sk-abcdefg",
                      "hardware=cpu", "hardware.cpu.threads_bind=1", "spec=ngram", "spec.budget=1,2,4",
                      "workload=edit", "workload.max_tokens=64", "workload.busy_box=mark", "objective.metrics=x",
                      "optuna.seed=1",
                      "launcher=ssh", "launcher.host=h", "model=smollm2", "model.path=/m",
                      "server.executable=[/opt/v/bin/vllm,serve]"]) == [
        "server.api_key=sk-abcdefg", "hardware.cpu.threads_bind=1", "workload.busy_box=mark", "launcher=ssh",
        "launcher.host=h",
        "model.path=/m", "server.executable=[/opt/v/bin/vllm,serve]"]
