"""Acceptance: how many drafted tokens a verify step accepts, and the tree it verifies.

DDTree builds its draft tree best-first from the drafter's per-position
distributions until ``budget`` nodes are spent: each position offers its
``topk`` most likely tokens, so a node's children are at most ``topk``
candidates, and depth is at most the DFlash block minus its anchor token
(block - 1). At depth d the drafter's top-1 candidate is right (given the
prefix) with probability p_d = p0 * s * decay^(d-1); the r-th (r >= 2) takes
(1 - p_d)(1 - rho) rho^(r-2) of the miss. A prefix's probability is the
product along its path. Since at most one node per depth is the target's
token, P(at least d drafted tokens accepted) = S_d = the sum of the chosen
depth-d prefixes' probabilities, and

    E[accepted per step] = 1 (the bonus token) + sum_d S_d.

``s`` gathers what moves the drafter: its window (context beyond it is
invisible), how far into its answer the request is (drift), and a
per-request difficulty. ``topk = 1`` is a chain (deep and narrow, at most
block - 1 nodes, whatever the budget); larger topk lets best-first spend
the budget on siblings (wider and shallower).

**Chain drafters** (a draft model, n-gram lookup: llama.cpp ``draft`` /
``ngram``, vLLM ``draft_model`` / ``ngram``, SGLang ``STANDALONE`` / ``NGRAM``)
propose a run of G tokens, P(G >= j) = h g^(j-1): ``h`` the chance a step has
any draft (an n-gram lookup that hits; 1 for a draft model), ``g`` the chance
the run goes on (the stored continuation, or the draft model staying above
its probability floor). The engine drafts D = min(G, n_max) tokens, none
when G < n_min, and accepts each in turn with probability ``q``:

    S_j = P(at least j accepted) = P(D >= j) q^j,   E[width] = 1 + sum_j P(D >= j)

For n-gram drafting the three numbers describe the *workload* (how often
the text repeats what came before, for how long): they are fitted per
workload (``ngram_hit@<workload>`` ...) from measured acceptance.
docs/simulator.md has the equations and tables.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

SEGMENT_TOKENS = 64  # resolution of the answer-position integral in mean acceptance


CHAIN_FAMILIES = ("ngram", "draft", "synth")
_ALIASES = {"ngram": "ngram", "ngram-mod": "ngram", "ngram-simple": "ngram", "suffix": "ngram",
            "draft": "draft", "draft_model": "draft", "standalone": "draft", "synth": "synth",
            # DSpark drafts a whole block in one forward and verifies it as a chain, like DFlash
            "dspark": "dflash"}


def family(spec: Mapping[str, Any]) -> str:
    algo = str(spec.get("algorithm") or "none").lower()
    if algo in ("none", "", "null"):
        return "none"
    if algo in ("ddtree", "dflash"):
        return algo
    return _ALIASES.get(algo, "eagle")  # EAGLE-1, EAGLE-3, MTP: a head over the target's hidden states


@dataclass(frozen=True, slots=True)
class Shape:
    """What a spec drafts and verifies per request per step."""

    fam: str
    budget: int       # DDTree node budget (EAGLE: draft tokens - 1; DFlash: block - 1)
    topk: int         # candidates per position
    depth: int        # deepest node
    nodes: int        # drafted nodes actually verified
    width: int        # tokens verified per request per step (nodes + the root/bonus)
    tree: bool        # a tree (custom attention mask) rather than a chain (causal)
    positions: int    # drafter positions per forward (DFlash block; EAGLE topk)
    forwards: int     # drafter forwards per step (EAGLE: num_steps)
    window: int | None
    n_min: int = 0            # chain drafters: drafts shorter than this are dropped
    draft_size: float = 1.0   # a draft model's size relative to the target
    synth_len: float = 0.0    # synthetic acceptance: the mean accept length asked for
    n_match: int = 0          # n-gram lookup: the shortest key it accepts (0: the reference length)
    n_ref: int = 0            # the key length ngram_hit is the hit rate at (0: NGRAM_KEY_REFERENCE)
    full_draft: bool = False  # a lookup that hits proposes the whole budget (vLLM's n-gram proposer)
    p_floor: float = 0.0      # a draft model's probability floor (0: it always drafts its budget)
    # measured per-position acceptance of this family at a budget >= this one (sweep/sim/budgets.py):
    # p[i] per drafting step, the share of steps that drafted there, its drafted tokens per draft,
    # and how a shorter budget carries it over ("span" | "truncate")
    profile: tuple[float, ...] = ()
    profile_share: float = 1.0
    profile_drafted: float = 0.0
    profile_model: str = "span"
    # the mean accept length a source measured for this setup (spec.accept_length): an input that
    # replaces the acceptance model (0: the twin's own model)
    given: float = 0.0


def _max_nodes(topk: int, depth: int) -> int:
    return depth if topk <= 1 else min(10**6, sum(topk ** d for d in range(1, depth + 1)))


@lru_cache(maxsize=512)
def _shape(algo: str, budget: int | None, topk: int | None, block: int | None, num_steps: int | None,
           window: int | None, n_min: int = 0, draft_size: float = 1.0, synth_len: float = 0.0,
           n_match: int = 0, p_floor: float = 0.0, profile: tuple[float, ...] = (), profile_share: float = 1.0,
           profile_drafted: float = 0.0, profile_model: str = "span", n_ref: int = 0,
           full_draft: bool = False, given: float = 0.0) -> Shape:
    fam = family({"algorithm": algo})
    if fam == "none":
        return Shape("none", 0, 0, 0, 0, 1, False, 0, 0, None)
    if given:
        import dataclasses

        out = _shape(algo, budget, topk, block, num_steps, window, n_min, draft_size, synth_len, n_match, p_floor,
                     profile, profile_share, profile_drafted, profile_model, n_ref, full_draft)
        return dataclasses.replace(out, given=float(given))
    if fam in CHAIN_FAMILIES:
        n = max(1, int(budget or 4))
        return Shape(fam, n, 1, n, n, n + 1, False, 1, n if fam == "draft" else 0, None,
                     n_min=int(n_min or 0), draft_size=float(draft_size), synth_len=float(synth_len or 0.0),
                     n_match=int(n_match or 0), n_ref=int(n_ref or 0), full_draft=bool(full_draft),
                     p_floor=float(p_floor or 0.0), profile=profile,
                     profile_share=profile_share, profile_drafted=profile_drafted, profile_model=profile_model)
    blk = int(block or budget or 8)
    if fam == "ddtree":
        b, k, depth = int(budget or 8), max(1, int(topk or 1)), max(1, blk - 1)
        nodes = min(b, _max_nodes(k, depth))
        return Shape(fam, b, k, depth, nodes, nodes + 1, k > 1, blk, 1, window)
    if fam == "dflash":
        depth = max(1, blk - 1)
        return Shape(fam, depth, 1, depth, depth, blk, False, blk, 1, window)
    steps = int(num_steps or block or 3)
    k = max(1, int(topk or 1))
    width = int(budget or steps + 1)
    return Shape(fam, max(1, width - 1), k, steps, max(1, width - 1), width, k > 1, k, steps, window)


def shape_of(spec: Mapping[str, Any]) -> Shape:
    """The verify shape of a spec mapping (algorithm, budget, topk, window, block, num_steps;
    chain drafters: chain_n_max, chain_floor, lookup_key as the engine runs them --
    sweep.sim.measured.chain_keys reads them from its flags --, draft_size, synth_len)."""
    w = spec.get("window")
    budget = spec.get("chain_n_max") or spec.get("budget")
    floor = spec.get("chain_floor")
    if floor is None:
        floor = spec.get("ngram_n_min", spec.get("draft_n_min")) or 0
    key = spec.get("lookup_key") if "lookup_key" in spec else spec.get("ngram_n_match")
    prof = spec.get("accept_profile") or ()
    return _shape(str(spec.get("algorithm") or "none").lower(), budget, spec.get("topk"),
                  spec.get("block"), spec.get("num_steps"), int(w) if w else None, int(floor),
                  float(spec.get("draft_size") or 1.0), float(spec.get("synth_len") or 0.0),
                  int(key or 0), float(spec.get("draft_p_min") or 0.0), tuple(float(x) for x in prof),
                  float(spec.get("accept_share") or 1.0), float(spec.get("accept_drafted") or 0.0),
                  str(spec.get("accept_model") or "span"), int(spec.get("lookup_reference") or 0),
                  bool(spec.get("full_draft")), float(spec.get("accept_length") or 0.0))


def verify_width(spec: Mapping[str, Any]) -> int:
    """Tokens the target verifies per request per step (root/bonus included)."""
    return shape_of(spec).width


@lru_cache(maxsize=16384)
def tree(nodes: int, topk: int, depth: int, p0: float, decay: float, rho: float,
         scale: float) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """(S_d for d = 1..depth, nodes chosen at each depth) of the best-first tree."""
    p = [min(0.995, p0 * scale * decay ** d) for d in range(depth)]

    def rank_prob(d: int, r: int) -> float:
        return p[d] if r == 1 else (1 - p[d]) * (1 - rho) * rho ** (r - 2)

    survival = [0.0] * depth
    count = [0] * depth
    heap: list[tuple[float, int, int, float]] = [(-rank_prob(0, 1), 0, 1, 1.0)]  # (-prob, depth, rank, parent)
    chosen = 0
    while heap and chosen < nodes:
        neg, d, r, parent = heapq.heappop(heap)
        prob = -neg
        survival[d] += prob
        count[d] += 1
        chosen += 1
        if r < topk:  # the next candidate of the same position
            heapq.heappush(heap, (-(parent * rank_prob(d, r + 1)), d, r + 1, parent))
        if d + 1 < depth:  # the top candidate of the next position
            heapq.heappush(heap, (-(prob * rank_prob(d + 1, 1)), d + 1, 1, prob))
    return tuple(min(1.0, s) for s in survival), tuple(count)


def p_scale(shape: Shape, cal: Mapping[str, float], context: float, generated: float = 0.0) -> float:
    """What moves the drafter's hit probability at this point of a request.

    Window: a drafter that sees w of c context tokens loses
    window_loss * (1 - w/c). Drift: ``generated`` tokens into its answer,
    the hit probability has fallen by drift_amp * (1 - exp(-generated / drift_tokens)).
    """
    if shape.fam in CHAIN_FAMILIES:
        return 1.0  # a chain's numbers are fitted per workload: no window, no drift
    scale = cal["eagle_p_scale"] if shape.fam == "eagle" else 1.0
    if shape.window and context > shape.window:
        scale *= 1.0 - cal["window_loss"] * (1.0 - shape.window / context)
    return scale * (1.0 - cal["drift_amp"] * (1.0 - math.exp(-max(0.0, generated) / cal["drift_tokens"])))


NGRAM_KEY_REFERENCE = 24  # the key length ngram_hit is the hit rate at (llama.cpp ngram-mod's default)


def chain_params(shape: Shape, cal: Mapping[str, float]) -> tuple[float, float, float]:
    """(h, g, q) of a chain drafter: offer, continuation, per-token acceptance.

    An n-gram lookup hits when the last n_match tokens occurred before, i.e. the
    text is at least n_match tokens into a repeated span; spans continue token
    by token with the same probability g that carries the drafted run, so a
    lookup key shorter than the reference 24 hits g^-(24 - key) times as often
    (``ngram_hit`` is the hit rate at the engine's reference key: llama.cpp ngram-mod's default
    24 tokens; vLLM's prompt_lookup_min at the shipped spec's 2 -- measured from 24, a 2-token key's
    22 steps of g saturate the hit rate at 1 and leave the share of drafting steps unfitted)."""
    if shape.fam == "ngram":
        g = cal["ngram_cont"]
        ref = shape.n_ref or NGRAM_KEY_REFERENCE
        shift = (shape.n_match or ref) - ref
        return min(1.0, cal["ngram_hit"] * g ** shift), g, cal["ngram_q"]
    if shape.fam == "synth":  # llama.cpp's synthetic acceptance: a geometric run of mean synth_len - 1
        mean = max(1.0, min(shape.synth_len or 1.0, shape.budget + 1.0)) - 1.0
        return 1.0, 1.0, _geometric_q(mean, shape.budget)
    return 1.0, cal["draft_cont"] if shape.p_floor > 0 else 1.0, cal["draft_q"]


def _geometric_q(mean_drafted: float, n: int) -> float:
    """q with sum_{j<=n} q^j = mean_drafted (bisection; the run llama.cpp's synth rates give)."""
    lo, hi = 0.0, 1.0
    for _ in range(50):
        mid = (lo + hi) / 2
        if sum(mid ** j for j in range(1, n + 1)) < mean_drafted:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def chain_reach(shape: Shape, cal: Mapping[str, float]) -> tuple[float, ...]:
    """P(the text's repeated run reaches drafted position j), j = 1..n_max: the lookup hits (h) and
    the run goes on (g each token), dropped below n_min -- what a drafted token must have to be
    right, besides the per-token agreement q."""
    h, g, _ = chain_params(shape, cal)
    n, lo = shape.budget, shape.n_min
    if lo > n:
        return (0.0,) * n
    return tuple(h * g ** (max(j, lo) - 1) for j in range(1, n + 1))


def chain_offer(shape: Shape, cal: Mapping[str, float]) -> tuple[float, ...]:
    """P(D >= j) for j = 1..n_max: the drafted run, cut at n_max, dropped below n_min. A proposer
    that drafts its whole budget whenever the lookup hits (vLLM's n-gram: the K tokens after the
    match) offers every position with the hit's probability; the run's end shows in acceptance."""
    reach = chain_reach(shape, cal)
    if shape.full_draft and reach:
        return (reach[0],) * len(reach)
    return reach


@lru_cache(maxsize=4096)
def _profiled(profile: tuple[float, ...], budget: int, share: float, model: str) -> tuple[tuple[float, ...], float]:
    """(per-step survival, share of steps drafting) at ``budget`` from a measured profile."""
    from sweep.sim import budgets

    prof = budgets.Profile(profile)
    return budgets.survival(prof, budget, share, model), budgets.share_after(prof, budget, share, model)


def draft_share(shape: Shape, cal: Mapping[str, float]) -> float:
    """The share of verify steps that verify a draft at all: a chain drafter's lookup may find
    nothing (an n-gram miss) or a run shorter than its floor; every other family drafts every step."""
    if shape.profile:
        return _profiled(shape.profile, shape.budget, shape.profile_share, shape.profile_model)[1]
    if shape.fam in CHAIN_FAMILIES:
        offer = chain_offer(shape, cal)
        return offer[0] if offer else 0.0
    return 1.0 if shape.fam != "none" else 0.0


def mean_width(shape: Shape, cal: Mapping[str, float]) -> float:
    """Tokens verified per request per step, on average (chains draft a varying run)."""
    if shape.profile:  # drafting steps verify what was drafted: the measured length, cut at the budget
        drafted = min(float(shape.budget), shape.profile_drafted or float(shape.budget))
        return 1.0 + draft_share(shape, cal) * drafted
    if shape.fam in CHAIN_FAMILIES:
        return 1.0 + sum(chain_offer(shape, cal))
    return float(shape.width)


def survival(shape: Shape, cal: Mapping[str, float], scale: float) -> tuple[float, ...]:
    if shape.fam == "none":
        return ()
    if shape.given:  # a source's measured mean: no constants involved
        return given_survival(shape.given, shape.depth)
    if shape.profile:  # measured at a larger budget of this family: no constants involved
        return _profiled(shape.profile, shape.budget, shape.profile_share, shape.profile_model)[0]
    if shape.fam in CHAIN_FAMILIES:
        q = min(0.999, chain_params(shape, cal)[2] * (scale if shape.fam != "synth" else 1.0))
        return tuple(min(1.0, d * q ** j) for j, d in enumerate(chain_reach(shape, cal), start=1))
    return tree(shape.nodes, shape.topk, shape.depth, cal["p0"], cal["decay"], cal["rho"], scale)[0]


@lru_cache(maxsize=1024)
def given_survival(mean: float, depth: int) -> tuple[float, ...]:
    """S_1..S_depth of a measured mean accept length: a geometric run, S_j = q^j with 1 + sum S_j = mean
    (capped at what ``depth`` drafted positions can yield). A source gives the mean, not the shape;
    the shape only moves the per-request spread the tail of a cell is priced with."""
    n = max(1, int(depth))
    want = min(max(0.0, float(mean) - 1.0), n * 0.999)
    return tuple(_geometric_q(want, n) ** j for j in range(1, n + 1))


def moments(surv: tuple[float, ...]) -> tuple[float, float]:
    """Mean and variance of the tokens one verify step yields (bonus included)."""
    mean = 1.0 + sum(surv)
    second = sum((2 * d + 1) * s for d, s in enumerate(surv))  # E[N^2] of the drafted part
    return mean, max(0.0, second - (mean - 1.0) ** 2)


def segments(max_tokens: int) -> list[tuple[float, float]]:
    """(answer position at the middle, tokens) slices of a generation after its first token."""
    rest = max(0, int(max_tokens) - 1)
    n = max(1, min(16, math.ceil(rest / SEGMENT_TOKENS)))
    size = rest / n
    return [(1 + (i + 0.5) * size, size) for i in range(n)] if rest else []


def mean_accept(spec: Mapping[str, Any], cal: Mapping[str, float], context: int = 60,
                max_tokens: int = 512) -> float:
    """Tokens per verify step over a whole generation (what SGLang's counters give)."""
    shape = shape_of(spec)
    if shape.fam == "none":
        return 1.0
    steps = tokens = 0.0
    for pos, size in segments(max_tokens):
        a = moments(survival(shape, cal, p_scale(shape, cal, context + pos, pos)))[0]
        steps += size / a
        tokens += size
    return tokens / steps if steps else moments(survival(shape, cal, p_scale(shape, cal, context)))[0]


def draw_accepted(surv: tuple[float, ...], u: float) -> int:
    """Tokens accepted in one verify step for a uniform draw ``u`` (1 + drafts)."""
    n = 1
    for s in surv:
        if u < s:
            n += 1
        else:
            break
    return n
