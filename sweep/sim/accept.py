"""Acceptance: how many drafted tokens a verify step accepts.

DDTree builds its draft tree best-first from the drafter's per-position
distributions until ``budget`` nodes are spent, at most ``topk`` candidates
per depth, depth <= the DFlash block. Since at most one node per depth is
the target's token, the expected accepted length is 1 (bonus token) + the
sum of the chosen prefixes' probabilities, and P(at least d accepted) is the
sum at depth d -- so one survival vector gives both the mean and the
per-step draw. A chain (topk = 1, DFlash) is the special case of one node
per depth. Parameters: ``accept:`` in calibration.yaml; docs/simulator.md.
"""

from __future__ import annotations

import heapq
from functools import lru_cache
from typing import Any, Mapping

from sweep.sim._calibration import calibration


def _cal() -> dict[str, Any]:
    return calibration()["accept"]


def family(spec: Mapping[str, Any]) -> str:
    algo = str(spec.get("algorithm") or "none").lower()
    if algo in ("none", "", "null"):
        return "none"
    if algo in ("ddtree", "dflash"):
        return algo
    return "eagle"


def verify_width(spec: Mapping[str, Any]) -> int:
    """Tokens the target verifies per request per step (root/bonus included)."""
    fam = family(spec)
    if fam == "none":
        return 1
    budget = int(spec.get("budget") or spec.get("block") or 8)
    if fam == "ddtree":
        return budget + 1
    if fam == "dflash":
        return int(spec.get("block") or budget)
    return budget


@lru_cache(maxsize=4096)
def _depth_survival(fam: str, budget: int, topk: int, depth: int, p_scale_milli: int) -> tuple[float, ...]:
    """S_d = P(at least d drafted tokens accepted), d = 1..depth.

    The tree is the ``budget`` most probable prefixes (best-first, as DDTree
    builds it), with at most ``topk`` candidates per depth; for a chain
    (topk = 1) that is simply the first ``budget`` depths. Since at most one
    node per depth is right, S_d is the sum of chosen nodes' probabilities at d.
    """
    acc = _cal()
    scale = p_scale_milli / 1000.0
    p = [min(0.995, acc["p0"] * scale * acc["decay"] ** d) for d in range(depth)]
    rho = acc["rho"]

    def rank_prob(d: int, r: int) -> float:
        return p[d] if r == 1 else (1 - p[d]) * (1 - rho) * rho ** (r - 2)

    survival = [0.0] * depth
    # heap of (-prob, depth index, rank, parent prob)
    heap: list[tuple[float, int, int, float]] = [(-rank_prob(0, 1), 0, 1, 1.0)]
    chosen = 0
    while heap and chosen < budget:
        neg, d, r, parent = heapq.heappop(heap)
        prob = -neg
        survival[d] += prob
        chosen += 1
        if r < topk:  # next sibling at the same depth
            heapq.heappush(heap, (-(parent * rank_prob(d, r + 1)), d, r + 1, parent))
        if d + 1 < depth:  # first child
            heapq.heappush(heap, (-(prob * rank_prob(d + 1, 1)), d + 1, 1, prob))
    return tuple(min(1.0, s) for s in survival)


def _p_scale(spec: Mapping[str, Any], context: int) -> float:
    acc = _cal()
    scale = 1.0
    if family(spec) == "eagle":
        scale *= acc["eagle_p_scale"]
    window = spec.get("window")
    if window and context > int(window):
        scale *= 1.0 - acc["window_loss"] * (1.0 - int(window) / context)
    return scale


def survival(spec: Mapping[str, Any], context: int, request_scale: float = 1.0) -> tuple[float, ...]:
    """Per-depth survival probabilities for this spec at this context (cached)."""
    fam = family(spec)
    if fam == "none":
        return ()
    budget = int(spec.get("budget") or spec.get("block") or 8)
    block = int(spec.get("block") or budget)
    if fam == "ddtree":
        topk, nodes, depth = int(spec.get("topk") or 1), budget, block
    elif fam == "dflash":
        topk, nodes, depth = 1, block - 1, block - 1
    else:
        steps = int(spec.get("num_steps") or block or 3)
        topk, nodes, depth = int(spec.get("topk") or 1), budget - 1, steps
    scale = _p_scale(spec, context) * request_scale
    return _depth_survival(fam, max(1, nodes), max(1, topk), max(1, depth), int(round(scale * 1000)))


def accept_length(spec: Mapping[str, Any], context: int = 60) -> float:
    """Expected tokens per verify step (bonus token included); 1.0 without spec."""
    return 1.0 + sum(survival(spec, context))


def draw_accepted(surv: tuple[float, ...], u: float) -> int:
    """Tokens accepted in one verify step for a uniform draw ``u`` (1 + drafts)."""
    n = 1
    for s in surv:
        if u < s:
            n += 1
        else:
            break
    return n
