"""The calibrated twin: measured figures, the calibration command, lookup, predictions.

Real processes where a user would run one (``python -m sweep.calibrate``,
``python -m sweep.sim.predict``, the sim server over HTTP); the measured
figures are the real-format result files in benchmarks/measured/, which
come from shared/reference/figures.md -- outside the project.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from sweep.errors import ConfigError
from sweep.sim import constants, measured
from sweep.sim.launch import render_overrides
from sweep.sim.predict import predict, predict_cells, predict_coding

ROOT = Path(__file__).resolve().parents[2]
MEASURED = ROOT / "benchmarks" / "measured"
SHIPPED = ROOT / "sweep" / "sim" / "calibrations"
CONF = ROOT / "conf"


def hw(name: str) -> dict[str, Any]:
    return yaml.safe_load((CONF / "hardware" / f"{name}.yaml").read_text())


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=600)  # a full refit: ~75 CPU-s, more on a shared box


def composed(*overrides: str) -> dict[str, Any]:
    from sweep.compose.config import from_omegaconf
    from sweep.compose.cmdline import compose

    return dict(from_omegaconf(compose(list(overrides))).raw)


def test_shipped_calibrations_reproduce_every_measured_figure() -> None:
    loaded = measured.load([MEASURED])
    assert not loaded.skipped
    article = [p for p in loaded.points if not p.config]  # the recorded landscape: tests/sim/test_sim_heldout.py
    assert len(article) >= 10
    for point in article:
        cal = constants.for_hardware(point.hardware)
        assert cal.calibrated and Path(cal.path or "").parent == SHIPPED, point.label
        got = measured.predict_point(point, cal.values)
        assert abs(got / point.measured - 1) <= 0.10, f"{point.label}: {got:.2f} vs {point.measured}"


def test_coding_eval_reproduces_the_measured_b300_figures() -> None:
    """The sim's answer lengths x the shipped twin give the measured coding eval (within 10%).

    Its own setup (the measured file's composed config: coding_max_tokens 1024);
    the lengths of the problems the file gives must be the sim's (answers.yaml).
    """
    doc = json.loads((MEASURED / "b300-ddtree-b8-t4-w2048-coding.json").read_text())
    pred = predict_coding(doc["config"])
    assert pred["calibration"].startswith("calibrated: b300") and pred["failure"] is None
    got = {p["name"]: p for p in pred["problems"]}
    assert list(got) == [p["name"] for p in doc["coding"]["problems"]]  # the eval's five, its order
    given = [p for p in doc["coding"]["problems"] if p["tok_s"]]
    assert {p["name"] for p in given} == {"merge_sorted", "word_count"}
    for p in given:
        assert got[p["name"]]["completion_tokens"] == p["completion_tokens"]
        assert got[p["name"]]["length_source"].startswith("measured:")
        assert abs(got[p["name"]]["tok_s"] / p["tok_s"] - 1) <= 0.10, (p, got[p["name"]])
    assert all(p["length_source"].startswith("estimate, NOT measured")
               for p in pred["problems"] if p["name"] not in {g["name"] for g in given})
    mean = doc["coding"]["mean_tok_s"]
    assert abs(pred["mean_tok_s"] / mean - 1) <= 0.10, (pred["mean_tok_s"], mean)
    # the cap matters: smoke's answers, cut at 200 tokens, run faster (as short answers do on the box)
    smoke = predict_coding(composed("hardware=b300", "workload=smoke"))
    assert all(p["completion_tokens"] == 200 for p in smoke["problems"])
    assert smoke["mean_tok_s"] > 1.2 * mean


@pytest.mark.timeout(900)  # a full refit of four boxes: ~75-135 CPU-s, several times that on a loaded 2-core box
def test_calibrate_refits_the_shipped_files_byte_for_byte(tmp_path: Path) -> None:
    proc = run("sweep.calibrate", "-o", str(tmp_path), str(MEASURED))
    assert proc.returncode == 0, proc.stderr
    written = sorted(p.name for p in tmp_path.glob("*.yaml"))
    assert written == ["b300.yaml", "cpu-llamacpp.yaml", "cpu-vllm.yaml", "pro6000.yaml"]  # cpu-*: the recorded landscapes
    # Shipped beside them: the engines' constants for GPU boxes nobody measured, fitted on public figures by
    # benchmarks/public_figures.py --write (not from result files, so sweep.calibrate does not write them).
    assert sorted(p.name for p in SHIPPED.glob("*.yaml")) == \
        sorted([*written, "gpu-sglang.yaml", "gpu-trtllm.yaml", "gpu-vllm.yaml"])
    for name in written:
        assert (tmp_path / name).read_bytes() == (SHIPPED / name).read_bytes(), name
    # measured beside fitted, per point, and the constants the points cannot see
    assert "b300 AR ctx60 C1 512tok tok/s" in proc.stdout and "133.00" in proc.stdout
    assert "warning: pro6000: not identifiable" in proc.stderr and "moe_mem_eff" in proc.stderr


def test_calibrate_writes_the_user_dir_and_the_sim_loads_it(tmp_path: Path) -> None:
    src = tmp_path / "results"
    src.mkdir()
    shutil.copy(MEASURED / "pro6000_tp8-ddtree-b8-t4-w2048-c1.json", src)
    doc = json.loads((src / "pro6000_tp8-ddtree-b8-t4-w2048-c1.json").read_text())
    doc["cells"][0]["output_tok_s"] = 52.0  # a faster box than the shipped one
    (src / "pro6000_tp8-ddtree-b8-t4-w2048-c1.json").write_text(json.dumps(doc))
    user = tmp_path / "user-calibrations"
    proc = run("sweep.calibrate", str(src), env={"SPECSWEEP_CALIBRATIONS": str(user)})
    assert proc.returncode == 0, proc.stderr
    assert (user / "pro6000.yaml").is_file() and "52.00" in proc.stdout
    cell = ["workload.contexts=[60]", "workload.concurrency=[1]", "workload.min_requests=1"]
    out = run("sweep.sim.predict", "hardware=pro6000_tp8", *cell, "--json", env={"SPECSWEEP_CALIBRATIONS": str(user)})
    pred = json.loads(out.stdout)
    assert pred["calibration"] == f"calibrated: pro6000 ({user / 'pro6000.yaml'})"
    assert pred["cells"][0]["output_tok_s"] == pytest.approx(52.0, rel=0.05)
    shipped = predict(composed("hardware=pro6000_tp8", *cell))
    assert shipped["cells"][0]["output_tok_s"] == pytest.approx(26.0, rel=0.05)


def test_calibrate_refuses_simulated_results_and_bad_input(tmp_path: Path) -> None:
    doc = json.loads((MEASURED / "b300-none-c1.json").read_text())
    doc["simulated"] = True
    (tmp_path / "result.json").write_text(json.dumps(doc))
    proc = run("sweep.calibrate", "--dry-run", str(tmp_path))
    assert proc.returncode == 2 and "simulated" in proc.stdout
    assert proc.stderr.strip().splitlines() == [
        "error: results: no real result files with measured figures "
        "(need status ok, simulated: false, cells or coding figures)"]
    missing = run("sweep.calibrate", str(tmp_path / "nope"))
    assert missing.returncode == 2 and missing.stderr.startswith("error: results[0]: ") and "nope" in missing.stderr
    box = run("sweep.calibrate", "--dry-run", "--box", "h200", str(MEASURED))
    assert box.returncode == 2 and "error: --box: no points for h200; allowed: b300, cpu-llamacpp, cpu-vllm, pro6000" in box.stderr
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for name, model in (("b300-none-c1.json", "kimi_k26"), ("b300-ddtree-b8-t4-w2048-c8.json", "other_model")):
        doc = json.loads((MEASURED / name).read_text())
        doc["config"]["model"]["name"] = model
        (mixed / name).write_text(json.dumps(doc))
    two = run("sweep.calibrate", "--dry-run", str(mixed))
    assert two.returncode == 2 and "several models (kimi_k26, other_model)" in two.stderr


def test_calibration_lookup_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert constants.for_hardware(hw("b300")).path == str(SHIPPED / "b300.yaml")
    for layout in ("pro6000_tp8", "pro6000_ep4", "pro6000_ep8"):  # every layout of a box shares its constants
        assert constants.for_hardware(hw(layout)).path == str(SHIPPED / "pro6000.yaml")
    # a GPU box nobody measured runs on its engine's constants (gpu-<engine>.yaml, fitted on public
    # figures: benchmarks/public_figures.py); it used to run on the priors alone
    assert constants.for_hardware(hw("h200")).path == str(SHIPPED / "gpu-sglang.yaml")
    vllm_h200 = {**hw("h200"), "perf": {**hw("h200")["perf"], "engine": "vllm"}}
    assert constants.for_hardware(vllm_h200).path == str(SHIPPED / "gpu-vllm.yaml")
    none = {**hw("b300"), "perf": {**hw("b300")["perf"], "calibration": "none"}}
    assert not constants.for_hardware(none).calibrated
    with pytest.raises(constants.CalibrationError, match=r"^hardware\.perf\.calibration: no calibration file"):
        constants.for_hardware({**hw("b300"), "perf": {**hw("b300")["perf"], "calibration": str(tmp_path / "x.yaml")}})
    # the user dir wins over the shipped file; perf.box names the box explicitly
    user = tmp_path / "user"
    user.mkdir()
    mine = yaml.safe_load((SHIPPED / "b300.yaml").read_text())
    mine["constants"]["step_overhead_ms"] = 9.0
    (user / "b300.yaml").write_text(yaml.safe_dump(mine))
    monkeypatch.setenv(constants.ENV_DIR, str(user))
    assert constants.for_hardware(hw("b300"))["step_overhead_ms"] == 9.0
    boxed = {**hw("h200"), "perf": {**hw("h200")["perf"], "box": "b300"}}
    assert constants.for_hardware(boxed).path == str(user / "b300.yaml")
    bad = user / "broken.yaml"
    bad.write_text("schema: 1\nconstants: {warp_speed: 3}\n")
    with pytest.raises(constants.CalibrationError, match="constants.warp_speed is not a known number"):
        constants.load(bad)


def test_predict_cells_takes_an_explicit_calibration_and_is_deterministic(tmp_path: Path) -> None:
    cfg = composed("hardware=b300", "workload=quick")
    default = predict_cells(cfg)
    assert default == predict_cells(cfg) and len(default) == 4
    assert {(c["context"], c["concurrency"]) for c in default} == {(60, 1), (60, 8), (4096, 1), (4096, 8)}
    other = yaml.safe_load((SHIPPED / "b300.yaml").read_text())
    other["constants"]["moe_mem_eff"] = 0.5  # a deliberately differently fitted twin
    path = tmp_path / "other.yaml"
    path.write_text(yaml.safe_dump(other))
    faster = predict_cells(cfg, calibration=str(path))
    assert all(f["output_tok_s"] > d["output_tok_s"] for f, d in zip(faster, default))
    assert predict(cfg, calibration="none")["calibration"] == constants.UNCALIBRATED
    crashed = predict(composed("hardware=b300", "spec.budget=16"))
    assert crashed["failure"] == "cuda_graph" and crashed["cells"] == []


def test_predict_cli_prints_cells_bands_and_the_calibration() -> None:
    proc = run("sweep.sim.predict", "hardware=pro6000_ep8", "workload=smoke")
    assert proc.returncode == 0, proc.stderr
    assert f"calibrated: pro6000 ({SHIPPED / 'pro6000.yaml'})" in proc.stdout and "simulated, not measured" in proc.stdout
    assert "coding eval (the five problems, coding_max_tokens 200): mean " in proc.stdout
    # h200 has no calibration of its own: the engine's constants fitted on public figures (gpu-sglang.yaml)
    js = json.loads(run("sweep.sim.predict", "hardware=h200", "workload=smoke", "--json").stdout)
    assert js["calibration"] == f"calibrated: gpu-sglang ({SHIPPED / 'gpu-sglang.yaml'})"
    plain = json.loads(run("sweep.sim.predict", "hardware=h200", "workload=smoke", "+hardware.perf.calibration=none",
                           "--json").stdout)
    assert plain["calibration"] == "uncalibrated: spec-sheet physics"
    assert [p["completion_tokens"] for p in js["coding"]["problems"]] == [200] * 5
    c = js["cells"][0]
    assert c["output_tok_s_low"] < c["output_tok_s"] < c["output_tok_s_high"]
    bad = run("sweep.sim.predict", "spec.budget=0")
    assert bad.returncode == 2 and bad.stderr.strip() == "error: spec.budget: must be in [1, 1024] (draft tokens per step), got 0"


def test_bands_widen_away_from_the_measured_points() -> None:
    def rel_width(*overrides: str, ctx: int = 60, conc: int = 1) -> float:
        cells = predict(composed(*overrides, f"workload.contexts=[{ctx}]", f"workload.concurrency=[{conc}]"),
                        band=True)["cells"]
        return cells[0]["output_tok_s_high"] / cells[0]["output_tok_s_low"]

    measured_cell = rel_width("hardware=b300")
    assert measured_cell < 1.2  # fitted there: the band of one run on a box whose runs scatter 4.2%
    assert rel_width("hardware=b300", ctx=4096, conc=64) > measured_cell
    assert rel_width("hardware=h200") > 1.5  # no box calibration: the engine's constants, fitted on other boxes


def test_sim_server_runs_on_its_boxs_calibration(sim_server, tmp_path: Path) -> None:
    sim = sim_server("hardware=pro6000_ep4", "workload=smoke")
    info = httpx.get(sim.base_url + "/get_server_info", timeout=10).json()
    assert info["sim"]["calibration"] == f"calibrated: pro6000 ({SHIPPED / 'pro6000.yaml'})"
    assert "performance model calibrated: pro6000" in sim.log_text()
    plain = sim_server("hardware=b300", "+hardware.perf.calibration=none")
    assert httpx.get(plain.base_url + "/get_server_info", timeout=10).json()["sim"]["calibration"] == \
        constants.UNCALIBRATED
    # the harness refuses a missing calibration before any server starts (issue 24) ...
    with pytest.raises(ConfigError, match=r"^hardware\.perf\.calibration: no such file"):
        sim_server("hardware=b300", f"+hardware.perf.calibration={tmp_path / 'missing.yaml'}", wait=False)
    # ... and the simulator itself still does, started by hand with a file gone by then
    gone = tmp_path / "gone.yaml"
    shutil.copy(SHIPPED / "pro6000.yaml", gone)
    argv, env, _ = render_overrides(["server=sim", "server.port=1", "hardware=b300",
                                     f"+hardware.perf.calibration={gone}"])
    gone.unlink()
    proc = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "error: hardware.perf.calibration: no calibration file" in proc.stdout + proc.stderr


def test_predict_breakdown_cli_explains_the_crossover() -> None:
    # C=16 is the one load shown where twice the budget pays; at C=64 the verify GEMMs are compute-bound
    # and it stops (since the measured B300 C=128 run pinned their efficiency: it used to stop at C=512).
    proc = run("sweep.sim.predict", "hardware=b300", "workload=smoke", "workload.coding=off", "--breakdown",
               "--concurrency", "1,16,64")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "where a step's time goes (b300 ddtree b8" in out and "twice the budget (b8 -> b16)" in out
    rows = [ln.split() for ln in out.splitlines() if ln.split()[:1] in (["1"], ["16"], ["64"])]
    assert [r[0] for r in rows[:3]] == ["1", "16", "64"] and rows[0][6] == "memory" and rows[2][6] == "compute"
    assert "crossover: " in out and "twice the budget stops paying at C=64" in out
    js = json.loads(run("sweep.sim.predict", "hardware=pro6000_ep8", "workload=smoke", "--breakdown",
                        "--concurrency", "1", "--json").stdout)
    row = js["breakdown"]["rows"][0]
    assert row["comm"] > row["verify"]  # PCIe: the collectives dominate a C=1 step
    bad = run("sweep.sim.predict", "--breakdown", "--concurrency", "0")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --concurrency[0]: ")
    unknown = run("sweep.sim.predict", "--explain")
    assert unknown.returncode == 2 and unknown.stderr.startswith("error: --explain: unknown option")
