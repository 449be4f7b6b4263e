"""Public figures of one model on one box: parameter and byte counts, layout, link figures.

Two model families, from ``conf/model/*.yaml`` ``arch``:

* **MoE with MLA** (Kimi K2.6: ``routed_experts`` > 0, ``attention: mla``): dense
  part (attention, shared expert, dense layers, lm_head) read every step, routed
  experts read as the step's tokens touch them; the MLA latent KV cache;
* **dense** (SmolLM2-135M: no ``routed_experts``; ``attention: gqa`` or ``mha``):
  every weight read every step; K and V per KV head.

Bytes: ``weights_gb`` (the checkpoint's size) is the truth for quantised formats
(a Q4_1 GGUF is ~5 bits per weight, not 4): a dense model streams all of it per
forward. The box: per-GPU (or per-CPU) memory bandwidth and compute figures
(``perf.mem_bw_tbs``, ``perf.fp8_tflops`` -- or ``perf.matmul_tflops`` on a CPU box,
measured by ``python -m sweep.sim.probe``), the link (``link_bw_gbs``,
``link_latency_us``, ``nvlink``, and on PCIe boxes ``pcie_domains`` /
``domain_link_bw_gbs``: GPUs behind separate switches share the uplinks between
them), the layout (``tp``, ``ep``, ``dp``; ``dp_attention``: the dp groups split the
attention inside the tp GPUs, as SGLang's ``--enable-dp-attention``, instead of
being dp replicas). Never fitted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping


@dataclass(frozen=True, slots=True)
class Box:
    """Public figures of one model on one hardware layout (per whole model; per GPU where named)."""

    h: float
    layers: int
    moe_layers: int
    dense_layers: int
    experts: float
    k: float
    expert_params: float
    expert_bytes_layer: float
    dense_bytes: float
    attn_params: float
    attn_bytes: float         # the attention projections' share of dense_bytes (replicated per DP-attention group)
    head_bytes: float
    vocab: float
    active_params: float
    attn_flops_per_key: float
    prefill_attn_flops_per_key: float
    kv_bytes_token: float
    kv_replicated: bool       # MLA's latent is read in full by every TP rank; GQA's heads split
    weights_gb: float
    draft_layers: float
    draft_layer_params: float
    draft_block: int
    vision: bool
    tp: int
    ep: int
    dp: int
    attn_dp: int              # DP attention: attention groups inside the tp GPUs (1: attention tensor-parallel)
    bw: float
    flops: float
    link_bw: float
    alpha: float
    nvlink: bool
    domains: int
    domain_bw: float
    mem_gb: float
    cpu: bool

    @property
    def moe(self) -> bool:
        return self.moe_layers > 0 and self.experts > 0

    @property
    def replicas(self) -> int:
        """Independent copies of the model (plain DP); with DP attention the dp groups share one."""
        return 1 if self.attn_dp > 1 else self.dp

    @property
    def attn_tp(self) -> int:
        """GPUs one attention group spans."""
        return max(1, self.tp // self.attn_dp)


def _arch(model: Mapping[str, Any]) -> Mapping[str, Any]:
    return model.get("arch", model) or {}


def _mla(a: Mapping[str, Any], h: float, heads: float) -> dict[str, float]:
    q_lora = float(a.get("q_lora_rank", 1536))
    kv_lora = float(a.get("kv_lora_rank", 512))
    rope = float(a.get("qk_rope_head_dim", 64))
    nope = float(a.get("qk_nope_head_dim", 128))
    v_dim = float(a.get("v_head_dim", 128))
    kv_bytes = float(a.get("kv_cache_bits", 16)) / 8.0
    return {
        "attn": h * q_lora + q_lora * heads * (nope + rope) + h * (kv_lora + rope)
        + kv_lora * heads * (nope + v_dim) + heads * v_dim * h,
        # decode/verify: MLA absorbed into the latent (q.k over kv_lora + rope, p.v over kv_lora)
        "flops_key": heads * (kv_lora + rope + kv_lora) * 2.0,
        # prefill: MLA as plain multi-head attention (q.k over nope + rope, p.v over v_head_dim)
        "prefill_flops_key": heads * (nope + rope + v_dim) * 2.0,
        "kv_token_layer": (kv_lora + rope) * kv_bytes,
    }


def _gqa(a: Mapping[str, Any], h: float, heads: float) -> dict[str, float]:
    kv_heads = float(a.get("kv_heads", heads))
    hd = float(a.get("head_dim", h / heads))
    kv_bytes = float(a.get("kv_cache_bits", 16)) / 8.0
    return {
        "attn": h * heads * hd + 2 * h * kv_heads * hd + heads * hd * h,
        "flops_key": heads * hd * 2.0 * 2.0,   # q.k and p.v, 2 flops per multiply-add
        "prefill_flops_key": heads * hd * 2.0 * 2.0,
        "kv_token_layer": 2.0 * kv_heads * hd * kv_bytes,
    }


@lru_cache(maxsize=64)
def _shape(arch_json: str) -> dict[str, Any]:
    """Parameter and byte counts of the target model (whole model, not per GPU)."""
    a = json.loads(arch_json)
    moe = float(a.get("routed_experts", 384 if "hidden_size" not in a else 0) or 0) > 0
    h = float(a.get("hidden_size", 7168))
    layers = int(a.get("layers", 61))
    dense_layers = int(a.get("dense_layers", 1)) if moe else layers
    moe_layers = layers - dense_layers
    heads = float(a.get("heads", 64))
    att = _mla(a, h, heads) if str(a.get("attention", "mla" if moe else "gqa")).lower() == "mla" else _gqa(a, h, heads)
    expert = 3.0 * h * float(a.get("moe_intermediate_size", 2048)) if moe else 0.0
    shared = expert * float(a.get("shared_experts", 1)) if moe else 0.0
    inter = a.get("dense_intermediate_size", a.get("intermediate_size", 18432 if moe else 4 * h))
    dense_mlp = 3.0 * h * float(inter)
    vocab = float(a.get("vocab_size", 163840))
    head = vocab * h
    e_bytes = float(a.get("expert_weight_bits", 4)) / 8.0
    d_bytes = float(a.get("dense_weight_bits", 16)) / 8.0
    k = float(a.get("experts_per_token", 8)) if moe else 0.0
    experts = float(a.get("routed_experts", 384)) if moe else 0.0
    embed = 0.0 if a.get("tie_word_embeddings") else head  # an untied input embedding is looked up, not streamed
    dense_params = layers * att["attn"] + moe_layers * shared + dense_layers * dense_mlp + head
    total_bytes = dense_params * d_bytes + moe_layers * experts * expert * e_bytes + embed * d_bytes
    weights_gb = float(a.get("weights_gb", total_bytes / 1e9))
    dense_bytes = dense_params * d_bytes
    if not moe and a.get("weights_gb"):  # a quantised checkpoint: its size is what a forward streams
        dense_bytes = weights_gb * 1e9 * dense_params / (dense_params + embed)
    draft = a.get("draft") or {}
    return {
        "h": h, "layers": layers, "moe_layers": moe_layers, "dense_layers": dense_layers,
        "experts": experts, "k": k, "expert_params": expert,
        "expert_bytes_layer": expert * e_bytes,
        "dense_bytes": dense_bytes,
        "attn_params": layers * att["attn"],
        "attn_bytes": layers * att["attn"] * d_bytes * (dense_bytes / (dense_params * d_bytes)),
        "head_bytes": head * d_bytes if moe or not a.get("weights_gb") else dense_bytes * head / dense_params,
        "vocab": vocab,
        "active_params": dense_params + moe_layers * k * expert,
        "attn_flops_per_key": layers * att["flops_key"],
        "prefill_attn_flops_per_key": layers * att["prefill_flops_key"],
        "kv_bytes_token": layers * att["kv_token_layer"],
        "kv_replicated": str(a.get("attention", "mla" if moe else "gqa")).lower() == "mla",
        "weights_gb": weights_gb,
        "draft_layers": float(draft.get("layers", 5)),
        # the draft (EAGLE head, MTP module, DFlash layer) per layer: its size where the model card
        # gives it, else one decoder layer at the target's width
        "draft_layer_params": float(draft["layer_params_b"]) * 1e9 if draft.get("layer_params_b")
        else 4.0 * h * h + dense_mlp,
        "draft_block": int(draft.get("block_size", 8)),
        "vision": bool(a.get("vision_tower", False)),
    }


def shape(model: Mapping[str, Any]) -> dict[str, Any]:
    """Model figures derived from ``model["arch"]`` (cached per distinct arch)."""
    return _shape(json.dumps(_arch(model), sort_keys=True, default=str))


DTYPE_BITS = {"bfloat16": 16, "float16": 16, "half": 16, "float32": 32, "float": 32}


def as_served(model: Mapping[str, Any], server: Mapping[str, Any] | None,
              hardware: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    """The model in the form this engine runs it: a GGUF model that an engine loads as a Hugging
    Face folder (vLLM on a CPU) streams that folder's weights -- in the dtype the engine computes in,
    ``hardware.cpu.dtype`` (what conf/server/vllm.yaml renders as --dtype: float32 doubles the
    bytes of the bfloat16 folder), else the folder's own (``model.install.hf.dtype``) --, not the GGUF's."""
    fmt = str((server or {}).get("model_format") or "")
    dtype = (((model.get("install") or {}).get(fmt) or {}) if fmt else {}).get("dtype")
    served = ((hardware or {}).get("cpu") or {}).get("dtype")
    if served in DTYPE_BITS:  # "auto" or unset: the checkpoint's dtype
        dtype = served
    arch = model.get("arch") or {}
    if fmt != "hf" or dtype not in DTYPE_BITS or not arch:
        return model
    bits = DTYPE_BITS[str(dtype)]
    served_arch = {k: v for k, v in arch.items() if k != "weights_gb"}
    served_arch.update({"dense_weight_bits": bits, "kv_cache_bits": bits})
    return {**model, "arch": served_arch}


def _num(perf: Mapping[str, Any], key: str, default: float) -> float:
    v = perf.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default


@lru_cache(maxsize=128)
def _box(key: str) -> Box:
    hardware, arch = json.loads(key)
    sh = _shape(json.dumps(arch, sort_keys=True, default=str))
    perf = hardware.get("perf") or {}
    n = int(hardware.get("num_gpus") or 0)
    cpu = n == 0 or str(hardware.get("arch") or "").lower() == "cpu"
    gpus = max(1, n)
    flops = perf.get("fp8_tflops") if perf.get("fp8_tflops") is not None else perf.get("matmul_tflops")
    precise = perf.get(COMPUTE_FIGURE.get(int(arch.get("compute_bits") or 0), ""))
    if isinstance(precise, (int, float)) and not isinstance(precise, bool) and precise > 0:
        flops = precise  # the model computes in a precision the box states its own figure for
    link_bw = _num(perf, "link_bw_gbs", 900) * 1e9
    tp, dp = max(1, int(hardware.get("tp") or gpus)), max(1, int(hardware.get("dp") or 1))
    return Box(**sh, tp=tp, ep=max(1, int(hardware.get("ep") or 1)), dp=dp,
               attn_dp=min(dp, tp) if hardware.get("dp_attention") else 1,
               bw=_num(perf, "mem_bw_tbs", 8.0) * 1e12,
               flops=(float(flops) if flops is not None else 2000.0) * 1e12,
               link_bw=link_bw, alpha=_num(perf, "link_latency_us", 3.0) * 1e-6,
               nvlink=bool(perf.get("nvlink", True)), domains=max(1, int(_num(perf, "pcie_domains", 1))),
               domain_bw=_num(perf, "domain_link_bw_gbs", link_bw / 1e9) * 1e9,
               mem_gb=float(hardware.get("memory_gb") or 80), cpu=cpu)


# model.arch.compute_bits -> the box's figure for that precision (hardware.perf); a model that does
# not say, or a box without that figure, runs on fp8_tflops (what the shipped calibrations were fitted on)
COMPUTE_FIGURE = {16: "bf16_tflops", 8: "fp8_tflops", 4: "fp4_tflops"}
BOX_HARDWARE_KEYS = ("num_gpus", "tp", "ep", "dp", "dp_attention", "memory_gb", "arch")


def box_of(hardware: Mapping[str, Any], model: Mapping[str, Any]) -> Box:
    """The figures of this model on this hardware (cached)."""
    hw: dict[str, Any] = {k: hardware.get(k) for k in BOX_HARDWARE_KEYS}
    hw["perf"] = {k: v for k, v in (hardware.get("perf") or {}).items()
                  if k not in ("calibration", "box", "probe", "engine")}
    return _box(json.dumps([hw, _arch(model)], sort_keys=True, default=str))
