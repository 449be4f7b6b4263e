"""The verdict model against a known truth, on a small scale (the benchmark at full scale:
``python benchmarks/verdict_calibration.py``): landscapes drawn from set true means with cell noise
and round drift, read and scheduled by the product's own path, never pick a config more than the
margin below the true best, decide more as rounds are added, and race to verdicts with fewer runs
than round-robin."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_known_truth_small_scale() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "verdict_calibration.py"), "--draws", "3",
                          "--rounds", "2,5", "--race-draws", "2", "--seed", "1", "--json"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    f = json.loads(out.stdout)
    by = {int(k): v for k, v in f["by_rounds"].items()}
    assert all(v["wrong_picks"] <= 0.05 for v in by.values()), by
    assert by[5]["decided"] >= by[2]["decided"], by
    assert by[5]["decided_gap10"] >= 0.8, by
    assert 0.8 <= by[5]["coverage"] <= 1.0, by
    assert f["racing"]["ratio"] < 1.0, f["racing"]


def test_bad_arguments_are_one_line() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "verdict_calibration.py"), "--rounds", "x"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--rounds" in out.stderr
