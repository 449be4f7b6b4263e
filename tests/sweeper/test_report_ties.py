"""The sweeper's final report names the winner with the configs it cannot be told apart from -- and
calls nothing best that it does not separate from a runner-up beyond noise."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution

from hydra_plugins.specsweep_optuna_sweeper import _report, _space


def study_with(values: list[tuple[float, list[float] | None]], configs: list[str] | None = None) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize")
    dist = {"spec.budget": CategoricalDistribution(list(range(len(values))))}
    for i, (value, ci) in enumerate(values):
        attrs: dict = {"objective_ci": ci} if ci else {}
        if configs:
            attrs["config_id"] = configs[i]
        study.add_trial(optuna.trial.create_trial(params={"spec.budget": i}, distributions=dist,
                                                  value=value, user_attrs=attrs,
                                                  system_attrs={"constraints:crashed": 0.0}))
    return study


def test_the_report_says_tied_within_noise(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    study = study_with([(100.0, [94.0, 106.0]), (101.0, [95.0, 107.0]), (90.0, [89.0, 91.0])])
    space = _space.parse({"spec.budget": "choice(0, 1, 2)"}, [])
    best = _report.report(study, space, tmp_path, storage_shown="memory", metric_names=["objective"],
                          groups={}, config_name="config", contour=None, make_plots=False, executed=3)
    out = capsys.readouterr().out
    assert best is not None and best.number == 1
    assert "not told apart from trial 0 (100.0)" in out and "trial 2" not in out.split("noise")[1]
    # trial 1 leads but does not beat trial 0 beyond noise: no best, and the way to decide
    assert "leader, undecided (no best yet): trial 1" in out and "python -m sweep.decide" in out
    text = (tmp_path / "best.yaml").read_text()
    assert text.startswith("# Leader (undecided, no best yet): trial 1") and "Best feasible" not in text
    assert "noise: open: not told apart from trial 0" in text
    assert "verdict: open" in (tmp_path / "optimization_results.yaml").read_text()


def test_measured_once_says_the_noise_is_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    study = study_with([(100.0, None), (101.0, None)])
    space = _space.parse({"spec.budget": "choice(0, 1)"}, [])
    _report.report(study, space, tmp_path, storage_shown="memory", metric_names=["objective"], groups={},
                   config_name="config", contour=None, make_plots=False, executed=2)
    out = capsys.readouterr().out
    assert "measured once: noise unknown, so no config is called best" in out
    assert "leader, undecided (no best yet): trial 1" in out


def test_a_box_spread_judges_single_measurements(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Measured once, on a box whose run-to-run spread is known (2%): 101 vs 100 is within it (tied),
    120 vs 100 is not (the best)."""
    study = study_with([(100.0, None), (101.0, None)])
    space = _space.parse({"spec.budget": "choice(0, 1)"}, [])
    _report.report(study, space, tmp_path, storage_shown="memory", metric_names=["objective"], groups={},
                   config_name="config", contour=None, make_plots=False, executed=2, spread=0.02)
    assert "leader, undecided" in capsys.readouterr().out
    study = study_with([(100.0, None), (120.0, None)])
    _report.report(study, space, tmp_path, storage_shown="memory", metric_names=["objective"], groups={},
                   config_name="config", contour=None, make_plots=False, executed=2, spread=0.02)
    out = capsys.readouterr().out
    assert "best feasible: trial 1" in out and "clear winner" in out and "2.0% per measurement" in out


def test_trials_of_one_config_pool_as_its_repeats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two trials that ran the same config (one config id) are one candidate, their values its
    measurements: config a ran twice (100 and 140: mean 120, a wide interval), b once (125; a 2% box
    spread). Alone, trial 2's 140 would beat b beyond noise; pooled, a's copies disagree so much that
    nothing is decided."""
    study = study_with([(100.0, None), (125.0, None), (140.0, None)], configs=["a", "b", "a"])
    space = _space.parse({"spec.budget": "choice(0, 1, 2)"}, [])
    _report.report(study, space, tmp_path, storage_shown="memory", metric_names=["objective"], groups={},
                   config_name="config", contour=None, make_plots=False, executed=3, spread=0.02)
    out = capsys.readouterr().out
    assert "leader, undecided (no best yet)" in out and "best feasible:" not in out
    # the same values as three different configs: trial 2 is the best beyond noise
    study = study_with([(100.0, None), (125.0, None), (140.0, None)], configs=["a", "b", "c"])
    _report.report(study, space, tmp_path, storage_shown="memory", metric_names=["objective"], groups={},
                   config_name="config", contour=None, make_plots=False, executed=3, spread=0.02)
    assert "best feasible: trial 2" in capsys.readouterr().out
