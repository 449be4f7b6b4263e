"""The twin stays physical between and beyond its fitted points, for every shipped calibration.

A fit that reproduces every measured figure but predicts nonsense between
them is a failure, so these check shapes over whole grids: concurrency and
context only ever cost a stream speed, more streams never lower the box's
aggregate (up to the CUDA-graph batch ceiling), prefill only grows, the
drafter window and the tree shape change what a real DDTree changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sweep.sim import accept, cells, constants, perf

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
MODEL = yaml.safe_load((CONF / "model" / "kimi_k26.yaml").read_text())
CONCURRENCY = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CONTEXTS = (60, 512, 1024, 2048, 4096, 8192, 16384)
SPECS = [{"algorithm": "none"},
         {"algorithm": "ddtree", "budget": 8, "topk": 4, "window": 2048, "block": 8},
         {"algorithm": "ddtree", "budget": 32, "topk": 1, "window": 512, "block": 8},
         {"algorithm": "ddtree", "budget": 16, "topk": 8, "window": 4096, "block": 8},
         {"algorithm": "dflash", "budget": 8, "window": 2048, "block": 8}]
EPS = 1e-9


def hw(name: str) -> dict[str, Any]:
    return yaml.safe_load((CONF / "hardware" / f"{name}.yaml").read_text())


def shipped_profiles() -> list[str]:
    names: list[str] = []
    for path in sorted(constants.SHIPPED_DIR.glob("*.yaml")):
        names += [n for n in yaml.safe_load(path.read_text())["profiles"] if n not in names]
    return sorted(names)


def ddtree(budget: int, topk: int = 4, window: int = 2048) -> dict[str, Any]:
    return {"algorithm": "ddtree", "budget": budget, "topk": topk, "window": window, "block": 8}


def test_every_shipped_profile_is_calibrated() -> None:
    # cpu: the recorded landscapes' box (cpu-llamacpp.yaml, cpu-vllm.yaml), calibrated per engine
    assert shipped_profiles() == ["b300", "cpu", "pro6000_ep4", "pro6000_ep8", "pro6000_tp8"]
    for name in shipped_profiles():
        box = constants.engine_hardware(hw(name), {"name": "llamacpp"}) if name == "cpu" else hw(name)
        assert constants.for_hardware(box).calibrated, name


@pytest.mark.parametrize("profile", shipped_profiles())
def test_monotone_in_concurrency_and_context(profile: str) -> None:
    box = hw(profile)
    for spec in SPECS:
        for eager in (False, True):
            grid = {(x, c): cells.estimate(box, MODEL, spec, context=x, concurrency=c, max_tokens=512,
                                          requests=2 * c, disable_cuda_graph=eager)
                    for x in CONTEXTS for c in CONCURRENCY}
            where = f"{profile} {spec} eager={eager}"
            for x in CONTEXTS:
                for a, b in zip(CONCURRENCY, CONCURRENCY[1:]):
                    lo, hi = grid[x, a], grid[x, b]
                    # a stream's share of the box never grows with more streams; the box's total never falls
                    assert hi["tok_s"] / b <= lo["tok_s"] / a * (1 + EPS), (where, x, a, b)
                    assert hi["tok_s"] >= lo["tok_s"] * (1 - EPS), (where, x, a, b)
                    assert hi["per_stream_tok_s"] <= lo["per_stream_tok_s"] * (1 + EPS), (where, x, a, b)
                    assert hi["ttft_ms"] >= lo["ttft_ms"] * (1 - EPS), (where, x, a, b)
            for c in CONCURRENCY:
                for a, b in zip(CONTEXTS, CONTEXTS[1:]):
                    lo, hi = grid[a, c], grid[b, c]
                    assert hi["tok_s"] <= lo["tok_s"] * (1 + EPS), (where, c, a, b)
                    assert hi["ttft_ms"] >= lo["ttft_ms"] * (1 - EPS), (where, c, a, b)
                    assert hi["accept_len"] <= lo["accept_len"] * (1 + EPS), (where, c, a, b)
                    if hi["running"] == lo["running"]:  # fewer running (KV full) decode faster: queueing, not physics
                        assert hi["per_stream_tok_s"] <= lo["per_stream_tok_s"] * (1 + EPS), (where, c, a, b)


# GPU boxes: a CPU box's step is its weights streamed per token, long answers or short
@pytest.mark.parametrize("profile", [p for p in shipped_profiles() if p != "cpu"])
def test_shorter_answers_run_faster_per_token(profile: str) -> None:
    rates = [cells.estimate(hw(profile), MODEL, ddtree(8), context=100, concurrency=1, max_tokens=n)["per_stream_tok_s"]
             for n in (128, 256, 289, 512, 1024, 2048)]
    assert rates == sorted(rates, reverse=True) and rates[0] > 1.2 * rates[4]


def test_topk_shapes_the_tree_its_acceptance_and_its_verify_cost() -> None:
    b300 = hw("b300")
    cal = constants.for_hardware(b300)
    deep = accept.shape_of(ddtree(16, topk=1))
    wide = accept.shape_of(ddtree(16, topk=8))
    assert (deep.nodes, deep.width, deep.tree) == (7, 8, False)  # a chain: block - 1 deep, causal verify
    assert (wide.nodes, wide.width, wide.tree) == (16, 17, True)
    # at budget 32, topk 4 spends more nodes near the root and fewer deep than topk 2 (wide and shallow)
    narrow = accept.tree(32, 2, 7, cal["p0"], cal["decay"], cal["rho"], 1.0)[1]
    broad = accept.tree(32, 4, 7, cal["p0"], cal["decay"], cal["rho"], 1.0)[1]
    assert sum(narrow) == sum(broad) == 32 and broad[0] > narrow[0] and sum(broad[3:]) < sum(narrow[3:])
    acc = {k: perf.accept_length(ddtree(16, topk=k), hardware=b300) for k in (1, 2, 4, 8)}
    assert acc[1] < acc[2] <= acc[4] <= acc[8]
    step = {k: perf.step_breakdown(b300, MODEL, ddtree(16, topk=k), batch=64, context_sum=64 * 4096.0,
                                   disable_cuda_graph=True)["total"] for k in (1, 4)}
    assert step[1] < 0.95 * step[4]  # 8 causal tokens vs 17 under a tree mask
    c64 = {k: cells.estimate(b300, MODEL, ddtree(16, topk=k), context=60, concurrency=64, max_tokens=512,
                            disable_cuda_graph=True)["tok_s"] for k in (1, 2, 4, 8)}
    assert max(c64.values()) > 1.05 * min(c64.values())


def test_the_window_matters_once_the_context_outgrows_it() -> None:
    b300 = hw("b300")

    def cell(window: int, context: int) -> dict[str, float]:
        return cells.estimate(b300, MODEL, ddtree(8, window=window), context=context, concurrency=8, max_tokens=512)

    short = [cell(w, 60)["tok_s"] for w in (512, 1024, 2048, 4096)]
    assert max(short) < 1.005 * min(short)  # context 60 + 512 tokens fits every window
    long = [cell(w, 8192) for w in (512, 1024, 2048, 4096)]
    assert [c["accept_len"] for c in long] == sorted(c["accept_len"] for c in long)
    assert long[0]["tok_s"] < 0.97 * long[-1]["tok_s"]
    assert long[0]["step_draft_ms"] < long[-1]["step_draft_ms"]  # a smaller window is cheaper to draft with
