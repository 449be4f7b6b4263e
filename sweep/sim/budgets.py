"""The accept length of budgets not measured, from the per-position acceptance an engine reports.

vLLM's /metrics (``vllm:spec_decode_num_accepted_tokens_per_pos_total{position}``) and llama.cpp's
count, per draft position i, the drafting steps whose (i+1)-th drafted token was accepted; over
the drafting steps (``..._num_drafts``) that is ``p[i]``, the share of drafts accepting at least
i + 1 tokens (the harness records it as ``acceptance.metrics.per_position``; a landscape keeps it
per round). Measured once at the largest budget K of a family (one method with its other knobs
fixed, the budget varied), ``p`` gives the distribution of accepted tokens per draft,
P(k = j) = p[j-1] - p[j], and from it the accept length at any budget K' <= K. Two ways to carry
it over:

* **truncate**: every step stays where it was and accepts min(k, K'):
  accept per draft = 1 + sum_{i<K'} p[i] -- vLLM's own definition (1 + accepted / drafts) at K
  summed over fewer positions. It assumes the steps fall where they fell at K; but a shorter
  draft takes more steps to cross a repeated span, so more of the steps land inside one;
* **span** (the default): a draft that accepted k at K yielded t = k + 1 tokens (its accepted run
  and the target's own token); at K' the same t tokens take ceil(t / (K' + 1)) steps -- K' + 1
  tokens each while the lookup keeps finding the span it is in, the rest in the last -- and the
  steps that drafted nothing stay as they were. Per drafting step: E[t] / E[ceil(t / (K' + 1))].

Two definitions of an accept length meet here (sweep/bench/acceptance.py): the harness's own --
tokens per verify step, the bonus token in, every step counted (llama.cpp's cells) -- and vLLM's
``1 + accepted / drafts`` (its cells: /metrics only), where a step whose lookup found nothing is
no drafting step. ``h``, the share of verify steps that drafted, converts: per step =
1 + h (per draft - 1). A cell's measured accept length at K in its engine's definition fixes what
the profile does not say (h, or the cell's level against the trial's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

MODELS = ("span", "truncate")


@dataclass(frozen=True)
class Profile:
    """Per-position acceptance of one measured config: ``p[i]`` = share of drafting steps whose
    (i+1)-th drafted token was accepted, at the measured budget ``len(p)``."""

    p: tuple[float, ...]
    drafts: float = 0.0            # drafting steps it was counted over (weights when pooling)
    share: float | None = None     # the share of verify steps that drafted at that budget (h), if known
    drafted: float | None = None   # drafted tokens per drafting step at that budget, if known

    @property
    def budget(self) -> int:
        return len(self.p)

    @property
    def per_draft(self) -> float:
        """The measured budget's accept length per drafting step: 1 + accepted / drafts."""
        return 1.0 + sum(self.p)

    def scaled(self, per_draft: float) -> "Profile":
        """The same shape at another level: a cell's own 1 + accepted / drafts against the trial's."""
        total = sum(self.p)
        if total <= 0:
            return self
        f = max(0.0, per_draft - 1.0) / total
        return Profile(tuple(min(1.0, x * f) for x in self.p), self.drafts, self.share, self.drafted)


def monotone(p: Iterable[float]) -> tuple[float, ...]:
    """Shares that can be a survival function: in [0, 1] and never rising with the position (a
    draft's (i+2)-th token is accepted only after its (i+1)-th; counters read at slightly different
    moments can break that by a count or two)."""
    out: list[float] = []
    for x in p:
        x = min(1.0, max(0.0, float(x)))
        out.append(min(x, out[-1]) if out else x)
    return tuple(out)


def distribution(p: Sequence[float]) -> list[float]:
    """P(k = j | a draft) for j = 0..K from the per-position shares."""
    q = [1.0, *monotone(p), 0.0]
    return [max(0.0, q[j] - q[j + 1]) for j in range(len(p) + 1)]


def steps_at(t: int, budget: int) -> int:
    """Steps that yield t tokens of one run at this budget (each yields at most budget + 1)."""
    return math.ceil(t / (budget + 1))


