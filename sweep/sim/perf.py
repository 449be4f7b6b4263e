"""The simulator's performance model: the time of one decode/verify step and of a prefill.

Pure functions of public figures (hardware and model configs) and the box's
constants (``constants.for_hardware``: a calibration, or the priors). The sim
server asks it how long each batched step takes; :mod:`sweep.sim.cells` turns
steps into a benchmark cell's figures; :mod:`sweep.sim.predict` is the
what-if API. One step of B requests verifying W tokens each (T = B*W), per GPU:

    weights = dense/tp / (BW*dense_eff) + distinct experts' INT4 bytes / (BW*moe_eff)
    kv      = sum(context) * MLA latent bytes / (BW*kv_eff)          (x tree-mask penalty)
    compute = (T * 2 * active params + W * sum(context) * attention flops) / tp / (TFLOPS*compute_eff)
    gpu     = max(weights + kv, compute) + overlap * min(...)
    comm    = TP: 2 AllReduce per layer | EP: attention AllReduce + dispatch/combine all-to-all
    step    = gpu + comm + layers*layer_overhead + step_overhead + B*request + T*token
              + spec overhead + drafter forward + tree construction

Distinct experts per MoE layer grow with T until every expert is read:
E * (1 - (1 - k/E)^T). Equations and the reasons for each term: docs/simulator.md.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

from sweep.sim import constants
from sweep.sim.accept import (  # noqa: F401 - re-exported: perf is the public API
    Shape,
    draw_accepted,
    family,
    mean_accept,
    p_scale,
    shape_of,
    survival,
    verify_width,
)
from sweep.sim.constants import Calibration

CUDA_GRAPH_MAX_BS = 256  # SGLang's default graph batch-size ceiling on large GPUs
BLOCK_FAMILIES = ("dflash", "ddtree")


# --------------------------------------------------------------------------- model x hardware


@dataclass(frozen=True, slots=True)
class Box:
    """Public figures of one model on one hardware layout (per whole model; per GPU where named)."""

    h: float
    layers: int
    moe_layers: int
    dense_layers: int
    experts: float
    k: float
    expert_bytes_layer: float
    dense_bytes: float
    head_bytes: float
    active_params: float
    attn_flops_per_key: float
    prefill_attn_flops_per_key: float
    kv_bytes_token: float
    weights_gb: float
    draft_layers: float
    draft_layer_params: float
    draft_block: int
    vision: bool
    tp: int
    ep: int
    bw: float
    flops: float
    link_bw: float
    alpha: float
    nvlink: bool
    mem_gb: float


def _arch(model: Mapping[str, Any]) -> Mapping[str, Any]:
    return model.get("arch", model) or {}


@lru_cache(maxsize=64)
def _shape(arch_json: str) -> dict[str, Any]:
    """Parameter and byte counts of the target model (whole model, not per GPU)."""
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
    experts = float(a.get("routed_experts", 384))
    dense_params = layers * attn + moe_layers * shared + dense_layers * dense_mlp + head
    draft = a.get("draft") or {}
    return {
        "h": h, "layers": layers, "moe_layers": moe_layers, "dense_layers": dense_layers,
        "experts": experts, "k": k,
        "expert_bytes_layer": expert * e_bytes,
        "dense_bytes": dense_params * d_bytes,
        "head_bytes": head * d_bytes,
        "active_params": dense_params + moe_layers * k * expert,
        # decode/verify: MLA absorbed into the latent (q.k over kv_lora + rope, p.v over kv_lora)
        "attn_flops_per_key": layers * heads * (kv_lora + rope + kv_lora) * 2.0,
        # prefill: MLA as plain multi-head attention (q.k over nope + rope, p.v over v_head_dim)
        "prefill_attn_flops_per_key": layers * heads * (nope + rope + v_dim) * 2.0,
        "kv_bytes_token": layers * (kv_lora + rope) * kv_bytes,
        "weights_gb": float(a.get("weights_gb", (dense_params * d_bytes + moe_layers * experts * expert * e_bytes)
                                  / 1e9)),
        "draft_layers": float(draft.get("layers", 5)),
        "draft_layer_params": 4.0 * h * h + dense_mlp,
        "draft_block": int(draft.get("block_size", 8)),
        "vision": bool(a.get("vision_tower", False)),
    }


def shape(model: Mapping[str, Any]) -> dict[str, Any]:
    """Model figures derived from ``model["arch"]`` (cached per distinct arch)."""
    return _shape(json.dumps(_arch(model), sort_keys=True, default=str))


@lru_cache(maxsize=128)
def _box(key: str) -> Box:
    hardware, arch = json.loads(key)
    sh = _shape(json.dumps(arch, sort_keys=True, default=str))
    perf = hardware.get("perf") or {}
    n = int(hardware.get("num_gpus") or 8)
    return Box(**sh, tp=max(1, int(hardware.get("tp") or n)), ep=max(1, int(hardware.get("ep") or 1)),
               bw=float(perf.get("mem_bw_tbs", 8.0)) * 1e12, flops=float(perf.get("fp8_tflops", 2000)) * 1e12,
               link_bw=float(perf.get("link_bw_gbs", 900)) * 1e9,
               alpha=float(perf.get("link_latency_us", 3.0)) * 1e-6, nvlink=bool(perf.get("nvlink", True)),
               mem_gb=float(hardware.get("memory_gb") or 80))


def box_of(hardware: Mapping[str, Any], model: Mapping[str, Any]) -> Box:
    """The figures of this model on this hardware (cached)."""
    hw = {k: hardware.get(k) for k in ("num_gpus", "tp", "ep", "memory_gb")}
    hw["perf"] = {k: v for k, v in (hardware.get("perf") or {}).items() if k != "calibration"}
    return _box(json.dumps([hw, _arch(model)], sort_keys=True, default=str))


# --------------------------------------------------------------------------- collectives


def allreduce_s(b: Box, c: Mapping[str, float], nbytes: float, n: int) -> float:
    """One AllReduce of ``nbytes`` over ``n`` GPUs (seconds).

    NVLink (NVSwitch): one-shot custom AllReduce, two link latencies plus the
    payload from n-1 peers. PCIe without NVLink: NCCL ring, 2(n-1) dependent
    hops each paying the link latency (latency-bound for decode-sized messages).
    """
    if n <= 1:
        return 0.0
    alpha, bw = b.alpha * c["link_latency_factor"], b.link_bw * c["link_bw_eff"]
    if b.nvlink:
        return 2 * alpha + (n - 1) * nbytes / n / bw
    return 2 * (n - 1) * (alpha + nbytes / n / bw)


def all_to_all_s(b: Box, c: Mapping[str, float], nbytes_per_gpu: float, n: int) -> float:
    """One all-to-all (dispatch or combine): one latency, (n-1)/n of the payload."""
    if n <= 1:
        return 0.0
    return b.alpha * c["link_latency_factor"] + c["a2a_overhead_us"] * 1e-6 \
        + nbytes_per_gpu * (n - 1) / n / (b.link_bw * c["link_bw_eff"])


def _comm_s(b: Box, c: Mapping[str, float], tokens: float) -> float:
    """Collectives of one target forward over ``tokens`` tokens."""
    msg = tokens * b.h * 2.0
    attn = b.layers * allreduce_s(b, c, msg, b.tp)
    if b.ep <= 1:
        return attn + b.layers * allreduce_s(b, c, msg, b.tp)
    payload = tokens * b.k * b.h * 2.0 / b.ep
    return attn + b.dense_layers * allreduce_s(b, c, msg, b.tp) \
        + b.moe_layers * (2 * all_to_all_s(b, c, payload, b.ep) + allreduce_s(b, c, msg, b.tp // b.ep))


# --------------------------------------------------------------------------- GPU time


def distinct_experts(b: Box, tokens: float) -> float:
    """Expected routed experts one MoE layer touches for ``tokens`` tokens (k of E each)."""
    return b.experts * (1.0 - (1.0 - b.k / b.experts) ** max(0.0, tokens))


def _expert_bytes_per_gpu(b: Box, c: Mapping[str, float], tokens: float) -> float:
    distinct = distinct_experts(b, tokens)
    if b.ep <= 1:
        per_gpu = distinct / b.tp
    else:
        m = distinct / b.ep
        per_gpu = min(b.experts / b.ep, m + c["ep_imbalance_c"] * math.sqrt(m)) / (b.tp / b.ep)
    return per_gpu * b.expert_bytes_layer * b.moe_layers


def _roofline(mem_s: float, comp_s: float, c: Mapping[str, float]) -> float:
    return max(mem_s, comp_s) + c["overlap_penalty"] * min(mem_s, comp_s)


def _gpu_s(b: Box, c: Mapping[str, float], tokens: float, width: float, context_sum: float,
           tree: bool, compute_eff: float) -> float:
    mask = c["tree_mask_penalty"] if tree else 1.0
    mem = b.dense_bytes / b.tp / (b.bw * c["dense_mem_eff"]) \
        + _expert_bytes_per_gpu(b, c, tokens) / (b.bw * c["moe_mem_eff"]) \
        + context_sum * b.kv_bytes_token * mask / (b.bw * c["kv_mem_eff"])
    flops = (tokens * 2.0 * b.active_params + width * context_sum * b.attn_flops_per_key * mask) / b.tp
    return _roofline(mem, flops / (b.flops * compute_eff), c)


def _draft_ms(b: Box, c: Mapping[str, float], s: Shape, batch: int, context_sum: float,
              layer_us: float) -> float:
    """One drafter pass: DFlash/DDTree one forward over its block, EAGLE num_steps small forwards."""
    if s.fam in BLOCK_FAMILIES:
        layers = b.draft_layers
        seen = min(context_sum / max(1, batch), float(s.window or 1e12))  # the window bounds its KV reads
        kv = batch * seen * c["draft_kv_bytes_per_token_layer"] * layers / b.tp
    else:  # EAGLE-style: one layer per step over topk tokens
        layers = c["eagle_layers_per_step"]
        kv = context_sum * c["draft_kv_bytes_per_token_layer"] * layers / b.tp
    tokens = batch * s.positions
    mem = (layers * b.draft_layer_params * 2.0 + b.head_bytes) / b.tp / (b.bw * c["dense_mem_eff"]) \
        + kv / (b.bw * c["kv_mem_eff"])
    flops = tokens * 2.0 * (layers * b.draft_layer_params + b.head_bytes / 2.0) / b.tp
    gpu = _roofline(mem, flops / (b.flops * c["compute_eff"]), c)
    comm = 2 * layers * allreduce_s(b, c, tokens * b.h * 2.0, b.tp)
    return s.forwards * ((gpu + comm) * 1e3 + layers * layer_us * 1e-3)


def step_ms(b: Box, c: Mapping[str, float], s: Shape, batch: int, context_sum: float,
            eager: bool = False) -> dict[str, float]:
    """Milliseconds of one batched decode/verify step, by component (``total`` = their sum)."""
    width = s.width
    tokens = float(batch * width)
    layer_us = c["layer_overhead_us"] * (c["eager_factor"] if eager else 1.0)
    out = {
        "gpu": _gpu_s(b, c, tokens, width, context_sum, s.tree, c["compute_eff"]) * 1e3,
        "comm": _comm_s(b, c, tokens) * 1e3,
        "kernels": b.layers * layer_us * 1e-3,
        "fixed": c["step_overhead_ms"],
        "batch": (batch * c["request_overhead_us"] + tokens * c["token_overhead_us"]) * 1e-3,
        "spec": 0.0, "draft": 0.0, "tree": 0.0,
    }
    if s.fam != "none":
        out["spec"] = c["spec_overhead_ms"]
        out["draft"] = _draft_ms(b, c, s, batch, context_sum, layer_us)
    if s.fam == "ddtree":
        out["tree"] = c["tree_node_us"] * s.nodes * (1.0 + c["tree_batch_scale"] * (batch - 1)) * 1e-3
    out["total"] = sum(out.values())
    return out


def prefill_ms_box(b: Box, c: Mapping[str, float], s: Shape, new_tokens: float, quad: float) -> float:
    """Milliseconds to prefill ``new_tokens`` prompt tokens (``quad`` = sum of prompt_len^2/2).

    Chunked as SGLang does (--chunked-prefill-size): each chunk streams the
    weights again; attention over the causal triangle; eager launches; the
    drafter prefills alongside when speculating.
    """
    if new_tokens <= 0:
        return 0.0
    chunks = max(1, math.ceil(new_tokens / c["chunked_prefill_tokens"]))
    per = new_tokens / chunks
    mem = b.dense_bytes / b.tp / (b.bw * c["dense_mem_eff"]) \
        + _expert_bytes_per_gpu(b, c, per) / (b.bw * c["moe_mem_eff"])
    flops = (per * 2.0 * b.active_params + quad / chunks * b.prefill_attn_flops_per_key) / b.tp
    gpu = _roofline(mem, flops / (b.flops * c["prefill_compute_eff"]), c)
    if s.fam in BLOCK_FAMILIES:
        gpu *= 1.0 + b.draft_layers / b.layers
    layer_us = c["layer_overhead_us"] * c["eager_factor"]  # prefill is not graph-captured
    one = (gpu + _comm_s(b, c, per)) * 1e3 + b.layers * layer_us * 1e-3 + c["step_overhead_ms"]
    return chunks * one


def kv_capacity(b: Box, c: Mapping[str, float], mem_fraction: float | None = None) -> int:
    """KV-cache tokens that fit once the weights are loaded (0 = weights don't fit)."""
    frac = mem_fraction or c["default_mem_fraction"]
    free = b.mem_gb * 1e9 * frac - b.weights_gb * 1e9 / b.tp
    return int(free / b.kv_bytes_token) if free > 0 else 0  # MLA latent KV is replicated across TP ranks


# --------------------------------------------------------------------------- mapping-level API


def calibration(hardware: Mapping[str, Any] | None = None) -> Calibration:
    """The constants this hardware runs with (its calibration, or the priors)."""
    return constants.for_hardware(hardware) if hardware is not None else constants.uncalibrated()


def step_breakdown(hardware: Mapping[str, Any], model: Mapping[str, Any], spec: Mapping[str, Any], *,
                   batch: int, context_sum: float, disable_cuda_graph: bool = False,
                   cal: Calibration | None = None) -> dict[str, float]:
    """Milliseconds of one batched decode/verify step, by component.

    ``context_sum`` is the sum of the running requests' current lengths.
    """
    return step_ms(box_of(hardware, model), (cal or calibration(hardware)).values, shape_of(spec), batch,
                   context_sum, disable_cuda_graph)


def prefill_ms(hardware: Mapping[str, Any], model: Mapping[str, Any], spec: Mapping[str, Any], *,
               new_tokens: int, context_sum: float = 0.0, disable_cuda_graph: bool = False,
               cal: Calibration | None = None) -> float:
    """Milliseconds of one prefill batch of ``new_tokens`` prompt tokens.

    ``context_sum`` here is sum over the batch of prompt_len^2 / 2 (causal
    attention keys visited).
    """
    return prefill_ms_box(box_of(hardware, model), (cal or calibration(hardware)).values, shape_of(spec),
                          new_tokens, context_sum)


def kv_capacity_tokens(hardware: Mapping[str, Any], model: Mapping[str, Any],
                       mem_fraction: float | None = None, cal: Calibration | None = None) -> int:
    """KV-cache tokens that fit once the weights are loaded (0 = weights don't fit)."""
    return kv_capacity(box_of(hardware, model), (cal or calibration(hardware)).values, mem_fraction)


def accept_length(spec: Mapping[str, Any], context: int = 60, *, max_tokens: int = 512,
                  hardware: Mapping[str, Any] | None = None, cal: Calibration | None = None) -> float:
    """Mean tokens per verify step over a ``max_tokens`` answer (bonus included); 1.0 without spec."""
    return mean_accept(spec, (cal or calibration(hardware)).values, context, max_tokens)


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
    cal = constants.uncalibrated(hardware)  # memory figures only: no calibration needed
    if kv_capacity_tokens(hardware, model, server_flags.get("mem_fraction_static"), cal) < 4096:
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
