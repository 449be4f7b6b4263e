"""Collectives of one forward, from the layout and the link figures (the communication model).

Per step the twin lists the collectives a layout runs and prices each from the
box's link: per-hop latency a = ``link_latency_us`` x ``link_latency_factor``
(launch, sync, the fabric's hop), bandwidth b = ``link_bw_gbs`` x ``link_bw_eff``
(the two calibrated efficiencies), plus an all-to-all's fixed cost
(``a2a_overhead_us``). Nothing here is per layout: TP8, EP4 and EP8 differ only in
which collectives they run, over how many GPUs, with what message.

**AllReduce of S bytes over n GPUs**, as the engine chooses by size --

    one-shot   a + (n-1) S / b                 custom kernel: every GPU reads every peer's buffer
    two-shot   2a + 2 (n-1)/n S / b            custom kernel: reduce-scatter + all-gather
    NVLS       2a + S / b                      NCCL on NVSwitch: the switch reduces (NVLink SHARP)
    ring       2 (n-1) (a + S / (n b))         NCCL elsewhere: 2(n-1) dependent steps

SGLang's/vLLM's custom all-reduce (the faster of one-shot and two-shot) runs
whenever every pair of GPUs has peer access (NVSwitch; on PCIe at most two
GPUs) and the message fits its buffer (``custom_ar_max_mb``); otherwise NCCL
(NVLS on an NVSwitch box, else the ring; NCCL's tree pays off across nodes, and
inside one box it chains the GPUs). So a decode-sized message is latency-bound:
one latency over NVSwitch, 2(n-1) over PCIe -- the PCIe box's TP all-reduce cost.

**All-to-all** (EP dispatch or combine): every GPU sends its share of the routed
tokens at once -- one round: a + a2a_overhead + bytes / b. On a PCIe box with
``pcie_domains`` switches (GPUs behind different switches), the traffic that
crosses switches shares the uplinks (``domain_link_bw_gbs``), so a large
all-to-all is bound by the uplink, not the GPU's own link; a ring all-reduce
crosses each uplink once per direction and is not.

**A forward's plan** (T tokens; TP = tp GPUs per replica, EP groups = ep):

* attention: one AllReduce of T h 2 bytes over tp after each layer's output projection;
* dense MLP layers (and every MLP of a dense model): one AllReduce over tp;
* MoE layers, ep = 1: one AllReduce over tp (each GPU holds a slice of every expert);
* MoE layers, ep > 1: dispatch + combine all-to-all -- each GPU owns T/tp tokens and
  sends each to the distinct remote groups among its k experts -- and, when a
  group spans tp/ep > 1 GPUs, an AllReduce of the group's tokens inside it;
* the lm_head's logits all-gathered over tp (vocab-parallel): T x vocab x 2 bytes;
* DP: ``dp`` replicas each with their own tp GPUs share nothing per step (cells.py
  splits the requests between them); with DP attention (``hardware.dp_attention``)
  the dp groups split the requests *inside* the tp GPUs instead: attention runs in
  each group over tp/dp GPUs (its AllReduce over those, none at tp/dp = 1), and a
  tensor-parallel MLP gathers every group's tokens and scatters them back (EP
  dispatches from the owning GPU directly).
"""

from __future__ import annotations

from typing import Mapping

from sweep.sim.arch import Box

BYTES = 2.0  # BF16 activations and logits on the wire


def _alpha(b: Box, c: Mapping[str, float]) -> float:
    return b.alpha * c["link_latency_factor"]


def _bw(b: Box, c: Mapping[str, float]) -> float:
    return b.link_bw * c["link_bw_eff"]


def custom_ar_ok(b: Box, n: int) -> bool:
    """Can the engine's custom all-reduce run over n GPUs (peer access between every pair)?"""
    return b.nvlink or n <= 2


def allreduce(b: Box, c: Mapping[str, float], nbytes: float, n: int) -> tuple[float, str]:
    """(seconds, algorithm) of one AllReduce of ``nbytes`` over ``n`` GPUs."""
    if n <= 1 or b.cpu:
        return 0.0, "none"
    a, bw = _alpha(b, c), _bw(b, c)
    if custom_ar_ok(b, n) and nbytes <= c.get("custom_ar_max_mb", 8.0) * 1e6:
        options = {"one-shot": a + (n - 1) * nbytes / bw, "two-shot": 2 * a + 2 * (n - 1) / n * nbytes / bw}
    elif b.nvlink:
        options = {"nvls": 2 * a + nbytes / bw}
    else:
        options = {"ring": 2 * (n - 1) * (a + nbytes / n / bw)}
    algo = min(options, key=options.__getitem__)
    return options[algo], algo