def histogram(prof: Profile, budget: int, model: str = "span", max_full: int = 2000) -> list[float]:
    """Steps at ``budget`` accepting a = 0..budget drafted tokens, per drafting step measured at
    the profile's budget K (their sum: how many steps a measured drafting step becomes).

    ``truncate``: each step stays and accepts min(k, budget). ``span``: the text's agreeing runs
    are crossed again: a draft accepted in full (k = K) does not end its run -- the target's own
    token after it is the run's next one -- a shorter draft does (its next token is the target's
    correction); the full drafts before the ending one are geometric (each the share p[K-1]).
    A run of t = n (K + 1) + j + 1 tokens takes ceil(t / (budget + 1)) steps here: all but the
    last accept ``budget``, the last what is left of t less its own token."""
    k = max(0, min(int(budget), prof.budget))
    dist = distribution(prof.p)
    hist = [0.0] * (k + 1)
    if model == "truncate":
        for j, w in enumerate(dist):
            hist[min(j, k)] += w
        return hist
    big, full = prof.budget, dist[-1]
    ends = dist[:-1]
    n_end = sum(ends)
    if n_end <= 0:  # every draft accepted in full: one run without end
        hist[k] = (big + 1) / (k + 1)
        return hist
    pn = 1.0 - full  # P(n full drafts before the ending one), n = 0, 1, ...
    for n in range(max_full):
        if pn < 1e-12:
            break
        for j, w in enumerate(ends):
            t = n * (big + 1) + j + 1
            c = steps_at(t, k)
            share = pn * w / n_end * (1.0 - full)  # runs per measured drafting step: 1 - full
            hist[k] += share * (c - 1)
            hist[t - (c - 1) * (k + 1) - 1] += share
        pn *= full
    return hist


def per_draft(prof: Profile, budget: int, model: str = "span") -> float:
    """Accept length per drafting step at ``budget`` (<= the measured one) from the profile."""
    if min(int(budget), prof.budget) <= 0:
        return 1.0
    hist = histogram(prof, budget, model)
    steps = sum(hist)
    return sum((a + 1) * w for a, w in enumerate(hist)) / steps if steps else 1.0


def per_step(prof: Profile, budget: int, share: float, model: str = "span") -> float:
    """Accept length per verify step at ``budget`` when a share ``share`` of the measured budget's
    verify steps drafted (the rest yielded their one token)."""
    return 1.0 + sum(survival(prof, budget, share, model))


def survival(prof: Profile, budget: int, share: float = 1.0, model: str = "span") -> tuple[float, ...]:
    """P(a verify step accepts >= a drafted tokens), a = 1..budget, at ``budget``: what the twin's
    step model integrates (sweep.sim.accept.survival); 1 + its sum is :func:`per_step`."""
    k = min(int(budget), prof.budget)
    h = min(1.0, max(0.0, share))
    if k <= 0:
        return ()
    hist = histogram(prof, k, model)
    steps = (1.0 - h) + h * sum(hist)
    return tuple(h * sum(hist[a:]) / steps for a in range(1, k + 1))


def share_after(prof: Profile, budget: int, share: float, model: str = "span") -> float:
    """The share of verify steps that draft at ``budget``: more of them under ``span`` (a run
    takes more, shorter drafts), the same under ``truncate``."""
    h = min(1.0, max(0.0, share))
    if h <= 0 or min(int(budget), prof.budget) <= 0:
        return 0.0
    drafted = h * sum(histogram(prof, budget, model))
    return drafted / ((1.0 - h) + drafted)


def share_from(prof: Profile, accept_per_step: float) -> float:
    """h from an accept length per verify step measured at the profile's budget (capped at 1:
    a cell whose level is above the trial's profile drafted on every step)."""
    total = sum(prof.p)
    return 1.0 if total <= 0 else min(1.0, max(0.0, (accept_per_step - 1.0) / total))


def predict(prof: Profile, budget: int, measured: float, *, per_draft_measured: bool,
            model: str = "span") -> float:
    """The accept length at ``budget`` in the measured cell's definition, from the profile measured
    at the family's largest budget and that cell's accept length there (``measured``, per drafting
    step when ``per_draft_measured`` -- vLLM's cells --, else per verify step)."""
    if per_draft_measured:
        return per_draft(prof.scaled(measured), budget, model)
    share = share_from(prof, measured)
    scaled = prof if (measured - 1.0) <= sum(prof.p) else prof.scaled(measured)
    return per_step(scaled, budget, share, model)


# --------------------------------------------------------------------------- landscapes


