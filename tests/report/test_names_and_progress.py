"""Sweep names, and the trial i/N line with its ETA (trial names: tests/score/test_configs.py)."""

from __future__ import annotations

import io


from sweep.record.naming import sweep_name
from sweep.report.progress import SweepProgress, duration


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
