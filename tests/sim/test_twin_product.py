"""The twin as a product: what ``python -m sweep.sim.predict`` tells a user matches the box.

The truth is the recorded landscapes (benchmarks/measured/landscapes/: real cells this project
measured on this machine's engines), which the twin's code does not share; every prediction here
goes through ``sweep.sim.predict`` -- from a command line a user types, or from a landscape point's
composed config -- with the shipped calibration, as the figures of merit do
(benchmarks/sim_fidelity.py).
"""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sweep.errors import ConfigError
from sweep.sim import constants, landscape, measured
from sweep.sim.predict import predict

ROOT = Path(__file__).resolve().parents[2]
LANDS = ROOT / "benchmarks" / "measured" / "landscapes"
LLAMA = LANDS / "llamacpp-cpu-smollm2.json"
SHIPPED = ROOT / "sweep" / "sim" / "calibrations"
sys.path.insert(0, str(ROOT / "benchmarks"))


def composed(*overrides: str) -> dict[str, Any]:
    from sweep.compose.cmdline import compose
    from sweep.compose.config import from_omegaconf

    return dict(from_omegaconf(compose(list(overrides))).raw)


ROW = {"output_tok_s": "output_tok_s", "ttft_ms": "ttft_ms_p50", "accept_len": "accept_len"}


@pytest.mark.parametrize("path", sorted(LANDS.glob("*.json")), ids=lambda p: p.stem)
def test_predict_runs_the_physics_the_calibration_was_fitted_with(path: Path) -> None:
    """Every measured figure of a landscape: ``predict`` from its composed config gives exactly what
    the fit computed for it (one derivation of box, figures, model as served, spec, eager, slots,
    the accept length's definition), and a calibrated box's prediction runs on the figures its
    points ran with."""
    points = measured.landscape_points(path)
    assert {p.kind for p in points} >= {"output_tok_s", "ttft_ms", "accept_len"}
    cal = constants.for_hardware(points[0].hardware)
    assert cal.calibrated and Path(cal.path or "").parent == SHIPPED
    assert dict(cal.figures) == {k: v for k, v in constants.figures_of(points[0].hardware).items()}
    cache: dict[int, dict[str, Any]] = {}
    for p in points:
        got = cache.setdefault(id(p.composed), predict(p.composed, calibration=cal))["cells"][0]
        assert got[ROW[p.kind]] == pytest.approx(measured.predict_point(p, cal.values), rel=1e-9), p.label


# Per landscape: the user's path against the recording, no worse than the held-out figures
# benchmarks/sim_fidelity.py prints for it (docs/simulator.md): tok/s, TTFT and accept |error| (median, %).
USER_PATH = {"llamacpp-cpu-smollm2": (16.0, 22.0, 6.0), "vllm-cpu-smollm2": (12.0, 25.0, 8.0)}