def family_key(cfg: Mapping[str, Any]) -> tuple[str, ...]:
    """What a landscape config shares with the rest of its family: every override but the budget."""
    return tuple(sorted(str(o) for o in cfg.get("overrides") or () if not str(o).startswith("spec.budget=")))


def budget_of(cfg: Mapping[str, Any]) -> int | None:
    for o in cfg.get("overrides") or ():
        key, _, value = str(o).partition("=")
        if key == "spec.budget":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _window_tokens(run: Mapping[str, Any], workload: Mapping[str, Any]) -> float | None:
    """Tokens the verify steps of one trial's /metrics window yielded (each request's first token
    is its prefill's): the measured cells' and their warm-up requests' (``warmup_requests`` per
    connection, at most 32 tokens each: sweep/bench/matrix.py)."""
    cells = [c for c in run.get("cells") or [] if isinstance(c, Mapping)]
    if not cells:
        return None
    warm = int(workload.get("warmup_requests") or 0)
    warm_tokens = min(int(workload.get("max_tokens") or 32), 32) - 1
    total = 0.0
    for c in cells:
        total += float(c.get("completion_tokens") or 0) - float(c.get("requests") or 0)
        total += warm * int(c.get("concurrency") or 1) * max(0, warm_tokens)
    return total


def profiles(land: Any) -> dict[tuple[str, str], Profile]:
    """(config, workload) -> its per-position acceptance over the rounds (drafting steps pooled):
    a landscape's ``runs`` (each round's /metrics window), else its ``trials`` (older files: the
    rounds' shares summed, ``per_position_accepted``, or their mean, ``per_position``).

    With ``runs`` the share of verify steps that drafted comes along: steps = the window's
    tokens less the accepted ones (each step yields one token of its own), h = drafts / steps."""
    acc: dict[tuple[str, str], list[Any]] = {}
    workloads = land.doc.get("workloads") or {}
    runs = [r for r in land.doc.get("runs") or [] if isinstance(r, Mapping) and r.get("status") == "ok"]
    for r in runs:
        a = r.get("acceptance") or {}
        pos, drafts = a.get("per_position"), a.get("drafts")
        if not pos or not drafts:
            continue
        key = (str(r.get("config")), str(r.get("workload")))
        sums, n, steps, drafted = acc.get(key, ([0.0] * len(pos), 0.0, 0.0, 0.0))
        sums = [x + float(y) * float(drafts) for x, y in zip(sums, pos)]
        tokens = _window_tokens(r, workloads.get(str(r.get("workload"))) or {})
        window_steps = tokens - float(a.get("accepted") or 0.0) if tokens else 0.0
        acc[key] = [sums, n + float(drafts), steps + max(0.0, window_steps), drafted + float(a.get("drafted") or 0)]
    out = {k: Profile(monotone([x / n for x in sums]), n, share=min(1.0, n / steps) if steps > 0 else None,
                      drafted=dr / n if dr else None)
           for k, (sums, n, steps, dr) in acc.items() if n > 0}
    if out:
        return out
    for t in land.doc.get("trials") or []:
        a = t.get("accept") or {}
        key = (str(t.get("config")), str(t.get("workload")))
        if a.get("per_position_accepted") and t.get("rounds_ok"):
            p = [float(x) / int(t["rounds_ok"]) for x in a["per_position_accepted"]]
        elif a.get("per_position"):
            p = [float(x) for x in a["per_position"]]
        else:
            continue
        drafts = float(a.get("drafts") or 0.0)
        share = None
        if a.get("tokens") and drafts:  # the window's tokens: its requests' first tokens are no step's
            wl = workloads.get(key[1]) or {}
            cells = [pt for pt in land.points if str(pt.get("config")) == key[0] and str(pt.get("workload")) == key[1]]
            rounds = int(t.get("rounds_ok") or 1)
            requests = sum(float(pt.get("requests") or 0) for pt in cells) \
                + rounds * sum(int(wl.get("warmup_requests") or 0) * int(pt.get("concurrency") or 1) for pt in cells)
            steps = float(a["tokens"]) - requests - float(a.get("accepted") or 0.0)
            share = min(1.0, drafts / steps) if steps > 0 else None
        out[key] = Profile(monotone(p), drafts, share=share,
                           drafted=float(a["drafted"]) / drafts if drafts and a.get("drafted") else None)
    return out


