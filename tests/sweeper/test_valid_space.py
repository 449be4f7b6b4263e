"""No ready-made space yields a config_error trial, for any sampler; quirks never start a known crash.

The project's own config (``hydra/sweeper=optuna``, the ready-made space on b300)
drives the sweeper's real code path in-process: ``open_study`` (sampler + its
valid-space wrapper), ``_rules``, ``SearchLoop``. Only the job is replaced, by one
that does what the app does before a server starts -- the typed config check
(``sweep.compose.config``, which raises the ConfigError a ``config_error`` trial
comes from) -- and then asks the *simulator's own* crash model
(``sweep.sim.perf.startup_failure``, not the YAML rule the sweeper reads) whether
the server would start. Throughput comes from the twin (``predict_cells``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from omegaconf import OmegaConf
from optuna.trial import TrialState

from hydra_plugins.specsweep_optuna_sweeper import _impl, _result, _rules, _space
from hydra_plugins.specsweep_optuna_sweeper._loop import SearchLoop
from sweep.compose.config import from_omegaconf
from sweep.errors import ConfigError
from sweep.sim import perf
from sweep.sim.predict import predict_cells

Compose = Callable[[list[str]], Any]


@pytest.fixture(scope="module")
def compose() -> Iterator[Compose]:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    import sweep.compose.resolvers  # noqa: F401

    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="sweep.conf", version_base="1.3"):
        yield lambda lines: hydra_compose(config_name="config", return_hydra_config=True,
                                          overrides=["hydra/sweeper=optuna", *lines])
    GlobalHydra.instance().clear()


class Job:
    """What the app checks before a server starts, then the sim's crash model, then the twin."""

    def __init__(self, source: _rules.ConfigSource, objectives: int) -> None:
        self.source = source
        self.objectives = objectives
        self.ran: list[dict[str, Any]] = []
        self.crashed: list[str] = []

    def __call__(self, number: int, overrides: list[str]) -> _result.Outcome:
        lines = [o for o in overrides if not o.startswith("++")]
        try:
            cfg = from_omegaconf(self.source.view({}, lines))
        except ConfigError as exc:
            return _result.from_exception(exc)  # what a config_error trial is
        raw = cfg.raw
        flags = {"disable_cuda_graph": raw["server"]["disable_cuda_graph"],
                 "skip_server_warmup": raw["server"]["skip_server_warmup"]}
        self.ran.append({"budget": cfg.spec.budget, "topk": cfg.spec.topk, "window": cfg.spec.window,
                         "eager": cfg.server.disable_cuda_graph})
        failure = perf.startup_failure(raw["hardware"], raw["model"], raw["spec"], flags)
        if failure:
            self.crashed.append(failure)
            return _result.failed(failure)
        cells = predict_cells(cfg)
        values = [cells[0]["output_tok_s"], max(c["output_tok_s"] for c in cells)][:self.objectives]
        return _result.Outcome(TrialState.COMPLETE, values, {"crashed": 0.0}, {"status": "ok"})


def run(compose: Compose, tmp: Path, sampler: str, quirks: str, n_trials: int,
        extra: tuple[str, ...] = ()) -> tuple[Any, Job, _rules.Rules]:
    base = ["hardware=b300", "workload=smoke", f"hydra/sweeper/sampler={sampler}",
            f"hydra.sweeper.quirks={quirks}", "hydra.sweeper.enqueue=[]", *extra]
    cfg = compose(base)
    node = OmegaConf.to_container(cfg.hydra.sweeper, resolve=True)
    assert isinstance(node, dict)
    node.pop("_target_", None)
    settings = _impl.Settings.from_kwargs({**node, "storage": "memory", "seed": 3, "study_name": sampler})
    space = _space.parse(settings.params, [])
    source = _rules.ConfigSource(lambda lines: compose(base + lines), space,
                                 cfg.hydra.runtime.choices.keys())
    rules = _rules.Rules(source, settings.quirks)
    study, _ = _impl.open_study(settings, space, tmp, sampler, rules=rules)
    job = Job(source, len(settings.directions))
    loop = SearchLoop(study, space, job, n_trials=n_trials, deterministic=settings.deterministic,
                      rules=rules)
    loop.enqueue(settings.enqueue)
    loop.run()
    return study, job, rules


MULTI = ("hydra.sweeper.direction=[maximize,maximize]", "hydra.sweeper.metrics=[tok_s_c1,tok_s_peak]")


@pytest.mark.parametrize("sampler, n_trials, extra", [
    ("tpe", 24, ()), ("random", 24, ()), ("gp", 10, ()), ("nsgaii", 24, MULTI)])
