"""The simulator's performance model: the time of one decode/verify step and of a prefill.

Pure functions of public figures (hardware and model configs: :mod:`sweep.sim.arch`)
and the box's constants (``constants.for_hardware``: a calibration, or the
priors). The sim server asks it how long each batched step takes;
:mod:`sweep.sim.cells` turns steps into a benchmark cell's figures;
:mod:`sweep.sim.predict` is the what-if API. One step of B requests (one
replica) verifying W tokens each (T = B*W), per GPU (or per CPU box):

    weights = dense/tp / (BW*dense_eff) + distinct experts' bytes / (BW*moe_eff)
    kv      = sum(context) * KV bytes/token / (BW*kv_eff)               (x tree-mask penalty)
    compute = dense GEMMs + expert GEMMs (rows padded to the kernel's tile, the busiest
              EP group) + W * sum(context) * attention flops, / (FLOPS*compute_eff)
    gpu     = max(weights + kv, compute) + overlap * min(...)           memory- or compute-bound
    comm    = the layout's collectives (sweep/sim/comm.py)
    step    = gpu + comm + layers*layer_overhead + step_overhead + B*request + T*token
              + spec overhead + drafter + tree construction

Distinct experts per MoE layer grow with T until every expert is read:
E * (1 - (1 - k/E)^T). Equations and the reasons for each term: docs/simulator.md.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any, Mapping

from sweep.sim import constants
from sweep.sim.accept import (  # noqa: F401 - re-exported: perf is the public API
    Shape,
    draw_accepted,
    family,
    mean_accept,
    mean_width,
    p_scale,
    shape_of,
    survival,
    verify_width,
)
from sweep.sim.arch import Box, box_of, shape  # noqa: F401 - re-exported
from sweep.sim.comm import allreduce_s, all_gather_s, all_to_all_s, forward_comm  # noqa: F401
from sweep.sim.constants import Calibration

CUDA_GRAPH_MAX_BS = 256  # SGLang's default graph batch-size ceiling on large GPUs
BLOCK_FAMILIES = ("dflash", "ddtree")
# The parts of a step that add up to its time (the rest of step_ms's keys explain them).
ADDITIVE = ("gpu", "comm", "kernels", "fixed", "batch", "spec", "draft", "tree")


# --------------------------------------------------------------------------- GPU time


def distinct_experts(b: Box, tokens: float) -> float:
    """Expected routed experts one MoE layer touches for ``tokens`` tokens (k of E each)."""
    if not b.moe:
        return 0.0
    return b.experts * (1.0 - (1.0 - b.k / b.experts) ** max(0.0, tokens))


def _expert_bytes_per_gpu(b: Box, c: Mapping[str, float], tokens: float) -> float:
    if not b.moe:
        return 0.0
    distinct = distinct_experts(b, tokens)
    if b.ep <= 1:
        per_gpu = distinct / b.tp
    else:
        m = distinct / b.ep
        per_gpu = min(b.experts / b.ep, m + c["ep_imbalance_c"] * math.sqrt(m)) / (b.tp / b.ep)
    return per_gpu * b.expert_bytes_layer * b.moe_layers


def _expected_max_z(n: int) -> float:
    return 0.0 if n <= 1 else NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def expert_rows_per_gpu(b: Box, c: Mapping[str, float], tokens: float) -> float:
    """Expert GEMM rows the busiest GPU computes per MoE layer.

    Each active expert's tokens are padded to the kernel's row tile (fused-MoE
    kernels align every expert's rows to their block size), so a few tokens
    per expert cost a whole tile; under EP the busiest group sets the pace:
    its routed rows exceed the mean by the expected maximum of ep groups'
    loads (Poisson routing plus the experts' popularity skew).
    """
    if not b.moe or tokens <= 0:
        return 0.0
    rows = tokens * b.k
    active = distinct_experts(b, tokens)
    tile = c["gemm_tile_rows"]
    padded = max(active * tile, rows + active * tile / 2.0)
    if b.ep <= 1:
        return padded / b.tp
    mean = rows / b.ep
    cv = math.sqrt(1.0 / max(mean, 1e-9) + c["expert_skew_cv"] ** 2 * b.ep / b.experts)
    busiest = padded / b.ep * (1.0 + _expected_max_z(b.ep) * cv)
    return busiest / (b.tp / b.ep)


def _roofline(mem_s: float, comp_s: float, c: Mapping[str, float]) -> float:
    return max(mem_s, comp_s) + c["overlap_penalty"] * min(mem_s, comp_s)


def group_share(b: Box, tokens: float, width: float) -> float:
    """The busiest attention group's share of the step's requests (1 without DP attention)."""
    if b.attn_dp <= 1 or tokens <= 0:
        return 1.0
    batch = max(1.0, round(tokens / max(width, 1e-9)))
    return math.ceil(batch / b.attn_dp) / batch


def verify_parts(b: Box, c: Mapping[str, float], tokens: float, width: float, context_sum: float,
                 tree: bool, compute_eff: float) -> dict[str, float]:
    """Seconds of one forward's GPU work, by part: memory (weights, kv) and compute (gemm, attn).

    With DP attention the busiest attention group sets the pace: its requests'
    KV and attention over attn_tp GPUs that each hold all attention weights of
    that group; everything after attention (experts, shared expert, dense
    layers, lm_head) runs over all tp GPUs on every group's tokens."""
    mask = c["tree_mask_penalty"] if tree else 1.0
    share = group_share(b, tokens, width)
    kv_share = 1.0 if b.kv_replicated else 1.0 / b.attn_tp
    weights = ((b.dense_bytes - b.attn_bytes) / b.tp + b.attn_bytes / b.attn_tp) / (b.bw * c["dense_mem_eff"]) \
        + _expert_bytes_per_gpu(b, c, tokens) / (b.bw * c["moe_mem_eff"])
    kv = context_sum * share * b.kv_bytes_token * kv_share * mask / (b.bw * c["kv_mem_eff"])
    other_params = b.active_params - b.moe_layers * b.k * b.expert_params - b.attn_params
    gemm = (tokens * 2.0 * other_params / b.tp + tokens * share * 2.0 * b.attn_params / b.attn_tp
            + expert_rows_per_gpu(b, c, tokens) * 2.0 * b.expert_params * b.moe_layers)
    attn = width * context_sum * share * b.attn_flops_per_key * mask / b.attn_tp
    rate = b.flops * compute_eff
    out = {"weights": weights, "kv": kv, "gemm": gemm / rate, "attn": attn / rate}
    out["gpu"] = _roofline(weights + kv, out["gemm"] + out["attn"], c)
    return out


def _gpu_s(b: Box, c: Mapping[str, float], tokens: float, width: float, context_sum: float,
           tree: bool, compute_eff: float) -> float:
    return verify_parts(b, c, tokens, width, context_sum, tree, compute_eff)["gpu"]


def _comm_s(b: Box, c: Mapping[str, float], tokens: float) -> float:
    return sum(forward_comm(b, c, tokens).values())


def _draft_ms(b: Box, c: Mapping[str, float], s: Shape, batch: int, context_sum: float,
              layer_us: float) -> float:
    """One step's drafting: DFlash/DDTree one forward over its block, EAGLE num_steps small
    forwards, a draft model one forward per drafted token; n-gram lookup is in spec_overhead."""
    if s.fam in ("ngram", "synth"):
        return 0.0
    if s.fam == "draft":  # a separate draft model, one token per forward, batched over requests
        forwards = draft_forwards(s, c)
        scale = s.draft_size  # the draft model's size relative to the target (1 = drafts for itself)
        tokens = float(batch)
        mem = b.dense_bytes * scale / b.tp / (b.bw * c["dense_mem_eff"]) \
            + context_sum * b.kv_bytes_token * scale / b.tp / (b.bw * c["kv_mem_eff"])
        flops = tokens * 2.0 * b.active_params * scale / b.tp
        gpu = _roofline(mem, flops / (b.flops * c["compute_eff"]), c)
        one = (gpu + _comm_s(b, c, tokens) * scale) * 1e3 + b.layers * scale * layer_us * 1e-3 \
            + tokens * c["token_overhead_us"] * 1e-3
        return forwards * one
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
    comm = 2 * layers * allreduce_s(b, c, tokens * b.h * 2.0, b.tp) \
        + all_gather_s(b, c, tokens * b.vocab * 2.0, b.tp)  # its logits, vocab-parallel like the target's
    step = c["draft_step_overhead_ms"] if s.fam not in BLOCK_FAMILIES else 0.0  # a head's loop, per forward
    return s.forwards * ((gpu + comm) * 1e3 + layers * layer_us * 1e-3 + step)


def draft_forwards(s: Shape, c: Mapping[str, float]) -> float:
    """Draft-model forwards per step: one per drafted token, plus the one that stops short of budget."""
    from sweep.sim.accept import chain_params

    _, cont, _ = chain_params(s, c)
    # forwards = 1 + sum_{j=1}^{n-1} P(the draft reached j tokens): P = cont^j (h = 1 for a model)
    return 1.0 + sum(cont ** j for j in range(1, max(1, s.budget)))


def step_ms(b: Box, c: Mapping[str, float], s: Shape, batch: int, context_sum: float,
            eager: bool = False) -> dict[str, float]:
    """Milliseconds of one batched decode/verify step, by component.

    ``total`` is the sum of the :data:`ADDITIVE` parts; the other keys explain
    them: ``weights_ms``/``kv_ms`` (memory), ``gemm_ms``/``attn_ms`` (compute),
    ``bound`` (1 = compute-bound, 0 = memory-bound), ``comm_allreduce`` /
    ``comm_all_to_all`` / ``comm_logits``, ``width`` (mean tokens verified per request).
    """
    width = mean_width(s, c)
    tokens = float(batch * width)
    layer_us = c["layer_overhead_us"] * (c["eager_factor"] if eager else 1.0)
    parts = verify_parts(b, c, tokens, width, context_sum, s.tree, c["compute_eff"])
    comm = forward_comm(b, c, tokens, group_share(b, tokens, width))
    out = {
        "gpu": parts["gpu"] * 1e3,
        "comm": sum(comm.values()) * 1e3,
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
    out["total"] = sum(out[k] for k in ADDITIVE)
    out.update({f"{k}_ms": v * 1e3 for k, v in parts.items() if k != "gpu"})
    out.update({f"comm_{k}": v * 1e3 for k, v in comm.items()})
    out["bound"] = 1.0 if parts["gemm"] + parts["attn"] > parts["weights"] + parts["kv"] else 0.0
    out["width"] = width
    return out


def prefill_ms_box(b: Box, c: Mapping[str, float], s: Shape, new_tokens: float, quad: float) -> float:
    """Milliseconds to prefill ``new_tokens`` prompt tokens (``quad`` = sum of prompt_len^2/2).

    Chunked as the engine does (SGLang --chunked-prefill-size, llama.cpp's ubatch):
    each chunk streams the weights again; attention over the causal triangle;
    eager launches; the drafter prefills alongside when speculating.
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
    elif s.fam == "draft":
        gpu *= 1.0 + s.draft_size
    layer_us = c["layer_overhead_us"] * c["eager_factor"]  # prefill is not graph-captured
    one = (gpu + _comm_s(b, c, per)) * 1e3 + b.layers * layer_us * 1e-3 + c["step_overhead_ms"]
    return chunks * one


def kv_capacity(b: Box, c: Mapping[str, float], mem_fraction: float | None = None) -> int:
    """KV-cache tokens that fit once the weights are loaded (0 = weights don't fit)."""
    frac = mem_fraction or c["default_mem_fraction"]
    attn_extra = b.attn_bytes * (1.0 / b.attn_tp - 1.0 / b.tp)  # DP attention: each group holds all of it
    free = b.mem_gb * 1e9 * frac - b.weights_gb * 1e9 / b.tp - attn_extra
    per_token = b.kv_bytes_token * (1.0 if b.kv_replicated else 1.0 / b.attn_tp)
    return int(free / per_token) * b.attn_dp if free > 0 else 0  # every attention group has its own KV


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
