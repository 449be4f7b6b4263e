"""A calibration carries the box state of its measurements, and predict says when it is asked about
a box in another state (sweep/sim/calfile.py box_state, sweep/sim/boxcheck.py): fitted (the fit and
the file of `python -m sweep.calibrate`) on the recorded vLLM landscape's baseline points measured
at a load average above 5 on 2 cores -- a busy box by any measure, so that no state this machine
can be in now matches it (other work can take at most all its cores: 2.0 per core, against 3.4) --
and predicted with the real `python -m sweep.sim.predict` on this machine."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sweep.sim import boxcheck, constants

ROOT = Path(__file__).resolve().parents[2]
LANDSCAPE = ROOT / "benchmarks" / "busy-box" / "vllm-cpu-smollm2.json"
CELL = ["server=vllm", "hardware=cpu", "workload=edit", "spec=none", "workload.contexts=[512]",
        "workload.concurrency=[3]", "workload.max_tokens=128"]


@pytest.fixture(scope="module")
def calibration(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import statistics

    from sweep.sim import calfile, fit, measured

    loaded = measured.load([LANDSCAPE])
    assert calfile.box_state(loaded.points) == {"points": 56, "load_avg_median": 6.39, "cpus": 2,
                                                "load_avg_range": [3.24, 11.52], "overloaded_share": 1.0}
    loaded.points = [p for p in loaded.points if p.config == "none" and p.kind == "output_tok_s"
                     and statistics.median(p.load_avg) > 5]
    return calfile.write(tmp_path_factory.mktemp("cal"), "cpu-vllm", fit.fit(loaded.points), loaded)


def predict(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sweep.sim.predict", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_the_calibration_carries_the_state_its_points_were_measured_in(calibration: Path) -> None:
    doc = yaml.safe_load(calibration.read_text())
    assert doc["box_state"] == {"points": 4, "load_avg_median": 6.77, "load_avg_range": [5.85, 7.78],
                                "cpus": 2, "overloaded_share": 1.0}
    cal = constants.load(calibration)
    assert cal.box_state["load_avg_median"] == 6.77 and cal.with_values({}).box_state == cal.box_state


def test_judged_against_the_box_now_quiet_widens_the_same_state_does_not(calibration: Path) -> None:
    cal = constants.load(calibration)
    hardware = {"name": "cpu", "arch": "cpu", "num_gpus": 0, "perf": {"figures": "calibration"}}
    quiet = boxcheck.judge(cal, hardware, here=lambda: {"others_cpu": 0.05, "cpus": 2})
    assert quiet is not None and quiet.action == "widen"
    assert quiet.sd == pytest.approx(0.5 * math.log(3.385 / 1.025), rel=1e-3)
    assert "fitted on a box at load average 6.77 on 2 cores (3.4 per core)" in quiet.line
    assert boxcheck.judge(cal, hardware, here=lambda: {"others_cpu": 4.5, "cpus": 2}) is None  # as busy
    assert boxcheck.judge(constants.uncalibrated(hardware), hardware, here=lambda: {"others_cpu": 0.0}) is None


def test_predict_widens_in_one_line_and_refuses_another_probe(calibration: Path, tmp_path: Path) -> None:
    got = predict(*CELL, "--calibration", str(calibration), "--json")
    assert got.returncode == 0, got.stderr
    widened = json.loads(got.stdout)
    assert widened["box_state_note"].startswith("band widened: the calibration was fitted on a box at load "
                                                "average 6.77 on 2 cores")
    stateless = tmp_path / "cpu-vllm.yaml"
    stateless.write_text(re.sub(r"box_state:\n(  .*\n)+", "", calibration.read_text()))
    plain = json.loads(predict(*CELL, "--calibration", str(stateless), "--json").stdout)
    assert "box_state_note" not in plain
    w, p = widened["cells"][0], plain["cells"][0]
    assert w["output_tok_s"] == p["output_tok_s"]                       # the same prediction ...
    assert w["output_tok_s_low"] < p["output_tok_s_low"] and w["output_tok_s_high"] > p["output_tok_s_high"]
    text = predict(*CELL, "--calibration", str(calibration))
    assert text.returncode == 0 and text.stdout.splitlines()[-1].startswith("band widened: the calibration")
    # the machine probed again (figures=config) at another bandwidth than the calibration's 16.1 GB/s
    far = predict(*CELL, "--calibration", str(stateless), "hardware.perf.figures=config",
                  "hardware.perf.mem_bw_tbs=0.0300", "hardware.perf.matmul_tflops=0.09034")
    assert far.returncode == 1 and far.stdout == ""
    assert far.stderr.strip().startswith("error: refused: hardware.perf.mem_bw_tbs is +86% off the figures "
                                         "the calibration was fitted with")
    near = predict(*CELL, "--calibration", str(stateless), "hardware.perf.figures=config",
                   "hardware.perf.mem_bw_tbs=0.0180", "hardware.perf.matmul_tflops=0.09034")
    assert near.returncode == 0 and "band widened: hardware.perf.mem_bw_tbs is +12% off" in near.stdout


def test_a_calibration_with_a_bad_state_is_one_line(calibration: Path, tmp_path: Path) -> None:
    bad = tmp_path / "cpu-vllm.yaml"
    bad.write_text(calibration.read_text().replace("overloaded_share: 1.0", "overloaded_share: 7"))
    got = predict(*CELL, "--calibration", str(bad))
    assert got.returncode == 2
    assert got.stderr.strip().endswith("box_state.overloaded_share = 7 is not a share in [0, 1]")


def test_cells_that_recorded_their_state_give_the_busy_share(calibration: Path) -> None:
    from dataclasses import replace

    from sweep.sim import calfile, measured

    points = [p for p in measured.load([LANDSCAPE]).points if p.kind == "output_tok_s"][:4]
    marked = [replace(p, busy=i == 0, others_cpu=1.2 if i == 0 else 0.1) for i, p in enumerate(points)]
    state = calfile.box_state(marked)
    assert state["recorded"] == 4 and state["busy_share"] == 0.25 and state["others_cpu_median"] == 0.1
