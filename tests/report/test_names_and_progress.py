"""Run names that tell trials apart, sweep names, and the trial i/N line with its ETA."""

from __future__ import annotations

import io
from pathlib import Path

import yaml

from sweep.compose import cmdline
from sweep.compose.config import from_omegaconf
from sweep.record.naming import sweep_name, trial_name, varying_keys
from sweep.report.progress import SweepProgress, duration


def _cfg(*overrides: str):  # noqa: ANN202
    return from_omegaconf(cmdline.compose(list(overrides)))


def test_trial_names_carry_the_workload_and_what_the_sweep_varies(tmp_path: Path) -> None:
    (tmp_path / "multirun.yaml").write_text(yaml.safe_dump({"hydra": {
        "overrides": {"task": ["spec.budget=4,8", "workload.max_tokens=32,64", "workload=smoke",
                               "server.port=31001"]},
        "sweeper": {"params": {"spec.topk": "choice(2,4)"}}}}))
    keys = varying_keys(tmp_path)
    assert keys == ("spec.budget", "workload.max_tokens", "spec.topk")
    job = ["spec.budget=8", "workload.max_tokens=32", "workload=smoke", "server.port=31001"]
    cfg = _cfg(*job)
    assert trial_name(cfg, keys, job) == "b300-ddtree-b8-t4-w2048-smoke-max_tokens=32"
    assert trial_name(cfg) == "b300-ddtree-b8-t4-w2048-smoke"  # a single run: no sweep
    assert trial_name(_cfg("spec=none", "workload=seed")) == "b300-none-seed"
    assert varying_keys(tmp_path / "nowhere") == ()


def test_sweep_names_say_what_is_swept_and_when() -> None:
    import datetime as dt

    when = dt.datetime(2026, 12, 1, 1, 43, 41)
    assert sweep_name(["spec.budget=8,16,32", "workload=smoke"], when=when) == \
        "grid spec.budget=8,16,32 workload=smoke · 2026-12-01 01:43:41"
    # swept keys first, plumbing (where results go, the port) left out
    assert sweep_name(["workload=smoke", "server.port=34389", "mlflow.enabled=false", "spec.topk=2,4",
                       "hydra.sweep.dir=/tmp/g"], when=when) == \
        "grid spec.topk=2,4 workload=smoke · 2026-12-01 01:43:41"
    assert sweep_name(["hydra/sweeper=optuna"], "b300-ddtree-smoke-tok_s_lowc", when) == \
        "study b300-ddtree-smoke-tok_s_lowc · 2026-12-01 01:43:41"


def test_progress_line_counts_trials_and_estimates_from_the_ones_that_ran() -> None:
    out = io.StringIO()
    p = SweepProgress(4, stream=out)
    p.start(1, "spec.budget=4")
    assert out.getvalue().startswith("[trial 1/4] spec.budget=4 · elapsed ") and "ETA" not in out.getvalue()
    p.ran = [30.0, 50.0]  # two trials ran, 40 s each on average
    assert p.eta(3) == 80.0  # the current one and the one after it
    p.done(ran=False)  # a skipped job (resumed grid) adds nothing to the mean
    assert p.ran == [30.0, 50.0]
    assert "ETA 1:20 (40 s per trial)" in p.line(3)
    assert duration(3725) == "1:02:05" and duration(42) == "42 s"