def profile_of_result(doc: Mapping[str, Any]) -> Profile | None:
    """The per-position acceptance a result.json recorded (``acceptance.metrics``: its /metrics
    window over the trial), with the share of steps that drafted from the window's tokens."""
    metrics = ((doc.get("acceptance") or {}).get("metrics") or {})
    pos, drafts = metrics.get("per_position"), metrics.get("drafts")
    if not pos or not drafts:
        return None
    workload = ((doc.get("config") or {}).get("workload") or {})
    tokens = _window_tokens({"cells": doc.get("cells") or []}, workload)
    steps = tokens - float(metrics.get("accepted") or 0.0) if tokens else 0.0
    drafted = metrics.get("drafted")
    return Profile(monotone(float(x) for x in pos), float(drafts),
                   share=min(1.0, float(drafts) / steps) if steps > 0 else None,
                   drafted=float(drafted) / float(drafts) if drafted else None)


@dataclass(frozen=True)
class Measured:
    """A per-position acceptance and what it was measured on: acceptance carries over between budgets
    of one family, never between engines (each counts its drafts its own way), models (another
    target accepts other drafts) or workloads (another text repeats otherwise)."""

    profile: Profile
    engine: str | None
    model: str | None
    workload: str | None
    prompts: str | None = None     # workload.prompt_source: the text the acceptance was counted on

    def mismatch(self, config: Mapping[str, Any]) -> str | None:
        """What differs between where this was measured and the composed ``config`` (None: nothing)."""
        def node(name: str) -> Mapping[str, Any]:
            value = config.get(name)
            return value if isinstance(value, Mapping) else {}

        server, wl = node("server"), node("workload")
        here = {"engine": server.get("name"), "model": node("model").get("name"), "workload": wl.get("name"),
                "workload.prompt_source": wl.get("prompt_source")}
        there = {"engine": self.engine, "model": self.model, "workload": self.workload,
                 "workload.prompt_source": self.prompts}
        off = [f"{k} {there[k]} (this config: {here[k]})" for k in here
               if there[k] is not None and here[k] is not None and str(there[k]) != str(here[k])]
        return ", ".join(off) or None


def load_measured(source: str) -> Measured:
    """The acceptance of ``RESULT.json`` or ``LANDSCAPE.json#CONFIG/WORKLOAD`` with what it was measured
    on; the file read through the project's one reader (:mod:`sweep.io.readback`: a FIFO, a device,
    ``/dev/zero`` or a file past its size are refused before they are read). ValueError names it."""
    from pathlib import Path

    from sweep.io import readback

    path, _, which = source.partition("#")
    if which:
        from sweep.sim.landscape import LandscapeError, load

        cid, _, wl = which.partition("/")
        try:
            land = load(Path(path))
        except LandscapeError as exc:
            raise ValueError(f"{path}: {exc.why}") from None
        got = profiles(land).get((cid, wl))
        if got is None:
            raise ValueError(f"{path} has no per-position acceptance for config {cid!r} on workload {wl!r}")
        try:
            model = (land.composed(cid).get("model") or {}).get("name")
        except LandscapeError:
            model = None
        wl_node = (land.doc.get("workloads") or {}).get(wl)
        wl_node = wl_node if isinstance(wl_node, Mapping) else {}
        return Measured(got, land.engine, str(model) if model else None, str(wl_node.get("name") or wl),
                        wl_node.get("prompt_source"))
    try:
        doc = readback.read_json(path)
    except readback.BadFile as exc:
        raise ValueError(f"{path}: {exc.why}") from None
    from sweep.record.result import check_document

    try:
        check_document(doc)  # a result file's types and ranges, as every reader of one checks them
    except readback.Invalid as exc:
        raise ValueError(f"{path}: not a result file: {exc}") from None
    prof = profile_of_result(doc)
    if prof is None:
        raise ValueError(f"{path}: no per-position acceptance (acceptance.metrics.per_position and drafts)")
    cfg = doc.get("config") if isinstance(doc.get("config"), Mapping) else {}

    def name(group: str, key: str = "name") -> str | None:
        node = cfg.get(group)
        value = node.get(key) if isinstance(node, Mapping) else None
        return str(value) if value is not None else None

    return Measured(prof, name("server"), name("model"), name("workload"), name("workload", "prompt_source"))


def load_profile(source: str) -> Profile:
    """A profile from ``RESULT.json`` or ``LANDSCAPE.json#CONFIG/WORKLOAD`` (ValueError names it)."""
    return load_measured(source).profile
