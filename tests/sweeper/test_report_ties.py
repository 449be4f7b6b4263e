"""The sweeper's final report names the winner with the configs it cannot be told apart from."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution

from hydra_plugins.specsweep_optuna_sweeper import _report, _space


def study_with(values: list[tuple[float, list[float] | None]]) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize")
    dist = {"spec.budget": CategoricalDistribution(list(range(len(values))))}
    for i, (value, ci) in enumerate(values):
        attrs = {"objective_ci": ci} if ci else {}
        study.add_trial(optuna.trial.create_trial(params={"spec.budget": i}, distributions=dist,
                                                  value=value, user_attrs=attrs,
                                                  system_attrs={"constraints:crashed": 0.0}))
    return study


def test_the_report_says_tied_within_noise(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    study = study_with([(100.0, [97.0, 103.0]), (101.0, [98.5, 103.5]), (90.0, [89.0, 91.0])])
    space = _space.parse({"spec.budget": "choice(0, 1, 2)"}, [])
    best = _report.report(study, space, tmp_path, storage_shown="memory", metric_names=["objective"],
                          groups={}, config_name="config", contour=None, make_plots=False, executed=3)
    out = capsys.readouterr().out
    assert best is not None and best.number == 1
    assert "tied within noise with trial 0 (100.0)" in out and "trial 2" not in out.split("noise")[1]
    assert "noise: tied within noise with trial 0" in (tmp_path / "best.yaml").read_text()


def test_measured_once_says_the_noise_is_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    study = study_with([(100.0, None), (101.0, None)])
    space = _space.parse({"spec.budget": "choice(0, 1)"}, [])
    _report.report(study, space, tmp_path, storage_shown="memory", metric_names=["objective"], groups={},
                   config_name="config", contour=None, make_plots=False, executed=2)
    assert "measured once: noise unknown (workload.repeats=3 gives intervals)" in capsys.readouterr().out
