"""Per-load speculation derived from measurements: the budget table a family's cells call for.

The schedule (:mod:`sweep.report.schedule`) names the best config per load; an engine that
switches the draft length by load itself (vLLM 0.32's ``num_speculative_tokens_per_batch_size``,
``spec.per_load``) needs one config and a table. Here, per group of comparable trials
(same box, model, workload) and context, for each **family** -- configs that differ only in
``spec.budget`` (the same method and every other knob; told apart by the one naming function,
:func:`sweep.score.configs.name_of`, with the budget left out) -- and the group's
autoregressive baseline (spec=none):

* each measured load level is judged among the family and the baseline only, by the
  schedule's own rule (:func:`sweep.report.schedule._rank`: the tie rule with its noise);
* its **budget** is the decided best's; **0** where the baseline leads or ties the leader
  (speculation does not pay there beyond noise); where the family's budgets are tied
  (**undecided**) the smallest of the tied budgets -- the cheaper draft -- and the table says
  so; where the leader was measured once on a box whose spread is unknown, the leader's
  budget, said to be unverified; where no config meets the SLO, 0;
* consecutive levels with one budget make a **band** ``[from, to, budget]`` from its first to its
  last measured level (the schedule's bands do the same).

**Load and batch size.** A level is a closed-loop concurrency: that many requests in flight,
each sent as the previous one ends. In steady state the engine then decodes that many
sequences per scheduler step, so its batch size is the load (vLLM counts the requests it
schedules in a step); a cell's ramp-up and drain run smaller batches, which take the budgets
of the smaller loads -- as they would in a deployment. An open-loop (Poisson rate) level has no
batch size: such groups are not derived.

**Only where measured.** Bands cover measured levels. The first band must start at 1 (vLLM's
rule: every batch size needs a budget), so when the lowest level measured is above 1 the
first band is stretched down to 1 and the table says those batch sizes were not measured.
Between two bands, and above the last, nothing is listed: vLLM carries the previous band's
budget through a gap and the last band's up to ``--max-num-seqs`` -- said in the table's notes
as "not measured". A table whose every budget is 0 is no table (spec=none is the answer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from sweep.record.result import TrialResult
from sweep.report.compare import Row, build_groups
from sweep.report.schedule import Entry, Level, _entry, correct, group_campaign, judge, overrides_of
from sweep.score import configs as score_configs
from sweep.score.metrics import load_of, ok_cells, slo_of
from sweep.score.noise import spread_of
from sweep.stats.slo import Slo

# how much a cell measured: what a verification must repeat (a recorded landscape keeps them composed)
_MEASURED_SIZE = ("max_tokens", "requests_per_cell", "min_requests", "warmup_requests")
_NOT_FAMILY = ("spec.budget=", "spec.per_load=")


@dataclass
class Choice:
    """One measured load level: the budget the table gives it and why."""

    load: int
    budget: int
    state: str          # decided | equivalent | open | unknown | baseline | none
    why: str
    level: Level

    @property
    def leader(self) -> Entry | None:
        return self.level.leader

    def to_dict(self) -> dict[str, Any]:
        lead = self.leader
        return {"load": self.load, "budget": self.budget, "state": self.state, "why": self.why,
                "leader": lead.name if lead else None,
                "tok_s": round(lead.tok_s, 3) if lead else None,
                "tok_s_ci": [round(lead.ci[0], 3), round(lead.ci[1], 3)] if lead and lead.ci else None,
                "measured": {e.name: round(e.tok_s, 3) for e in self.level.entries}}


@dataclass
class Table:
    """The derived table of one family in one group and context."""

    hardware: str
    model: str
    workload: str
    context: int
    family: str
    algorithm: str
    server: str
    simulated: bool
    statics: dict[int, Row]
    baseline: Row | None
    choices: list[Choice] = field(default_factory=list)
    bands: list[tuple[int, int, int]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    noise: str = ""

    @property
    def budgets(self) -> list[int]:
        return sorted(self.statics)

    @property
    def loads(self) -> list[int]:
        return [c.load for c in self.choices]

    @property
    def top(self) -> int:
        return max((k for _, _, k in self.bands), default=0)

    @property
    def usable(self) -> bool:
        """A table an engine can run: some band drafts."""
        return self.top > 0

    @property
    def per_load(self) -> list[list[int]]:
        return [[lo, hi, k] for lo, hi, k in self.bands]

    def base_overrides(self) -> list[str]:
        """The family's overrides (its newest static config's, the budget left out): what the
        dynamic config adds ``spec.budget`` and ``spec.per_load`` to."""
        row = self.statics[self.budgets[-1]]
        return [o for o in _overrides(row.doc) if not o.lstrip("+~").startswith(_NOT_FAMILY)]

    def overrides(self, per_load: Sequence[Sequence[int]] | None = None) -> list[str]:
        """The overrides that run this table (``per_load``: another table, e.g. a hand-written one)."""
        bands = [list(map(int, b)) for b in (per_load if per_load is not None else self.per_load)]
        top = max(k for _, _, k in bands)
        text = "[" + ",".join(f"[{a},{b},{c}]" for a, b, c in bands) + "]"
        return [*self.base_overrides(), f"spec.budget={top}", f"spec.per_load={text}"]

    def workload_overrides(self) -> list[str]:
        """How the family was measured: the workload overrides of its newest static config; a recorded
        landscape's round (whose recorder set them on its own command line) by its composed values."""
        row = self.statics[self.budgets[-1]]
        out = [o for o in _all_overrides(row.doc) if o.lstrip("+~").startswith("workload")
               and not o.lstrip("+~").startswith("workload.cells=")]
        if not row.doc.trial.overrides:
            wl = row.doc.config_section("workload")
            given = {o.split("=", 1)[0] for o in out}
            out += [f"workload.{k}={wl[k]}" for k in _MEASURED_SIZE
                    if wl.get(k) is not None and f"workload.{k}" not in given]
        return out

    @property
    def title(self) -> str:
        return f"{self.hardware} · {self.model} · {self.workload} · ctx {self.context} · family {self.family}"