def allreduce_s(b: Box, c: Mapping[str, float], nbytes: float, n: int) -> float:
    return allreduce(b, c, nbytes, n)[0]


def all_gather_s(b: Box, c: Mapping[str, float], nbytes_total: float, n: int) -> float:
    """All-gather of ``nbytes_total`` (each GPU holds 1/n): ring over PCIe, direct reads over NVSwitch."""
    if n <= 1 or b.cpu:
        return 0.0
    a, bw = _alpha(b, c), _bw(b, c)
    move = (n - 1) / n * nbytes_total / bw
    return (a if b.nvlink else (n - 1) * a) + move


def all_to_all_s(b: Box, c: Mapping[str, float], nbytes_per_gpu: float, n: int) -> float:
    """One all-to-all round: every GPU sends ``nbytes_per_gpu`` to remote GPUs at once."""
    if n <= 1 or b.cpu:
        return 0.0
    bw = _bw(b, c)
    own = nbytes_per_gpu / bw
    wire = own
    if b.domains > 1 and not b.nvlink:
        per_domain = max(1.0, n / b.domains)
        cross_share = (n - per_domain) / max(1, n - 1)  # remote peers behind another switch
        uplink = b.domain_bw * c["link_bw_eff"]
        wire = max(own, per_domain * nbytes_per_gpu * cross_share / uplink)
    return _alpha(b, c) + c["a2a_overhead_us"] * 1e-6 + wire


def remote_groups(b: Box) -> float:
    """Expected distinct remote EP groups among one token's k experts."""
    if b.ep <= 1 or not b.moe:
        return 0.0
    distinct = b.ep * (1.0 - (1.0 - 1.0 / b.ep) ** b.k)
    return distinct * (b.ep - 1) / b.ep


def forward_comm(b: Box, c: Mapping[str, float], tokens: float, share: float = 1.0) -> dict[str, float]:
    """Seconds of each kind of collective in one forward of ``tokens`` tokens (one replica;
    ``share``: the busiest DP-attention group's share of them)."""
    if b.tp <= 1 or b.cpu:
        return {"allreduce": 0.0, "all_to_all": 0.0, "logits": 0.0}
    msg = tokens * b.h * BYTES
    ar_tp = allreduce_s(b, c, msg, b.tp)
    out = {"allreduce": 0.0, "all_to_all": 0.0,
           "logits": all_gather_s(b, c, tokens * b.vocab * BYTES, b.tp)}
    if b.attn_dp > 1:  # attention inside each group; its tokens gathered for a TP MLP and scattered back
        out["allreduce"] += b.layers * allreduce_s(b, c, msg * share, b.attn_tp)
        mlp_tp = 2 * all_gather_s(b, c, msg, b.tp)
    else:
        out["allreduce"] += b.layers * ar_tp
        mlp_tp = ar_tp
    if not b.moe or b.ep <= 1:
        out["allreduce"] += b.layers * mlp_tp  # every MLP/MoE block ends in one
        return out
    out["allreduce"] += b.dense_layers * mlp_tp
    owned = tokens * share / b.attn_tp if b.attn_dp > 1 else tokens / b.tp  # the tokens one GPU dispatches
    payload = owned * remote_groups(b) * b.h * BYTES
    out["all_to_all"] = b.moe_layers * 2 * all_to_all_s(b, c, payload, b.tp)
    group = b.tp // b.ep
    if group > 1:
        received = tokens * (1.0 - (1.0 - 1.0 / b.ep) ** b.k)  # tokens that reach one group
        out["allreduce"] += b.moe_layers * allreduce_s(b, c, received * b.h * BYTES, group)
    return out


def algorithms(b: Box, c: Mapping[str, float], tokens: float) -> dict[str, str]:
    """Which AllReduce algorithm each collective of a forward uses (for the breakdown)."""
    out = {"tp": allreduce(b, c, tokens * b.h * BYTES, b.tp)[1]}
    if b.moe and b.ep > 1 and b.tp // b.ep > 1:
        received = tokens * (1.0 - (1.0 - 1.0 / b.ep) ** b.k)
        out["ep_group"] = allreduce(b, c, received * b.h * BYTES, b.tp // b.ep)[1]
    return out
