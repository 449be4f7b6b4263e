"""The simulator's performance model: step time and acceptance from physics.

Pure and importable (no I/O beyond reading ``calibration.yaml`` once): the
sim server asks it how long each batched decode step takes and how many
tokens each request accepts; the rest of the project can ask it what-if
questions through :func:`estimate` and :func:`startup_failure`.

A decode (or verify) step on one GPU costs

    gpu    = max(mem, compute) + overlap_penalty * min(mem, compute)
    mem    = (dense weights/tp + distinct experts' bytes on the busiest GPU + KV reads) / (BW * eff)
    comm   = per-layer AllReduce (TP) or all-to-all (EP, MoE layers)
    step   = gpu + comm + layers * kernel overhead + fixed step overhead + draft + tree + spec bookkeeping

where the distinct experts a step touches grow with the verified tokens
T = batch * verify width: E[distinct] = E * (1 - (1 - k/E)^T). That is what
makes big draft trees cheap at concurrency 1 and expensive at high
concurrency. Equations and the calibration fit: docs/simulator.md.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from typing import Any, Mapping

from sweep.sim._calibration import CALIBRATION_FILE, calibration  # noqa: F401 - perf is the public API
from sweep.sim.accept import (  # noqa: F401 - re-exported: perf is the public API
    accept_length, draw_accepted, family, survival, verify_width,
)

TREE_FAMILIES = ("ddtree",)
CUDA_GRAPH_MAX_BS = 256  # SGLang's default graph batch-size ceiling on large GPUs
BLOCK_FAMILIES = ("dflash", "ddtree")


# --------------------------------------------------------------------------- model shape


def _arch(model: Mapping[str, Any]) -> Mapping[str, Any]:
    return model.get("arch", model) or {}


@lru_cache(maxsize=64)
def _shape(arch_json: str) -> dict[str, float]:
    """Parameter and byte counts of the target model (per whole model, not per GPU)."""
    a = json.loads(arch_json)
    h = float(a.get("hidden_size", 7168))
    layers = int(a.get("layers", 61))
    dense_layers = int(a.get("dense_layers", 1))
    moe_layers = layers - dense_layers
    heads = float(a.get("heads", 64))
    q_lora = float(a.get("q_lora_rank", 1536))
    kv_lora = float(a.get("kv_lora_rank", 512))
    rope = float(a.get("qk_rope_head_dim", 64))
    nope = float(a.get("qk_nope_head_dim", 128))
    v_dim = float(a.get("v_head_dim", 128))
    attn = h * q_lora + q_lora * heads * (nope + rope) + h * (kv_lora + rope) \
        + kv_lora * heads * (nope + v_dim) + heads * v_dim * h
    expert = 3.0 * h * float(a.get("moe_intermediate_size", 2048))
    shared = expert * float(a.get("shared_experts", 1))
    dense_mlp = 3.0 * h * float(a.get("dense_intermediate_size", 18432))
    head = float(a.get("vocab_size", 163840)) * h
    e_bytes = float(a.get("expert_weight_bits", 4)) / 8.0
    d_bytes = float(a.get("dense_weight_bits", 16)) / 8.0
    kv_bytes = float(a.get("kv_cache_bits", 16)) / 8.0
    k = float(a.get("experts_per_token", 8))
    dense_params = layers * attn + moe_layers * shared + dense_layers * dense_mlp + head
    draft = a.get("draft") or {}
    d_layers = float(draft.get("layers", 5))
    return {
        "h": h, "layers": layers, "moe_layers": moe_layers, "dense_layers": dense_layers,
        "experts": float(a.get("routed_experts", 384)), "k": k,
        "expert_bytes_layer": expert * e_bytes,
        "dense_bytes": dense_params * d_bytes,
        "head_bytes": head * d_bytes,
        "active_params": dense_params + moe_layers * k * expert,
        "attn_flops_per_key": layers * heads * (kv_lora + rope + kv_lora) * 2.0,
        "kv_bytes_token": layers * (kv_lora + rope) * kv_bytes,
        "weights_gb": float(a.get("weights_gb", (dense_params * d_bytes
                                                  + moe_layers * float(a.get("routed_experts", 384))
                                                  * expert * e_bytes) / 1e9)),
        "draft_layers": d_layers,
        "draft_layer_params": 4.0 * h * h + dense_mlp,
        "draft_block": float(draft.get("block_size", 8)),
        "vision": bool(a.get("vision_tower", False)),
    }


def shape(model: Mapping[str, Any]) -> dict[str, float]:
    """Model figures derived from ``model["arch"]`` (cached per distinct arch)."""
    return _shape(json.dumps(_arch(model), sort_keys=True, default=str))


# --------------------------------------------------------------------------- hardware


def _hw(hardware: Mapping[str, Any]) -> dict[str, float]:
    perf = hardware.get("perf") or {}
    n = int(hardware.get("num_gpus") or 8)
    tp = int(hardware.get("tp") or n)
    ep = int(hardware.get("ep") or 1)
    return {
        "n": n, "tp": max(1, tp), "ep": max(1, ep),
        "bw": float(perf.get("mem_bw_tbs", 8.0)) * 1e12,
        "flops": float(perf.get("fp8_tflops", 2000)) * 1e12,
        "link_bw": float(perf.get("link_bw_gbs", 900)) * 1e9,
        "alpha": float(perf.get("link_latency_us", 3.0)) * 1e-6,
        "nvlink": bool(perf.get("nvlink", True)),
        "mem_gb": float(hardware.get("memory_gb") or 80),
    }


def allreduce_s(hw: Mapping[str, float], nbytes: float, n: int) -> float:
    """One AllReduce of ``nbytes`` over ``n`` GPUs (seconds).

    NVLink (NVSwitch): one-shot custom AllReduce, two link latencies plus the
    payload from n-1 peers. PCIe without NVLink: NCCL ring, 2(n-1) dependent
    hops each paying the link latency (latency-bound for decode-sized messages).
    """
    if n <= 1:
        return 0.0
    if hw["nvlink"]:
        return 2 * hw["alpha"] + (n - 1) * nbytes / n / hw["link_bw"]
    return 2 * (n - 1) * (hw["alpha"] + nbytes / n / hw["link_bw"])


def all_to_all_s(hw: Mapping[str, float], nbytes_per_gpu: float, n: int) -> float:
    """One all-to-all (dispatch or combine): one latency, (n-1)/n of the payload."""
    if n <= 1:
        return 0.0
    cal = calibration()
    return hw["alpha"] + cal["a2a_overhead_us"] * 1e-6 + nbytes_per_gpu * (n - 1) / n / hw["link_bw"]


# --------------------------------------------------------------------------- step time


def _distinct_experts(sh: Mapping[str, float], tokens: float) -> float:
    e, k = sh["experts"], sh["k"]
    return e * (1.0 - (1.0 - k / e) ** max(0.0, tokens))


def _expert_bytes_per_gpu(sh: Mapping[str, float], hw: Mapping[str, float], tokens: float) -> float:
    distinct = _distinct_experts(sh, tokens)
    tp, ep = hw["tp"], hw["ep"]
    if ep <= 1:
        per_gpu_experts = distinct / tp
    else:
        m = distinct / ep
        busiest = min(sh["experts"] / ep, m + calibration()["ep_imbalance_c"] * math.sqrt(m))
        per_gpu_experts = busiest / (tp / ep)
    return per_gpu_experts * sh["expert_bytes_layer"] * sh["moe_layers"]


def _comm_s(sh: Mapping[str, float], hw: Mapping[str, float], tokens: float) -> float:
    msg = tokens * sh["h"] * 2.0
    tp, ep = int(hw["tp"]), int(hw["ep"])
    attn = sh["layers"] * allreduce_s(hw, msg, tp)
    if ep <= 1:
        mlp = sh["layers"] * allreduce_s(hw, msg, tp)
    else:
        inner = allreduce_s(hw, msg, tp // ep)
        payload = tokens * sh["k"] * sh["h"] * 2.0 / ep
        mlp = sh["dense_layers"] * allreduce_s(hw, msg, tp) \
            + sh["moe_layers"] * (2 * all_to_all_s(hw, payload, ep) + inner)
    return attn + mlp


def _gpu_s(mem_bytes: float, flops: float, hw: Mapping[str, float], eff_c: float) -> float:
    cal = calibration()
    mem = mem_bytes / (hw["bw"] * cal["mem_efficiency"])
    comp = flops / (hw["flops"] * eff_c)
    return max(mem, comp) + cal["overlap_penalty"] * min(mem, comp)


def step_breakdown(hardware: Mapping[str, Any], model: Mapping[str, Any], spec: Mapping[str, Any], *,
                   batch: int, context_sum: float, disable_cuda_graph: bool = False) -> dict[str, float]:
    """Milliseconds of one batched decode/verify step, by component.

    ``context_sum`` is the sum of the running requests' current lengths.
    """
    cal = calibration()
    sh, hw = shape(model), _hw(hardware)
    fam = family(spec)
    width = verify_width(spec)
    tokens = float(batch * width)
    tp = hw["tp"]
    layer_us = cal["layer_overhead_eager_us"] if disable_cuda_graph else cal["layer_overhead_us"]
    mem = sh["dense_bytes"] / tp + _expert_bytes_per_gpu(sh, hw, tokens) \
        + context_sum * sh["kv_bytes_token"]
    flops = (tokens * 2.0 * sh["active_params"] + width * context_sum * sh["attn_flops_per_key"]) / tp
    out = {
        "gpu": _gpu_s(mem, flops, hw, cal["compute_efficiency"]) * 1e3,
        "comm": _comm_s(sh, hw, tokens) * 1e3,
        "kernels": sh["layers"] * layer_us * 1e-3,
        "fixed": cal["step_overhead_ms"],
        "draft": 0.0, "tree": 0.0, "spec": 0.0,
    }
    if fam != "none":
        verify_us = cal["verify_layer_overhead_eager_us"] if disable_cuda_graph else cal["verify_layer_overhead_us"]
        out["spec"] = cal["spec_step_overhead_ms"][fam] + cal["verify_token_overhead_us"] * tokens * 1e-3 \
            + sh["layers"] * verify_us * 1e-3
        out["draft"] = _draft_ms(sh, hw, spec, batch, context_sum, layer_us)
    if fam in TREE_FAMILIES:
        budget = int(spec.get("budget") or 8)
        out["tree"] = (cal["tree_build_base_us"] + cal["tree_build_per_node_us"] * budget) \
            * (1.0 + cal["tree_batch_scale"] * (batch - 1)) * 1e-3
    out["total"] = sum(out.values())
    return out


def _draft_ms(sh: Mapping[str, float], hw: Mapping[str, float], spec: Mapping[str, Any],
              batch: int, context_sum: float, layer_us: float) -> float:
    cal = calibration()
    tp = hw["tp"]
    if family(spec) in BLOCK_FAMILIES:
        layers = sh["draft_layers"]
        positions = float(spec.get("block") or sh["draft_block"])
        window = float(spec.get("window") or 1e12)
        mean_ctx = context_sum / max(1, batch)
        kv = batch * min(mean_ctx, window) * cal["draft_kv_bytes_per_token_layer"] * layers / tp
        forwards = 1.0
    else:  # EAGLE-style: num_steps sequential one-layer forwards of topk tokens
        layers = float(cal["eagle_layers_per_step"])
        positions = float(spec.get("topk") or 1)
        kv = context_sum * cal["draft_kv_bytes_per_token_layer"] * layers / tp
        forwards = float(spec.get("num_steps") or 3)
    tokens = batch * positions
    mem = (layers * sh["draft_layer_params"] * 2.0 + sh["head_bytes"]) / tp + kv
    flops = tokens * 2.0 * (layers * sh["draft_layer_params"] + sh["head_bytes"] / 2.0) / tp
    gpu = _gpu_s(mem, flops, hw, cal["compute_efficiency"])
    comm = 2 * layers * allreduce_s(hw, tokens * sh["h"] * 2.0, int(tp))
    return forwards * ((gpu + comm) * 1e3 + layers * layer_us * 1e-3)


def prefill_ms(hardware: Mapping[str, Any], model: Mapping[str, Any], spec: Mapping[str, Any], *,
               new_tokens: int, context_sum: float = 0.0, disable_cuda_graph: bool = False) -> float:
    """Milliseconds of one prefill batch of ``new_tokens`` prompt tokens.

    ``context_sum`` here is sum over the batch of prompt_len^2 / 2 (causal
    attention keys visited); the drafter prefills too when speculating.
    """
    cal = calibration()
    sh, hw = shape(model), _hw(hardware)
    tp = hw["tp"]
    mem = sh["dense_bytes"] / tp + _expert_bytes_per_gpu(sh, hw, new_tokens)
    flops = (new_tokens * 2.0 * sh["active_params"] + context_sum * sh["attn_flops_per_key"]) / tp
    gpu = _gpu_s(mem, flops, hw, cal["prefill_compute_efficiency"])
    if family(spec) in BLOCK_FAMILIES:
        gpu *= 1.0 + sh["draft_layers"] / sh["layers"]
    layer_us = cal["layer_overhead_eager_us"]  # prefill is not graph-captured
    return (gpu + _comm_s(sh, hw, new_tokens)) * 1e3 + sh["layers"] * layer_us * 1e-3 + cal["step_overhead_ms"]


# --------------------------------------------------------------------------- memory


def kv_capacity_tokens(hardware: Mapping[str, Any], model: Mapping[str, Any],
                       mem_fraction: float | None = None) -> int:
    """KV-cache tokens that fit once the weights are loaded (0 = weights don't fit)."""
    sh, hw = shape(model), _hw(hardware)
    frac = mem_fraction or calibration()["default_mem_fraction"]
    per_gpu_budget = hw["mem_gb"] * 1e9 * frac
    weights_per_gpu = sh["weights_gb"] * 1e9 / hw["tp"]
    free = per_gpu_budget - weights_per_gpu
    if free <= 0:
        return 0
    return int(free / sh["kv_bytes_token"])  # MLA latent KV is replicated across TP ranks


# --------------------------------------------------------------------------- public API


def startup_failure(hardware: Mapping[str, Any], model: Mapping[str, Any], spec: Mapping[str, Any],
                    server_flags: Mapping[str, Any]) -> str | None:
    """The failure a real server would hit at startup for this setup, or None.

    ``server_flags`` keys: disable_cuda_graph, skip_server_warmup,
    mem_fraction_static (flag spellings with dashes are accepted too).
    Returns a reason key: ``cuda_graph`` (sm_103: a draft tree above
    quirks.cuda_graph_max_budget crashes at CUDA-graph capture unless
    --disable-cuda-graph), ``oom`` (weights + minimal KV don't fit), or
    ``missing_module`` (vision tower warmup imports flash_attn.cute unless
    --skip-server-warmup).
    """
    server_flags = {str(k).lstrip("-").replace("-", "_"): v for k, v in server_flags.items()}
    if kv_capacity_tokens(hardware, model, server_flags.get("mem_fraction_static")) < 4096:
        return "oom"  # loading the weights fails first
    quirks = hardware.get("quirks") or {}
    max_budget = quirks.get("cuda_graph_max_budget")
    no_graph = bool(server_flags.get("disable_cuda_graph"))
    if max_budget is not None and not no_graph and family(spec) != "none":
        if int(spec.get("budget") or 0) > int(max_budget):
            return "cuda_graph"  # then graph capture
    if shape(model)["vision"] and not server_flags.get("skip_server_warmup"):
        return "missing_module"
    return None


def estimate(hardware: Mapping[str, Any], model: Mapping[str, Any], spec: Mapping[str, Any], *,
             context: int, concurrency: int, max_tokens: int,
             disable_cuda_graph: bool = False) -> dict[str, float]:
    """Steady-state figures for one cell: C requests of ``context`` prompt tokens, ``max_tokens`` out.

    The first token comes from prefill; the rest from verify steps at the
    mean accept length, with the context at its mid-generation length.
    """
    c = max(1, int(concurrency))
    # KV capacity bounds how many run at once; the rest queue (waves).
    kv = kv_capacity_tokens(hardware, model)
    running = max(1, min(c, kv // max(1, context + max_tokens))) if kv > 0 else 1
    mid_ctx = context + max_tokens / 2.0
    accept = accept_length(spec, int(mid_ctx))
    step = step_breakdown(hardware, model, spec, batch=running, context_sum=running * mid_ctx,
                          disable_cuda_graph=disable_cuda_graph or running > CUDA_GRAPH_MAX_BS)
    prefill = prefill_ms(hardware, model, spec, new_tokens=running * context,
                         context_sum=running * context * context / 2.0, disable_cuda_graph=disable_cuda_graph)
    steps = math.ceil(max(0, max_tokens - 1) / accept)
    e2e = prefill + steps * step["total"]
    tok_s = running * max_tokens / e2e * 1e3 if e2e > 0 else 0.0
    width = verify_width(spec)
    return {
        "tok_s": tok_s, "per_stream_tok_s": tok_s / c, "accept_len": accept, "running": float(running),
        "accept_rate": (accept - 1.0) / max(1, width - 1) if width > 1 else 0.0,
        "step_ms": step["total"], "ttft_ms": prefill, "tpot_ms": step["total"] / accept,
        "e2e_ms": e2e, "verify_width": float(width), "steps": float(steps),
        **{f"step_{k}_ms": v for k, v in step.items() if k != "total"},
    }
