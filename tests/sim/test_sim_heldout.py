"""The twin on the recorded llama.cpp landscape (benchmarks/measured/landscapes/): real points
this project measured with `benchmarks/record_landscape.py`, a truth the twin's code does not
share. Loading, the engine's own box, the shipped calibration, the held-out machinery."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.sim import constants, heldout, landscape, measured

ROOT = Path(__file__).resolve().parents[2]
LAND = ROOT / "benchmarks" / "measured" / "landscapes" / "llamacpp-cpu-smollm2.json"
SHIPPED = ROOT / "sweep" / "sim" / "calibrations"


@pytest.fixture(scope="module")
def points() -> list[measured.Point]:
    return measured.landscape_points(LAND)


def test_the_landscape_is_real_complete_and_small() -> None:
    doc = json.loads(LAND.read_text())
    assert doc["schema"] == landscape.SCHEMA and doc["engine"] == "llamacpp" and doc["hardware"] == "cpu"
    assert LAND.stat().st_size < 1_500_000
    assert 12 <= len(doc["configs"]) <= 20 and doc["machine"]["perf"]["mem_bw_tbs"] > 0
    ok = [t for t in doc["trials"] if t["status"] == "ok"]
    assert len(ok) >= 12 and all(t["rounds_ok"] >= 2 for t in ok)
    cells = {(p["config"], p["context"], p["concurrency"]) for p in doc["points"]}
    assert len(cells) == len(doc["points"]) and {p["concurrency"] for p in doc["points"]} == {1, 2, 4}
    assert len({p["context"] for p in doc["points"]}) == 2
    assert all(len(p["output_tok_s_runs"]) >= 2 for p in doc["points"])  # the measured noise is kept


def test_points_carry_the_engine_box_workload_and_flags(points: list[measured.Point]) -> None:
    assert {p.box for p in points} == {"cpu-llamacpp"} and {p.workload for p in points} == {"cpu"}
    by_config = {p.config: p for p in points}
    ngram = by_config["ngram-b16-min8"]  # the numbers llama.cpp ran with, read from its flags
    assert ngram.spec["chain_n_max"] == 16 and ngram.spec["chain_floor"] == 8 and ngram.spec["lookup_key"] == 24
    assert by_config["ngram-b16-min2-m12"].spec["lookup_key"] == 12
    assert by_config["draft-self-b4"].spec["draft_size"] == 1.0  # the target drafts for itself
    assert all(p.max_running == 4 for p in points)  # llama.cpp's --parallel slots


def test_shipped_cpu_calibration_is_the_engines_own_and_predicts_its_box(points: list[measured.Point]) -> None:
    cal = constants.for_hardware(constants.engine_hardware(points[0].hardware, {"name": "llamacpp"}))
    assert cal.calibrated and cal.path == str(SHIPPED / "cpu-llamacpp.yaml") and cal.kind == "cpu"
    assert any(n.endswith("@cpu") for n in cal.names)
    errors = [abs(math.log(measured.predict_point(p, cal.values) / p.measured)) for p in points]
    assert sorted(errors)[len(errors) // 2] < 0.25  # median in-sample error: the box's noise is large
    proc = subprocess.run([sys.executable, "-m", "sweep.sim.predict", "server=llamacpp", "spec=llamacpp_ngram",
                           "workload.coding=off", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    pred = json.loads(proc.stdout)
    assert pred["calibration"] == f"calibrated: cpu-llamacpp ({SHIPPED / 'cpu-llamacpp.yaml'})"
    assert all(c["output_tok_s_low"] < c["output_tok_s"] < c["output_tok_s_high"] for c in pred["cells"])


def test_held_out_splits_and_one_left_out_config(points: list[measured.Point]) -> None:
    splits = heldout.splits(points)
    groups = [s.group for s in splits]
    configs = {p.config for p in points}
    assert groups.count("loco") == len(configs) and groups.count("locco") == 3
    assert groups.count("one_concurrency") == 1 and groups.count("half_configs") == 1
    for s in splits:
        assert not set(s.train) & set(s.test) and s.test
    one = [s for s in splits if s.name == "config ngram-b16-min2"]
    report = heldout.evaluate(points, one)
    outs = report.outcomes
    assert len(outs) == len(one[0].test) and report.fits == 2
    assert all(o.low < o.predicted < o.high for o in outs)
    med, cov, n = heldout.Report.summary(outs)
    assert n == len(outs) and 0 <= cov <= 100 and med < 60