def _all_overrides(doc: TrialResult) -> list[str]:
    """A trial's overrides; a recorded landscape's round keeps its config's in ``trial.extra``."""
    own = list(doc.trial.overrides or [])
    if own:
        return own
    extra = doc.trial.extra.get("landscape_overrides") if isinstance(doc.trial.extra, dict) else None
    return [str(o) for o in extra] if isinstance(extra, list) else []


def _overrides(doc: TrialResult) -> list[str]:
    if doc.trial.overrides:
        return overrides_of(doc)
    return [o for o in _all_overrides(doc) if not o.lstrip("+~").startswith("workload")]


def family_of(doc: TrialResult) -> str:
    """The family's name: the config's one name with the budget (and a per-load table) left out."""
    plain = TrialResult.from_dict(doc.to_dict())
    spec = plain.config.get("spec")
    if isinstance(spec, dict):
        plain.config["spec"] = {**spec, "budget": None, "per_load": None}
    return score_configs.name_of(plain)


def _is_dynamic(row: Row) -> bool:
    return bool(row.doc.spec_value("per_load"))


def _budget(row: Row) -> int | None:
    b = row.budget
    return int(b) if isinstance(b, (int, float)) and not isinstance(b, bool) and float(b).is_integer() else None


def _choice(lv: Level, budget_of: dict[int, int]) -> Choice:
    """The budget a level gets: the campaign model's pick among the family and the baseline (the
    baseline: 0) -- decided, equivalent (the cheapest within the margin), or at an open level the
    pick with the smallest regret bound, never a config tied with the baseline while another is
    separated from it."""
    load = int(lv.load)
    pick = lv.pick
    if pick is None or lv.verdict is None:
        return Choice(load, 0, "none", "no config meets the SLO without failed requests: no draft", lv)
    name = lv._name
    bound = lv.verdict.pick_line(name)
    budget = 0 if pick is lv.baseline else budget_of[id(pick.row)]
    if lv.state == "unknown":
        return Choice(load, budget, "unknown",
                      f"{pick.name} leads but was measured once and the box's spread is unknown: its budget, "
                      "unverified (workload.repeats=3 or python -m sweep.decide)", lv)
    if pick is lv.baseline:
        return Choice(load, 0, "baseline" if lv.state != "open" else "open",
                      f"the autoregressive baseline is the pick ({lv.state}; {bound}): no draft", lv)
    if lv.state == "decided":
        return Choice(load, budget, "decided", f"{pick.name} beats the others beyond noise", lv)
    if lv.state == "equivalent":
        return Choice(load, budget, "equivalent", f"{bound}, within the {lv.verdict.margin:.0%} margin: "
                      "the cheapest such budget", lv)
    return Choice(load, budget, "open", f"open ({bound}): the budget with the smallest regret bound; "
                  "python -m sweep.decide settles it", lv)


def _bands(choices: Sequence[Choice]) -> list[tuple[int, int, int]]:
    bands: list[tuple[int, int, int]] = []
    for c in choices:
        if bands and bands[-1][2] == c.budget:
            bands[-1] = (bands[-1][0], c.load, c.budget)
        else:
            bands.append((c.load, c.load, c.budget))
    if bands:
        bands[0] = (1, bands[0][1], bands[0][2])
    return bands


