"""The twin's physics as pure functions: collectives per layout, the high-load regime, chain
drafters, a CPU box, the perturbed twin. No server; each assertion is a consequence of the
equations in docs/simulator.md that a wrong term would break."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from sweep.sim import accept, arch, cells, comm, constants, perf
from sweep.sim.perturb import perturbed_calibration

CONF = Path(__file__).resolve().parents[2] / "conf"
DDTREE = {"algorithm": "ddtree", "budget": 8, "topk": 4, "window": 2048, "block": 8}
NONE = {"algorithm": "none"}


def load(group: str, name: str) -> dict[str, Any]:
    return yaml.safe_load((CONF / group / f"{name}.yaml").read_text())


KIMI, SMOL = load("model", "kimi_k26"), load("model", "smollm2")


def box(hw: str, **over: Any) -> arch.Box:
    return arch.box_of({**load("hardware", hw), **over}, KIMI)


def vals(hw: str) -> dict[str, float]:
    return dict(constants.for_hardware(load("hardware", hw)).values)


def test_allreduce_algorithm_follows_the_message_size_and_the_link() -> None:
    nv, c = box("b300"), vals("b300")
    small = comm.allreduce(nv, c, 9 * 7168 * 2, 8)            # a C=1 verify step
    mid = comm.allreduce(nv, c, 256 * 7168 * 2, 8)            # 3.7 MB
    big = comm.allreduce(nv, c, 2304 * 7168 * 2, 8)           # 33 MB: beyond the custom all-reduce buffer
    assert (small[1], mid[1], big[1]) == ("one-shot", "two-shot", "nvls")
    assert small[0] < mid[0] < big[0]
    pcie, cp = box("pro6000_tp8"), vals("pro6000_tp8")
    ring = comm.allreduce(pcie, cp, 9 * 7168 * 2, 8)
    assert ring[1] == "ring"  # no custom all-reduce over more than two PCIe GPUs
    hop = pcie.alpha * cp["link_latency_factor"]
    assert ring[0] == pytest.approx(2 * 7 * hop, rel=0.05)   # latency-bound: 2(n-1) dependent hops
    assert comm.allreduce(pcie, cp, 9 * 7168 * 2, 2)[1] in ("one-shot", "two-shot")  # a pair has peer access


def test_ep_replaces_the_moe_allreduce_by_all_to_all_and_the_uplink_binds_large_ones() -> None:
    c = vals("pro6000_tp8")
    tp8 = comm.forward_comm(box("pro6000_tp8"), c, 9)
    ep8 = comm.forward_comm(box("pro6000_ep8"), c, 9)
    assert tp8["all_to_all"] == 0 and ep8["all_to_all"] > 0
    assert ep8["allreduce"] < 0.55 * tp8["allreduce"]  # attention's 61 + the dense layer's 1 of TP8's 122
    ep4 = comm.forward_comm(box("pro6000_ep4"), c, 9)
    assert ep8["allreduce"] < ep4["allreduce"] < tp8["allreduce"]  # EP4 keeps an all-reduce inside each pair
    one = box("pro6000_ep8", perf={**load("hardware", "pro6000_ep8")["perf"], "pcie_domains": 1})
    two = box("pro6000_ep8")
    small, large = 1e4, 2e7
    assert comm.all_to_all_s(two, c, small, 8) == pytest.approx(comm.all_to_all_s(one, c, small, 8), rel=0.01)
    assert comm.all_to_all_s(two, c, large, 8) > 1.5 * comm.all_to_all_s(one, c, large, 8)


def test_dp_replicas_split_the_requests() -> None:
    big = {**load("hardware", "h200"), "num_gpus": 8, "memory_gb": 400}
    one = cells.estimate({**big, "tp": 8, "dp": 1}, KIMI, NONE, context=60, concurrency=64, max_tokens=256)
    two = cells.estimate({**big, "tp": 4, "dp": 2}, KIMI, NONE, context=60, concurrency=64, max_tokens=256)
    assert two["running"] == 32 and one["running"] == 64
    assert one["tok_s"] != two["tok_s"] and two["tok_s"] > 0


def test_dp_attention_trades_the_attention_allreduce_for_replicated_attention_weights() -> None:
    ep8 = load("hardware", "pro6000_ep8")
    dpa = {**ep8, "dp": 8, "dp_attention": True}
    c = vals("pro6000_ep8")
    plain, split = arch.box_of(ep8, KIMI), arch.box_of(dpa, KIMI)
    assert (split.attn_dp, split.attn_tp, split.replicas) == (8, 1, 1)
    assert comm.forward_comm(split, c, 9, 1.0)["allreduce"] < 0.2 * comm.forward_comm(plain, c, 9)["allreduce"]
    s = accept.shape_of(DDTREE)
    one, eight = perf.step_ms(plain, c, s, 1, 60), perf.step_ms(split, c, s, 1, 60)
    assert eight["weights_ms"] > one["weights_ms"] + 5  # one GPU streams all of the request's attention
    assert eight["total"] < 0.7 * one["total"]
    # 590 GB of weights plus attention replicated 8x do not leave 4K tokens of KV at the default fraction
    assert perf.startup_failure(dpa, KIMI, DDTREE, {"skip_server_warmup": True}) == "oom"
    assert perf.startup_failure(dpa, KIMI, DDTREE, {"skip_server_warmup": True, "mem_fraction_static": 0.95}) is None


def test_verify_turns_compute_bound_and_attention_grows_with_context_times_batch() -> None:
    b, c = box("b300"), vals("b300")
    s = accept.shape_of(DDTREE)
    low = perf.step_ms(b, c, s, 1, 60)
    high = perf.step_ms(b, c, s, 256, 256 * 60)
    assert low["bound"] == 0 and high["bound"] == 1  # weights stream at C=1; GEMMs bind at C=256
    assert high["gemm_ms"] > 20 * low["gemm_ms"]
    short = perf.step_ms(b, c, s, 64, 64 * 60)
    long = perf.step_ms(b, c, s, 64, 64 * 8192)
    assert long["kv_ms"] + long["attn_ms"] > 50 * (short["kv_ms"] + short["attn_ms"])
    assert high["batch"] > 100 * low["batch"] and high["draft"] > 5 * low["draft"]
    # a wider tree costs verify GEMM rows at high load; at C=1 it costs new experts
    wide = perf.step_ms(b, c, accept.shape_of({**DDTREE, "budget": 32}), 256, 256 * 60)
    assert wide["gemm_ms"] > 2.5 * high["gemm_ms"]


def test_breakdown_explains_where_a_wider_tree_stops_paying() -> None:
    from sweep.compose.cmdline import compose
    from sweep.compose.config import from_omegaconf
    from sweep.sim import explain

    cfg = from_omegaconf(compose(["hardware=b300", "workload=quick"]))
    b = explain.breakdown(cfg, concurrencies=[1, 16, 64, 256, 512])
    rows = {r["concurrency"]: r for r in b["rows"]}
    for r in rows.values():
        parts = r["draft"] + r["verify"] + r["comm"] + r["overhead"]
        assert parts == pytest.approx(r["step"], rel=1e-6)
    assert rows[1]["bound"] == "memory" and rows[512]["bound"] == "compute"
    # Twice the budget pays only in the middle (C=16: experts read anyway, verify still memory-bound)
    # and stops at C=64, where the verify GEMMs turn compute-bound -- since the measured B300 C=128 run
    # pinned their efficiency (compute_eff 0.035); before that it paid up to C=64 and stopped at 256-512.
    assert not rows[1]["wider"]["pays"] and rows[16]["wider"]["pays"] and not rows[64]["wider"]["pays"]
    assert rows[16]["bound"] == "memory" and rows[64]["bound"] == "compute"
    assert not rows[512]["wider"]["pays"] and b["crossover"]["wider_stops"] == 64
    text = explain.render(b, "b300 ddtree b8")
    assert "crossover:" in text and "twice the budget (b8 -> b16)" in text


def chain(**kw: Any) -> accept.Shape:
    return accept.shape_of({"algorithm": "ngram", "budget": 8, "ngram_n_min": 1, **kw})


def test_chain_drafter_acceptance() -> None:
    c = {**constants.prior_values("cpu"), "ngram_hit": 0.5, "ngram_cont": 0.8, "ngram_q": 0.7}
    s = chain()
    offer = accept.chain_offer(s, c)
    assert offer[0] == pytest.approx(0.5) and offer[3] == pytest.approx(0.5 * 0.8 ** 3)
    surv = accept.survival(s, c, 1.0)
    assert surv[1] == pytest.approx(0.5 * 0.8 * 0.7 ** 2)
    assert accept.mean_width(s, c) == pytest.approx(1 + sum(offer))
    # drafts shorter than n_min are dropped: fewer, but never shorter drafts
    picky = chain(ngram_n_min=4)
    assert accept.chain_offer(picky, c)[0] == pytest.approx(0.5 * 0.8 ** 3)
    assert accept.chain_offer(chain(ngram_n_min=9), c) == (0.0,) * 8
    # a shorter lookup key hits more often (the text is that much less deep into a repeat)
    rare = {**c, "ngram_hit": 0.1}
    assert accept.chain_offer(chain(ngram_n_match=12), rare)[0] > 2 * accept.chain_offer(chain(), rare)[0]
    assert accept.chain_offer(chain(ngram_n_match=12), c)[0] == 1.0  # a probability: capped
    # a draft model that is the target, with no probability floor: every token drafted and accepted
    same = {**c, "draft_cont": 1.0, "draft_q": 1.0}
    d = accept.shape_of({"algorithm": "draft", "budget": 4})
    assert accept.moments(accept.survival(d, same, 1.0))[0] == pytest.approx(5.0, rel=0.01)


def test_a_dense_model_on_a_cpu_box() -> None:
    hw = load("hardware", "cpu")
    assert constants.kind_of(hw) == "cpu" and constants.for_hardware(hw).kind == "cpu"
    b = arch.box_of(hw, SMOL)
    assert not b.moe and b.cpu and b.tp == 1
    assert 0.12e9 < b.active_params < 0.15e9  # SmolLM2-135M, tied embeddings
    assert b.kv_bytes_token == 30 * 2 * 3 * 64 * 2  # f16 K and V of 3 KV heads x 64 dims, 30 layers
    assert comm.forward_comm(b, constants.prior_values("cpu"), 64) == \
        {"allreduce": 0.0, "all_to_all": 0.0, "logits": 0.0}
    cal = constants.for_hardware(hw)
    ar = cells.estimate(hw, SMOL, NONE, context=128, concurrency=1, max_tokens=128, cal=cal)
    self_draft = {"algorithm": "draft", "budget": 8}
    dr = cells.estimate(hw, SMOL, self_draft, context=128, concurrency=1, max_tokens=128, cal=cal)
    # drafting with the target itself costs a target forward per drafted token: slower than autoregressive
    assert dr["tok_s"] < ar["tok_s"] and dr["step_draft_ms"] > 4 * ar["step_ms"]
    wide = cells.estimate(hw, SMOL, NONE, context=128, concurrency=4, max_tokens=128, cal=cal, max_running=2)
    assert wide["running"] == 2  # llama.cpp's slots cap the batch


def test_perturbed_twin_is_seeded_and_moves_by_the_twins_uncertainty() -> None:
    hw = load("hardware", "b300")
    base = constants.for_hardware(hw)
    a, b = perturbed_calibration(hw, seed=1), perturbed_calibration(hw, seed=1)
    assert a.values == b.values and a.source.startswith("perturbed twin of calibrated: b300")
    assert perturbed_calibration(hw, seed=2).values != a.values
    assert perturbed_calibration(hw, seed=5, scale=0.0).values == pytest.approx(dict(base.values))

    def spread(name: str) -> float:
        zs = [math.log(perturbed_calibration(hw, seed=s).values[name]) for s in range(40)]
        mean = sum(zs) / len(zs)
        return math.sqrt(sum((z - mean) ** 2 for z in zs) / (len(zs) - 1))

    # moe_mem_eff is pinned by the measured points, request_overhead_us only by its prior
    assert spread("request_overhead_us") > 3 * spread("moe_mem_eff")
    moved = [n for n in ("overlap_penalty", "tree_mask_penalty", "gemm_tile_rows")
             if a.values[n] != base.values[n]]
    assert moved == ["overlap_penalty", "tree_mask_penalty", "gemm_tile_rows"]  # the structure moves too
    with pytest.raises(ValueError):
        perturbed_calibration(hw, seed=0, scale=-1)


def test_chain_numbers_come_from_the_engines_flags_and_the_model_as_it_loads_it() -> None:
    from sweep.sim.measured import chain_keys

    vllm = {"spec": {"algorithm": "ngram", "budget": 4, "ngram_n_min": 2, "render": {"vllm": {"args": {
        "--speculative-config": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4,
                                 "prompt_lookup_min": 2}}}}}, "server": {"name": "vllm", "flavor": "vllm"}}
    # vLLM's proposer drafts its whole budget on a hit; its hit rate is fitted at its own shortest key
    assert chain_keys(vllm) == {"chain_n_max": 4, "chain_floor": 0, "lookup_key": 2, "draft_p_min": None,
                                "lookup_reference": 2, "full_draft": True}
    llama = {"spec": {"algorithm": "ngram", "budget": 16, "render": {"llamacpp": {"args": {
        "--spec-ngram-mod-n-max": 16, "--spec-ngram-mod-n-min": None, "--spec-ngram-mod-n-match": None}}}},
        "server": {"name": "llamacpp"}}
    keys = chain_keys(llama)  # unset flags: llama.cpp's own defaults (a floor of 48 drops every 16-token draft)
    assert keys["chain_floor"] == 48 and keys["lookup_key"] == 24
    c = {**constants.prior_values("cpu"), "ngram_hit": 0.5, "ngram_cont": 0.9, "ngram_q": 0.9}
    assert accept.mean_width(accept.shape_of({**llama["spec"], **keys}), c) == 1.0
    # an engine other than SGLang calibrates its own box; a GGUF loaded dequantized streams bf16 bytes
    hw = load("hardware", "cpu")
    assert constants.engine_hardware(hw, {"name": "llamacpp"})["perf"]["box"] == "cpu-llamacpp"
    assert constants.engine_hardware(load("hardware", "b300"), {"name": "sglang"})["perf"].get("box") is None
    gguf = {**SMOL, "install": {**(SMOL.get("install") or {}), "hf": {"dtype": "bfloat16"}}}
    as_hf = arch.as_served(gguf, {"model_format": "hf"})
    assert arch.shape(as_hf)["dense_bytes"] > 2.5 * arch.shape(gguf)["dense_bytes"]
    assert arch.as_served(gguf, {"model_format": "gguf"}) is gguf
