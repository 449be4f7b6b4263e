"""Per-load speculation (``spec.per_load``) read as the engine reads it: the budget of a batch size.

``spec.per_load`` (``[[from, to, budget], ...]``) is read the way vLLM 0.32's scheduler reads
``num_speculative_tokens_per_batch_size`` (``vllm/v1/spec_decode/dynamic/utils.py``,
``build_dynamic_sd_schedule_lookup``): the band holding the batch size gives its budget; a batch
size in a gap between bands takes the previous band's budget, one past the last band the last
budget; budget 0 is a plain decoding step. The batch size is the number of running requests:
the simulator's engine asks per step (:mod:`sweep.sim.engine`), the predictor takes the cell's
concurrency as its steady-state batch (:mod:`sweep.sim.predict`; the drain at a cell's end, when
fewer requests run, is not in a prediction).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

Bands = Sequence[Sequence[int]]


def budget_at(bands: Bands, batch: int) -> int:
    """The budget of a step that decodes ``batch`` requests (vLLM's lookup, gaps and tail carried)."""
    out = int(bands[0][2])
    for lo, _hi, k in sorted((int(a), int(b), int(c)) for a, b, c in bands):
        if lo > batch:
            break
        out = k
    return out


def spec_at(spec: Mapping[str, Any], budget: int) -> dict[str, Any]:
    """The static spec a step with this ``budget`` runs (budget 0: autoregressive)."""
    out = {k: v for k, v in spec.items() if k != "per_load"}
    if budget <= 0:
        return {**out, "algorithm": "none", "budget": None, "topk": None, "block": None, "num_steps": None,
                "chain_n_max": None}
    out["budget"] = budget
    if out.get("chain_n_max"):
        out["chain_n_max"] = budget
    algo = str(out.get("algorithm") or "").lower()
    if algo == "dflash":  # linear: the block is the budget
        out["block"] = budget
    if out.get("topk"):
        out["topk"] = min(int(out["topk"]), budget)
    if out.get("num_steps") and algo not in ("ddtree", "dflash"):
        out["num_steps"] = min(int(out["num_steps"]), budget)
    return out


def bands_of(spec: Mapping[str, Any]) -> list[list[int]] | None:
    """The spec's per-load bands (None: one budget at every load)."""
    raw = spec.get("per_load")
    if not raw:
        return None
    return [[int(a), int(b), int(c)] for a, b, c in raw]