def _notes(t: Table) -> list[str]:
    loads = t.loads
    out = ["load = in-flight requests (closed loop): in steady state the engine decodes that many "
           "sequences per step, so the batch size is the load (a cell's ramp-up and drain run smaller "
           "batches, which take the smaller loads' budgets)"]
    if loads and loads[0] > 1:
        out.append(f"batch sizes 1-{loads[0] - 1}: not measured; the first band starts at 1 (vLLM requires it), "
                   f"so they take the budget measured at {loads[0]}")
    for (_, hi, k), (lo, _, _) in zip(t.bands, t.bands[1:]):
        if lo > hi + 1:
            span = f"{hi + 1}" if lo == hi + 2 else f"{hi + 1}-{lo - 1}"
            out.append(f"batch sizes {span}: not measured; vLLM carries the previous band's budget ({k})")
    if t.bands:
        out.append(f"above {t.bands[-1][1]}: not measured; vLLM carries the last budget ({t.bands[-1][2]}) "
                   "up to its --max-num-seqs")
    out += [f"load {c.load}: {c.why}" for c in t.choices if c.state in ("open", "unknown", "none")]
    if not t.usable:
        out.append("the baseline wins or ties at every measured load: no table (run spec=none)")
    elif len({k for _, _, k in t.bands}) == 1:
        out.append(f"one budget at every measured load: the static config spec.budget={t.top} is the same")
    return out


def derive(docs: Sequence[TrialResult], sources: Sequence[str] | None = None, *, slo: Slo | None = None,
           family: str | None = None) -> list[Table]:
    """Every family's table (module doc); ``family``: only families whose name contains it."""
    out: list[Table] = []
    for g in build_groups(docs, sources):
        rows = [r for r in g.rows if r.doc.ok and correct(r) and ok_cells(r.doc.cells) and not _is_dynamic(r)]
        if not rows:
            continue
        base = next((r for r in rows if r.is_baseline), None)
        fams: dict[str, dict[int, Row]] = {}
        for r in rows:
            k = _budget(r)
            if r.is_baseline or k is None:
                continue
            fams.setdefault(family_of(r.doc), {})[k] = r  # newest copy last: rows are one per config
        spread = spread_of(rows[0].doc)
        own = slo_of(g.rows[0].doc)
        chosen = slo if slo is not None else own
        judge_slo = chosen if chosen.active else None
        camp = group_campaign(rows, spread)  # the noise pooled over the whole group, rounds as blocks
        for name, statics in sorted(fams.items()):
            if family and family not in name:
                continue
            if len(statics) + (base is not None) < 2:
                continue
            members = [*statics.values(), *([base] if base is not None else [])]
            if any(c.request_rate for r in members for c in ok_cells(r.doc.cells)):
                continue  # open-loop load: no batch size to key a table by
            budget_of = {id(r): k for k, r in statics.items()}
            for ctx in sorted({c.context for r in members for c in ok_cells(r.doc.cells)}):
                cells = {id(r): {int(load_of(c)): c for c in ok_cells(r.doc.cells) if c.context == ctx}
                         for r in members}
                loads = sorted({x for by in cells.values() for x in by})
                levels = []
                for x in loads:
                    entries = [_entry(r, cells[id(r)][x], judge_slo) for r in members if x in cells[id(r)]]
                    if len([e for e in entries if not e.row.is_baseline]) == 0:
                        continue
                    lv = Level(load=x, entries=entries, baseline=next((e for e in entries if e.row.is_baseline), None))
                    judge(lv, camp, (int(ctx), float(x)))
                    levels.append(lv)
                if not levels:
                    continue
                first = members[0].doc
                t = Table(hardware=g.hardware_label, model=g.model_label, workload=members[0].workload,
                          context=int(ctx), family=name, algorithm=members[0].spec,
                          server=str(first.config_section("server").get("name")
                                     or score_configs.choices_of(first).get("server") or "?"),
                          simulated=bool(first.simulated), statics=dict(sorted(statics.items())), baseline=base)
                t.choices = [_choice(lv, budget_of) for lv in levels]
                t.bands = _bands(t.choices)
                t.noise = camp.noise.line() + f"; margin {camp.margin:.0%}"
                t.notes = _notes(t)
                out.append(t)
    return out


def table_text(bands: Sequence[Sequence[int]]) -> str:
    """``[[1,1,8],[2,4,4]]``: the table as one override value."""
    return "[" + ",".join(f"[{a},{b},{c}]" for a, b, c in bands) + "]"


def parse_table(text: str) -> list[list[int]]:
    """A table given on a command line (``[[1,1,8],[2,256,2]]``), checked by the key's own rule."""
    import json

    from sweep.compose.bounds import check
    from sweep.errors import ConfigError

    try:
        value = json.loads(re.sub(r"\s+", "", text))
    except ValueError:
        raise ConfigError("--table", f"a JSON list of [from, to, budget] bands, got {text!r}") from None
    try:
        return [list(b) for b in check("spec.per_load", value)]
    except ConfigError as exc:
        raise ConfigError("--table", exc.message) from None
