"""Noise-aware results: the sim's seeded noise, repeated cells with intervals, and the one tie rule.

The end-to-end test runs a real trial (``python -m sweep``) on the simulator with
``workload.repeats=3`` and reads its result.json; the others check the pieces
against numbers worked out by hand.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from _support import free_port, subprocess_env
from sweep.compose.settings import Objective
from sweep.record.result import Cell, TrialResult
from sweep.score.noise import Candidate, objective_interval, tied_within_noise
from sweep.sim.noise import Drift, cell_sd
from sweep.stats import interval, standard_error, t975


def test_t_interval_matches_the_tables() -> None:
    assert t975(1) == 12.706 and t975(2) == 4.303 and t975(30) == 2.042
    assert t975(60) == pytest.approx(2.000, abs=0.002) and t975(10_000) == pytest.approx(1.960, abs=0.001)
    lo, hi = interval([10.0, 12.0, 14.0])  # mean 12, s 2, se 2/sqrt(3)
    half = 4.303 * 2 / math.sqrt(3)
    assert (lo, hi) == pytest.approx((12 - half, 12 + half))
    assert standard_error([lo, hi], 3) == pytest.approx(2 / math.sqrt(3))
    assert interval([5.0]) is None and standard_error(None, 3) is None


def test_the_drift_is_seeded_and_about_sigma_per_short_cell() -> None:
    a, b, c = Drift(0.02, "s:1"), Drift(0.02, "s:1"), Drift(0.02, "s:2")
    seq_a = [a.factor(10.0) for _ in range(2000)]
    assert seq_a == [b.factor(10.0) for _ in range(2000)]  # same seed, same run
    assert seq_a != [c.factor(10.0) for _ in range(2000)]  # another config or seed: other noise
    assert Drift(0.0, "x").factor(10.0) == 1.0
    # the time average over a cell shrinks as the cell outlasts the 10 s correlation time
    assert cell_sd(0.02, 0.1) == pytest.approx(0.02, rel=0.01)
    assert cell_sd(0.02, 1000.0) == pytest.approx(0.02 * math.sqrt(2 * 10 / 1000), rel=0.02)
    # stationary: over long runs the log-factor's spread is sigma
    d = Drift(0.05, "long")
    logs = [math.log(d.factor(1000.0)) for _ in range(4000)]  # 1 s steps: ~400 correlation times
    assert statistics.pstdev(logs) == pytest.approx(0.05, rel=0.15)


def _cell(ctx: int, conc: int, value: float, ci: list[float] | None, n: int) -> Cell:
    return Cell(context=ctx, concurrency=conc, output_tok_s=value, output_tok_s_ci=ci, repeats=n)


def test_the_objective_interval_combines_the_cells() -> None:
    obj = Objective.from_mapping({"metric": "weighted_mean", "weights": {"ctx60_c1": 3.0}})
    se1, se2 = 2.0, 4.0
    t = 4.303
    doc = TrialResult(status="ok", cells=[_cell(60, 1, 100.0, [100 - t * se1, 100 + t * se1], 3),
                                          _cell(60, 8, 200.0, [200 - t * se2, 200 + t * se2], 3)])
    value = (3 * 100 + 200) / 4
    lo, hi = objective_interval(doc, obj, value)  # type: ignore[misc]
    half = t * math.sqrt((3 * se1) ** 2 + se2 ** 2) / 4
    assert (lo, hi) == pytest.approx((value - half, value + half))
    once = TrialResult(status="ok", cells=[_cell(60, 1, 100.0, None, 1)])
    assert objective_interval(once, obj, 100.0) is None
    c1 = Objective.from_mapping({"metric": "tok_s_c1"})
    assert objective_interval(doc, c1, 100.0) == pytest.approx((100 - t * se1, 100 + t * se1))


def test_verdicts_pool_the_noise_and_name_a_pick() -> None:
    """Summaries (value, 95% interval over 3 repeats) judged by the campaign model: the noise pooled
    over every config (~1% a measurement here), so 101.5 vs 100 is within the 2% margin (equivalent,
    the leader picked); with 3x the noise neither is shown within it (open, the pick named with its
    bound); measured once with no spread: unknown."""
    found = tied_within_noise([Candidate(1, 100.0, (98.0, 102.0), 3), Candidate(2, 99.0, (97.5, 100.5), 3),
                               Candidate(3, 95.0, (94.0, 96.0), 3), Candidate(4, 101.5, (97.0, 106.0), 3)])
    assert found is not None and found.best.key == 4 and found.state == "equivalent" and found.decided
    assert found.chosen.key == 4 and found.regret is not None and found.regret < 0.02 and found.tied == []
    wide = tied_within_noise([Candidate(1, 100.0, (94.0, 106.0), 3), Candidate(4, 101.5, (95.5, 107.5), 3)])
    assert wide is not None and wide.state == "open" and [c.key for c in wide.tied] == [1]
    assert "not told apart from trial 1 (100.0); pick trial 4: at most" in wide.line(lambda k: f"trial {k}")
    single = tied_within_noise([Candidate("a", 100.0), Candidate("b", 99.0)])
    assert single is not None and not single.noise_known and single.state == "unknown"
    assert [c.key for c in single.tied] == ["b"]  # nothing can be told apart: all stay in contention
    assert "noise unknown" in single.line()
    low = tied_within_noise([Candidate(1, 3.0, (2.0, 4.0), 3), Candidate(2, 5.0, (4.5, 5.5), 3)], "minimize")
    assert low is not None and low.best.key == 1 and low.tied == [] and low.state == "decided"


@pytest.mark.slow
def test_a_trial_with_repeats_reports_means_and_intervals(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "sweep", "workload=smoke", "workload.coding=off", "workload.repeats=3",
         "server.sim.load_seconds=0.2", "mlflow.enabled=false", f"server.port={free_port()}",
         f"hydra.run.dir={tmp_path}/run"], cwd=tmp_path, env=subprocess_env(), capture_output=True,
        text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads((tmp_path / "run" / "result.json").read_text())
    (cell,) = doc["cells"]
    assert cell["repeats"] == 3 and cell["requests"] == 3 * 4  # counts are totals over the repeats
    for name in ("output_tok_s", "per_stream_tok_s", "accept_len"):
        lo, hi = cell[f"{name}_ci"]
        assert lo < cell[name] < hi, (name, cell)  # the sim's noise: three repeats differ
    lo, hi = cell["output_tok_s_ci"]
    # a t-interval: centred on the mean, finite (its width is the box's noise: a busy CI box widens it)
    assert abs((lo + hi) / 2 - cell["output_tok_s"]) < 1e-3 * cell["output_tok_s"] and 0 < hi - lo < 4 * cell["output_tok_s"]


def test_mlflow_gets_each_cells_interval_beside_its_mean() -> None:
    from sweep.record._run_content import trial_metrics

    doc = TrialResult(status="ok", cells=[_cell(60, 1, 100.0, [96.0, 104.0], 3), _cell(60, 8, 400.0, None, 1)])
    got = {(k, step): v for k, v, step in trial_metrics(doc)}
    assert got[("1 tok_s/ctx00000060", 1)] == 100.0
    assert (got[("1 tok_s/ctx00000060 ci_low", 1)], got[("1 tok_s/ctx00000060 ci_high", 1)]) == (96.0, 104.0)
    assert ("1 tok_s/ctx00000060 ci_low", 8) not in got  # measured once: no interval, none invented
