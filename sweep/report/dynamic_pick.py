"""Which per-load table to deploy: one per box, model, workload and context, then the alternatives.

``--export`` derives a table for every family of configs that differ only in ``spec.budget``
(sweep/report/dynamic.py); a directory with several families (n-gram lookup lengths, a draft
model) gave a dozen tables and never said which one to run. The families of one group share its
baseline and its loads, so they are compared on what each table would run: at every load its
pick's tok/s (the campaign model's estimate at that level), summed on the log scale over the loads
all of them measured -- the table whose picks give the most throughput across the loads. Its worst
regret bound says how sure that is; the others follow, each with how far below it they come.

An export is made for one engine from that engine's measurements (or the simulator's, which
stands in for any engine and is tagged simulated): a table measured on llama.cpp is not a vLLM
configuration, whatever its flags render to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from sweep.report.dynamic import Table


@dataclass
class Pick:
    """The table to deploy for one group and context, and what else was measured there."""

    table: Table
    score: float                 # mean log tok/s of its picks over the shared loads
    loads: list[int]
    worst_regret: float | None   # the largest regret bound among its levels (a fraction)
    alternatives: list[tuple[Table, float]] = field(default_factory=list)  # (table, fraction below the pick)

    @property
    def key(self) -> tuple[str, str, str, int]:
        t = self.table
        return (t.hardware, t.model, t.workload, t.context)

    def to_dict(self) -> dict[str, Any]:
        return {"hardware": self.table.hardware, "model": self.table.model, "workload": self.table.workload,
                "context": self.table.context, "family": self.table.family, "loads": self.loads,
                "geo_mean_tok_s": round(math.exp(self.score), 3),
                "worst_regret": None if self.worst_regret is None else round(self.worst_regret, 4),
                "alternatives": [{"family": t.family, "below": round(b, 4)} for t, b in self.alternatives]}


def for_engine(tables: Sequence[Table], engine: str) -> tuple[list[Table], list[Table]]:
    """(the tables an export for ``engine`` is made from, the ones left out): measured on that engine
    or on the simulator."""
    mine = [t for t in tables if t.server in (engine, "sim")]
    return mine, [t for t in tables if t not in mine]


def _picks(t: Table) -> dict[int, float]:
    out = {}
    for c in t.choices:
        pick = c.level.pick
        if pick is not None and pick.tok_s and pick.tok_s > 0:
            out[c.load] = math.log(pick.tok_s)
    return out


def recommend(tables: Sequence[Table]) -> list[Pick]:
    """One :class:`Pick` per (box, model, workload, context) among the usable tables."""
    groups: dict[tuple[str, str, str, int], list[Table]] = {}
    for t in tables:
        if t.usable:
            groups.setdefault((t.hardware, t.model, t.workload, t.context), []).append(t)
    out = []
    for members in groups.values():
        logs = {id(t): _picks(t) for t in members}
        shared = set.intersection(*(set(v) for v in logs.values())) if logs else set()
        scored = []
        for t in members:
            mine = logs[id(t)]
            loads = sorted(shared) if shared else sorted(mine)
            if loads:
                scored.append((sum(mine[x] for x in loads) / len(loads), t, loads))
        if not scored:
            continue
        scored.sort(key=lambda s: (-s[0], s[1].top, s[1].family))
        best, table, loads = scored[0]
        regrets = [c.level.regret for c in table.choices if c.level.regret is not None]
        out.append(Pick(table, best, loads, max(regrets) if regrets else None,
                        [(t, 1.0 - math.exp(s - best)) for s, t, _ in scored[1:]]))
    return out


def _names(families: Sequence[str]) -> list[str]:
    """The families as the lines name them: what they all share left out (the box, the workload, the
    loads), their method kept -- the family with the method's defaults is then just ``ngram``."""
    from sweep.report.shortnames import SEP

    split = [f.split(SEP) for f in families]
    if len(split) < 2 or any(len(p) < 2 for p in split):
        return list(families)
    shared = set(split[0]).intersection(*map(set, split[1:])) - {split[0][1]}
    names = [SEP.join(t for t in parts if t not in shared) for parts in split]
    return names if all(names) and len(set(names)) == len(set(families)) else list(families)


def lines(pick: Pick, engine: str, rendered: dict[str, Any], max_alternatives: int = 3) -> list[str]:
    """The recommendation as the terminal shows it: the one table, its launch argument and overrides
    whole (to copy), the alternatives in a short list."""
    import shlex

    t = pick.table
    fams = [t.family, *(a.family for a, _ in pick.alternatives)]
    name = dict(zip(fams, _names(fams)))
    sure = (f"each pick at most {pick.worst_regret:.1%} below the best of its family and the baseline there"
            if pick.worst_regret is not None else "its picks' regret unknown (measured once)")
    loads = ",".join(str(x) for x in pick.loads)
    out = [f"deploy for {t.workload} (ctx {t.context}) on {t.hardware} · {t.model}: {name[t.family]} -- "
           f"{math.exp(pick.score):,.1f} tok/s, the geometric mean of its picks at concurrency {loads}; {sure}"]
    arg = rendered.get("argument")
    if arg:
        out.append(f"  {arg['flag']} {shlex.quote(arg['text'])}")
    out.append("  overrides: " + " ".join(shlex.quote(o) for o in rendered.get("overrides") or []))
    if pick.alternatives:
        from sweep.score.campaign import MARGIN

        shown = ", ".join(f"{name[a.family]} ({below:.0%} below" + (", within the margin: as good)" if below <= MARGIN
                                                                    else ")")
                          for a, below in pick.alternatives[:max_alternatives])
        more = len(pick.alternatives) - max_alternatives
        out.append(f"  alternatives: {shown}" + (f", +{more} more (tables above)" if more > 0 else ""))
    if t.simulated:
        out.append(f"  (simulated measurements: measure it on {engine} before deploying)")
    return out