def test_no_sampler_runs_an_invalid_or_crashing_config(compose: Compose, tmp_path: Path, sampler: str,
                                                       n_trials: int, extra: tuple[str, ...]) -> None:
    study, job, _ = run(compose, tmp_path, sampler, "avoid", n_trials, extra)
    reasons = Counter(t.user_attrs.get("failure_reason") for t in study.trials if t.state == TrialState.FAIL)
    assert "config_error" not in reasons and not job.crashed, (reasons, job.crashed)
    # every job that ran was a valid, non-crashing point of the b300 space
    assert job.ran and all(r["topk"] <= r["budget"] <= 8 and not r["eager"] for r in job.ran)
    counted = [t for t in study.trials if t.user_attrs.get("failure_reason") != "invalid"]
    assert len(counted) == n_trials
    # a proposal the sampler could not keep inside (GP's optimum) ran nothing and did not count
    assert len(job.ran) + sum(1 for t in counted if "duplicate_of" in t.user_attrs) == n_trials


def test_the_grid_is_the_valid_points_each_once(compose: Compose, tmp_path: Path) -> None:
    study, job, rules = run(compose, tmp_path, "grid", "avoid", 500)
    valid = rules.valid_points()
    assert valid is not None and len(valid) == 40  # budgets 4/6/8 x their topks x 4 windows
    assert len(study.trials) == 40 and len(job.ran) == 40  # the grid is exhausted: nothing else asked
    assert len({tuple(sorted(r.items())) for r in job.ran}) == 40
    assert not job.crashed and all(t.state == TrialState.COMPLETE for t in study.trials)


def test_ignore_runs_the_crashes_workaround_runs_them_eager(compose: Compose, tmp_path: Path) -> None:
    _, ignored, rules = run(compose, tmp_path, "grid", "ignore", 500)
    assert len(ignored.ran) == 104 and Counter(ignored.crashed) == {"cuda_graph": 64}
    assert "64 avoided" not in rules.summary() and "104 of 112 points run" in rules.summary()
    study, worked, rules = run(compose, tmp_path, "grid", "workaround", 500)
    assert len(worked.ran) == 104 and not worked.crashed
    assert all(r["eager"] == (r["budget"] > 8) for r in worked.ran)
    b16 = next(t for t in study.trials if t.params["spec.budget"] == 16)
    assert b16.user_attrs["workaround"] == ["server.disable_cuda_graph=true"]
    assert b16.user_attrs["quirk"] == "cuda_graph_capture"


def test_a_point_is_composed_as_its_job_would_be(compose: Compose) -> None:
    """ConfigSource sets the searched values on the composed config: the same as Hydra composing them."""
    space = _space.parse({"spec.budget": "choice(4, 16)", "spec.topk": "choice(1, 4)"}, ["workload=smoke"])
    source = _rules.ConfigSource(lambda lines: compose(lines), space, ["hardware", "spec", "workload"])
    for params in ({"spec.budget": 16, "spec.topk": 1}, {"spec.budget": 4, "spec.topk": 4}):
        lines = space.overrides(params) + ["server.disable_cuda_graph=true"]
        composed = compose(lines)
        want = {k: OmegaConf.to_container(composed[k], resolve=True) if OmegaConf.is_config(composed[k])
                else composed[k] for k in composed if k != "hydra"}
        assert source.plain(params, ["server.disable_cuda_graph=true"]) == want


def test_an_enqueued_seed_outside_the_valid_space_is_skipped(compose: Compose, tmp_path: Path) -> None:
    study, job, _ = run(compose, tmp_path, "tpe", "avoid", 2, (
        "hydra.sweeper.enqueue=[{spec.budget:16,spec.topk:4,spec.window:2048},"
        "{spec.budget:4,spec.topk:8,spec.window:2048},{spec.budget:8,spec.topk:4,spec.window:2048}]",))
    assert study.trials[0].params == {"spec.budget": 8, "spec.topk": 4, "spec.window": 2048}
    assert not job.crashed and all(r["topk"] <= r["budget"] <= 8 for r in job.ran)


def test_every_point_of_the_llamacpp_space_passes_the_config_check(compose: Compose) -> None:
    """The other ready-made space (draft length for llama.cpp), composed as ``python -m sweep``
    composes it (the server's group defaults inserted), in every quirks mode."""
    from sweep.compose.group_defaults import implied

    base = implied(["server=llamacpp", "hydra/sweeper/space=llamacpp"])
    cfg = compose(base)
    node = OmegaConf.to_container(cfg.hydra.sweeper, resolve=True)
    assert isinstance(node, dict)
    node.pop("_target_", None)
    space = _space.parse(_impl.Settings.from_kwargs({**node, "storage": "memory"}).params, [])
    source = _rules.ConfigSource(lambda lines: compose(base + lines), space, cfg.hydra.runtime.choices.keys())
    for mode in _rules.QUIRK_MODES:
        rules = _rules.Rules(source, mode)
        points = rules.valid_points()
        assert points is not None and len(points) == 6, rules.summary()
        for p in points:
            checked = from_omegaconf(source.view(p, list(rules.check(p).workaround)))  # raises ConfigError
            assert checked.spec.budget == p["spec.budget"]