@pytest.mark.parametrize("name", sorted(USER_PATH))
def test_the_users_command_line_predicts_its_landscape(name: str) -> None:
    """``python -m sweep.sim.predict`` composed from the recorder's own command line (its base overrides,
    the config's, the landscape's workload settings) with the shipped calibration, against every cell
    of the recording; its 80% band for one run holds 70-90% of the single rounds measured."""
    import _twin_judge as judge

    cells = judge.user_table(LANDS / f"{name}.json")
    tok, ttft, acc = USER_PATH[name]
    assert len(cells) >= 28  # the vLLM landscape: 7 configs x 4 loads of edit
    assert judge.median_error(cells, "output_tok_s") < tok
    assert judge.median_error(cells, "ttft_ms_p50") < ttft
    assert judge.median_error(cells, "accept_len") < acc
    inside = judge.coverage(cells)  # each round's tok/s against the band for one run (workload.repeats=1)
    widths = sorted(c.band[1] / c.band[0] for c in cells)
    assert 0.7 <= inside <= 0.9 and widths[len(widths) // 2] < 2.5, (inside, widths[len(widths) // 2])


def test_a_calibrated_cpu_box_predicts_on_the_figures_it_was_fitted_with() -> None:
    """vLLM on this box: the shipped calibration was fitted on the landscape's measured figures (one
    core, python -m sweep.sim.probe --threads 1 when it was recorded); conf/hardware/cpu.yaml's are two
    threads on another day (26.7 GFLOPS against 90.9). With them the fitted efficiencies would
    multiply other figures: the prefill (compute-bound) would come out 3x slow -- the first symptom
    of the issue's table (TTFT 5,626 ms predicted, 1,444 measured)."""
    import _twin_judge as judge

    from sweep.compose.cmdline import compose
    from sweep.compose.config import from_omegaconf

    land = landscape.load(LANDS / "vllm-cpu-smollm2.json")
    line = judge.user_overrides(land, "none", "edit")
    mine = predict(from_omegaconf(compose(line)))
    other = predict(from_omegaconf(compose([*line, "hardware.perf.figures=config"])))
    assert mine["figures"]["source"] == "calibration" and other["figures"]["source"] == "config"
    assert mine["figures"]["matmul_tflops"] == land.doc["machine"]["perf"]["matmul_tflops"]
    measured_c1 = next(p for p in land.points if p["config"] == "none" and p["workload"] == "edit"
                       and p["concurrency"] == 1)["ttft_ms_p50"]
    assert mine["cells"][0]["ttft_ms_p50"] == pytest.approx(measured_c1, rel=0.3)
    assert other["cells"][0]["ttft_ms_p50"] > 2 * mine["cells"][0]["ttft_ms_p50"]


def test_a_cpu_box_without_its_measured_figures_is_refused(tmp_path: Path) -> None:
    """Without measured figures a CPU box ran on a GPU's defaults (8 TB/s, 2,000 TFLOPS) and the
    constants fitted to it absorbed the difference (the first vLLM landscape: predict was 2-4x off
    on the user's path). A landscape recorded without them is named and skipped; a config without
    them is one line."""
    doc = json.loads(LLAMA.read_text())
    doc["machine"].pop("perf")
    for cfg in doc["configs"]:
        cfg["composed"]["hardware"]["perf"]["mem_bw_tbs"] = None
    bad = tmp_path / "no-figures.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(landscape.LandscapeError, match="mem_bw_tbs.*machine.perf"):
        measured.landscape_points(bad)
    loaded = measured.load([bad])  # named as a bad file (skipped <path>: <why>), nothing of it used
    assert not loaded.points and [b.path for b in loaded.bad] == [bad] and "machine.perf" in str(loaded.bad[0])
    with pytest.raises(ConfigError, match=r"^hardware\.perf\.mem_bw_tbs: a CPU box needs its measured figures"):
        predict(composed("server=llamacpp", "hardware.perf.mem_bw_tbs=null", "hardware.perf.figures=config"))


def test_bands_separate_one_runs_noise_from_the_models_error() -> None:
    """The shipped CPU calibration carries the box's run-to-run noise of one measurement, measured from
    the landscape's rounds, apart from the model's own error; a band is for a measurement of
    workload.repeats runs: three repeats narrow only the noise's share (the model's error and the
    constants' uncertainty stay)."""
    cal = constants.for_hardware(constants.engine_hardware(composed("server=llamacpp")["hardware"],
                                                           {"name": "llamacpp"}))
    noise, model = dict(cal.noise_by_kind), dict(cal.model_by_kind)
    assert 0.1 < noise["output_tok_s"] < 0.6  # this shared 2-core box: ~20-40% from one run to the next
    assert "output_tok_s" in model and "ttft_ms" in model and "accept_len:ngram" in model
    one, three = (predict(composed("server=llamacpp", "server.threads=1", "spec=llamacpp_ngram", "workload=cpu",
                                   f"workload.repeats={r}", "workload.coding=off"), band=True)["cells"][0]
                  for r in (1, 3))
    assert one["output_tok_s"] == three["output_tok_s"]
    w1 = math.log(one["output_tok_s_high"] / one["output_tok_s_low"])
    w3 = math.log(three["output_tok_s_high"] / three["output_tok_s_low"])
    assert w3 < w1
    z = 1.2815515655446004
    rest = (w1 / (2 * z)) ** 2 - noise["output_tok_s"] ** 2  # what is not one run's noise
    assert (w3 / (2 * z)) ** 2 == pytest.approx(rest + noise["output_tok_s"] ** 2 / 3, rel=0.02)


def test_held_out_bands_cover_about_what_they_claim() -> None:
    """Fit the llama.cpp landscape without one concurrency, predict it through predict, for each of its
    three: the 80% bands hold 70-90% of the held-out tok/s, TTFTs and accept lengths (they held 94-100%:
    the box's noise was pushed into every band as model error), and tok/s bands are narrower than a
    factor of 2.2 end to end (a mean of two runs on a box whose runs scatter 30%)."""
    from sweep.sim import heldout

    points = measured.landscape_points(LLAMA)
    report = heldout.evaluate(points, [s for s in heldout.splits(points) if s.group == "locco"])
    for kind, most in (("output_tok_s", 18.0), ("ttft_ms", 25.0), ("accept_len", 6.0)):
        outs = report.select("locco", kind)
        med, cov, n = heldout.Report.summary(outs)
        assert n >= 50 and 70 <= cov <= 90 and med < most, (kind, cov, n, med)
    assert heldout.Report.width(report.select("locco", "output_tok_s")) < 2.2


def test_an_open_layout_assumption_is_inside_the_band_and_named() -> None:
    """PCIe EP layouts: the profiles run attention tensor-parallel, SGLang's EP deployments commonly
    run it data-parallel (--enable-dp-attention): 1.8x apart at C=1, more than any fitted constant
    moves. While the config leaves it open the band spans both and says so; stating it closes it."""
    cell = ["workload.contexts=[60]", "workload.concurrency=[1]", "workload.coding=off"]
    open_ = predict(composed("hardware=pro6000_ep8", *cell), band=True)
    said = open_["assumptions"][0]
    assert said["name"] == "attention" and "DP attention" in said["alternative"]
    alt = said["output_tok_s"][0]
    c = open_["cells"][0]
    assert alt > 1.5 * c["output_tok_s"] and c["output_tok_s_low"] < c["output_tok_s"] and alt < c["output_tok_s_high"]
    closed = predict(composed("hardware=pro6000_ep8", "+hardware.dp_attention=false", *cell), band=True)
    assert "assumptions" not in closed and closed["cells"][0]["output_tok_s_high"] < alt
    dp = predict(composed("hardware=pro6000_ep8", "+hardware.dp_attention=true", "hardware.dp=8",
                          "server.mem_fraction_static=0.95", *cell), band=True)
    assert dp["cells"][0]["output_tok_s"] == pytest.approx(alt, rel=0.02)
    assert "assumptions" not in predict(composed("hardware=b300", *cell), band=True)  # TP only: nothing open


def test_gpu_bands_count_the_structure_no_point_measured() -> None:
    """B300: at C=1 and C=8, where the article measured, a band is the noise of one run (4.2%) and
    little more -- and at C=256 too, next to the measured C=128 run, which pins the verify GEMMs'
    efficiency (benchmarks/measured/b300-ddtree-b8-t4-w2048-c128.json; before that point C=256 was the
    unmeasured, wide case). At context 4096, where the attention over a long KV and the per-request
    work (constants no point at context 60 fits) decide, it is several times wider."""
    def width(conc: int, ctx: int = 60) -> float:
        c = predict(composed("hardware=b300", f"workload.contexts=[{ctx}]", f"workload.concurrency=[{conc}]",
                             "workload.coding=off"), band=True)["cells"][0]
        return c["output_tok_s_high"] / c["output_tok_s_low"]

    assert width(1) < 1.2
    assert width(256) < 1.3
    assert width(256, 4096) > 1.5 and width(256, 4096) > 2 * (width(1) - 1) + 1


def test_predict_family_cli_prints_the_per_load_schedule_and_vllms_table() -> None:
    """``--budgets`` with ``--acceptance``: the family's budgets at every load from the largest budget's
    per-position acceptance, the best per load, vLLM's num_speculative_tokens_per_batch_size table
    (valid as vLLM's validator wants it: sorted inclusive ranges from 1, non-overlapping), the cost."""
    args = [sys.executable, "-m", "sweep.sim.predict", "server=llamacpp", "server.threads=1", "spec=llamacpp_ngram",
            "spec.ngram_n_min=2", "workload=cpu", "workload.contexts=[64]", "--budgets", "8,16,32",
            "--acceptance", f"{LLAMA}#ngram-b32-min2/cpu", "--json"]
    proc = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["profile_budget"] == 32 and set(doc["accept_len"]) == {"8", "16", "32"}
    table = doc["per_load_table"]
    assert table[0][0] == 1 and all(a[1] + 1 == b[0] for a, b in zip(table, table[1:]))
    assert all(lo <= hi and k in (0, 8, 16, 32) for lo, hi, k in table)
    assert [lv["load"] for lv in doc["levels"]] == [1, 4]  # workload=cpu's concurrencies
    assert 0 < doc["gpu_hours"]["prescreen"] < doc["gpu_hours"]["full_table"]
    bad = subprocess.run([*args[:-1], "--budgets", "0"], capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --budgets[0]: ")


def test_the_served_dtype_is_what_streams() -> None:
    """vLLM on a CPU loads the HF folder (bfloat16 on disk) and computes in hardware.cpu.dtype
    (float32 here: --dtype): 4 bytes a weight stream per step, not the folder's 2 nor the GGUF's ~0.6."""
    from sweep.sim.arch import as_served, shape

    cfg = composed("server=vllm")
    hw = cfg["hardware"]
    fp32 = as_served(cfg["model"], cfg["server"], hw)
    bf16 = as_served(cfg["model"], cfg["server"], {**hw, "cpu": {**hw["cpu"], "dtype": "bfloat16"}})
    auto = as_served(cfg["model"], cfg["server"], {**hw, "cpu": {**hw["cpu"], "dtype": "auto"}})
    assert shape(fp32)["dense_bytes"] == pytest.approx(2 * shape(bf16)["dense_bytes"])
    assert shape(auto)["dense_bytes"] == shape(bf16)["dense_bytes"]  # auto: the checkpoint's own
    assert shape(fp32)["dense_bytes"] > 5 * shape(cfg["model"])["dense_bytes"]  # the GGUF's size
    assert copy.deepcopy(cfg["model"]) == cfg["model"]


def test_the_per_load_schedule_from_two_measured_configs_agrees_with_the_measured_one() -> None:
    """The re-recorded vLLM landscape: fitted on spec=none and n-gram budget 8 alone (8 cells of edit, every
    round) with budget 8's per-position acceptance carried to 1, 2 and 4, the twin's best budget per
    load is the measured best or tied with it (sweep.report.schedule over the landscape's rounds,
    as python -m sweep.schedule --dir reads it) at most levels, run as predicted the box keeps most
    of the measured leader's tok/s, where speculation stops paying lands within one load step, and
    the pre-screen costs a fraction of measuring the table."""
    import _twin_judge as judge

    got = judge.schedule_agreement(LANDS / "vllm-cpu-smollm2.json")
    assert got.measured_cells == 8 and [b for b, _ in got.family] == [1, 2, 4, 8]  # 2 configs x 4 loads of edit
    assert len(got.levels) == 4  # edit (the quiet re-recording), loads 1, 2, 4, 8
    assert got.agreement >= SCHEDULE_AGREEMENT, [(lv.workload, lv.load, lv.predicted, lv.measured) for lv in got.levels]
    kept = sorted(lv.kept for lv in got.levels if lv.kept is not None)
    assert kept[0] >= SCHEDULE_KEPT, kept
    assert all(ok for *_, ok in got.crossover), got.crossover
    assert got.hours["prescreen"] < 0.5 * got.hours["full_table"]


SCHEDULE_AGREEMENT, SCHEDULE_KEPT = 0.75, 0.85  # docs/simulator.md, "The per-load schedule"
