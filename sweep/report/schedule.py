"""The deployment answer: which config to run at which load, from result files alone.

Every decision elsewhere is about one point (the objective). A deployment
faces a curve: the draft length that wins at one user is not the one that
wins at 64, and past some load speculation stops paying at all (SGLang #3883,
#5160; RFC #15319 tunes speculative settings per batch size). So per group of
comparable trials (:mod:`sweep.report.compare`: same box, model, workload,
load) and per context, for each measured load level:

* the **candidates** are the trials that pass the correctness gate
  (``objective.constraints.coding_pass_rate_min``: a config that changes the
  answers is never scheduled) and whose cell at that level has no failed
  request and meets the SLO when one is set (``objective.slo`` as recorded,
  or another one given here: judged again from the cells' latency rows,
  :mod:`sweep.stats.slo`);
* the **leader** is the candidate with the highest output tok/s; runners-up
  whose 95% interval overlaps it are **tied** (the one tie rule,
  :func:`sweep.score.noise.tied_within_noise`: intervals from the repeats and
  the pooled copies of each config, or for a config measured once from the
  box's spread, ``hardware.spread`` -- ``noise`` says which); the leader is the
  **best** only when it beats every runner-up beyond that noise. A level
  whose leader does not is **open** (``best: null`` and ``why``): undecided
  between the tied configs, or measured once with the noise unknown;
* the **speedup** over the autoregressive (spec=none) config's cell at the
  same load comes with its interval where both have one;
* a **crossover** is a load where the decided winner changes: to the baseline
  (speculation stops paying; also when the baseline ties the leader), or to a
  shorter draft (a smaller ``spec.budget``); open levels between its two sides
  make it ``uncertain`` about where exactly it falls.

Consecutive levels with the same verdict make a **band** (one decided best,
or the same open set); ``schedule.yaml`` (:func:`schedule_document`) maps
bands to the overrides that start that config -- what a deployment acts on. A
band claims only the loads measured for it: from its first level to its last
(``to``; for the last band the best's own max-load probes that met the SLO
count too), and past the last band the schedule says ``not measured``. A
level is listed when at least two configs measured it (max-load probes
between the doubling steps are one config's own), or when the group has one
config. Rows are configs, not result files: copies of one config were pooled
when the group was built (:mod:`sweep.score.configs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from sweep.record.result import Cell, TrialResult
from sweep.report.compare import Group, Row, build_groups
from sweep.score.metrics import cell_goodput, load_of, ok_cells, slo_of
from sweep.score.campaign import Campaign, Verdict
from sweep.score.noise import spread_of
from sweep.score.verdicts import campaign
from sweep.stats.slo import Slo

FORMAT = "specsweep.schedule/1"
# Override keys that say how a trial was run, not which server config it is.
RUN_ONLY = ("hydra", "optuna", "launcher", "mlflow", "results", "resume", "baseline", "workload",
            "objective", "dry_run", "secret_names", "server.port", "server.host", "server.sim.seed")


@dataclass
class Entry:
    """One config's cell at one load level."""

    row: Row
    cell: Cell
    tok_s: float
    ci: tuple[float, float] | None
    attainment: float | None
    meets: bool  # no failed request, and the SLO (when set) is met

    @property
    def name(self) -> str:
        return self.row.name

    @property
    def n(self) -> int:
        """Measurements behind ``tok_s`` (repeats and pooled copies)."""
        return int(self.cell.repeats or 1)


@dataclass
class Level:
    """One load level of a schedule and what the campaign model says of it (sweep/score/campaign.py)."""

    load: float
    entries: list[Entry]
    leader: Entry | None = None   # the highest estimated tok/s among the configs that meet
    best: Entry | None = None     # the pick where the level is decided or equivalent (None: open)
    tied: list[Entry] = field(default_factory=list)  # an open level's other contenders
    baseline: Entry | None = None
    verdict: Verdict[str] | None = None
    pick: Entry | None = None     # what to run here (an open level's too: the smallest regret bound)

    @property
    def state(self) -> str:
        """``decided`` (the leader beats every other config beyond noise) | ``equivalent`` (the pick is
        within the practical margin of the best) | ``open`` | ``unknown`` (no noise to judge with) |
        ``none`` (no config meets the SLO without failed requests)."""
        if self.leader is None:
            return "none"
        return self.verdict.state if self.verdict is not None else "unknown"

    @property
    def why(self) -> str | None:
        """What the verdict says, in words (None: decided)."""
        if self.leader is None:
            return "no config meets the SLO without failed requests here"
        if self.verdict is None:
            return None
        if self.state == "decided":
            return None
        return self.verdict.why(self._name)

    def _name(self, key: str) -> str:
        e = self.entry(key)
        return e.name if e is not None else key

    def entry(self, key: str | None) -> Entry | None:
        return next((e for e in self.entries if e.row.config_id == key), None)

    @property
    def regret(self) -> float | None:
        """The most the pick may be below the true best (a fraction, 95%); None: unknown."""
        return self.verdict.regret_pct() if self.verdict is not None else None

    @property
    def speedup(self) -> float | None:
        """The pick's tok/s over the baseline's at this load (the model's estimates)."""
        r = self._ratio()
        return r[0] if r is not None else None

    @property
    def speedup_ci(self) -> tuple[float, float] | None:
        """The speedup's interval (log scale: never below zero), paired within rounds, at the verdict's
        simultaneous 95% level (so it agrees with the table's verdicts; a little wider than a lone
        pair's)."""
        r = self._ratio()
        return r[1] if r is not None else None

    def _ratio(self) -> tuple[float, tuple[float, float] | None] | None:
        if self.pick is None or self.baseline is None or self.verdict is None or not self.baseline.meets:
            return None
        # the verdict's own (simultaneous) quantile: a speedup interval that excludes 1 always means the
        # baseline is shown worse in the table beside it, and one that holds 1 never contradicts a pick
        return self.verdict.ratio(self.pick.row.config_id, self.baseline.row.config_id)

    def settle(self, camp: Campaign[str, tuple[int, float]] | None, context: int) -> tuple[int, int, float] | None:
        """What settling this open level likely costs: (rounds, runs, GPU-hours) of racing its
        contenders (sweep.decide), from the campaign model's gaps and noise and the contenders' own
        cells (their measured time and the box's GPUs); None: more than 50 rounds, or not open."""
        if camp is None or self.verdict is None or self.state not in ("open", "unknown"):
            return None
        rounds = camp.rounds_needed((int(context), float(self.load)), self.verdict)
        if rounds is None:
            return None
        race = [e for e in self.entries if e.row.config_id in (self.verdict.contenders or [])] or self.entries
        hours = 0.0
        for e in race:
            gpus = e.row.doc.config_section("hardware").get("num_gpus")
            g = int(gpus) if isinstance(gpus, (int, float)) and not isinstance(gpus, bool) and gpus > 0 else 1
            secs = float(e.cell.duration_s or 0.0) / max(1, e.n) + float(e.row.doc.metrics.startup_s or 0.0)
            hours += rounds * secs * g / 3600.0
        return rounds, rounds * len(race), hours

    @property
    def baseline_wins(self) -> bool:
        """The pick is the baseline at a decided or equivalent level: speculation does not pay here
        (not by more than the margin, at 95%)."""
        return (self.best is not None and self.baseline is not None and self.best is self.baseline)


@dataclass
class Crossover:
    load: float
    before: str
    after: str
    kind: str  # baseline | shorter draft | longer draft | other config
    uncertain: bool = False        # open levels lie between its two sides
    previous: float | None = None  # the last decided level before it: the crossover lies in between

    def line(self, unit: str) -> str:
        what = {"baseline": "the autoregressive baseline wins", "shorter draft": "a shorter draft wins",
                "longer draft": "a longer draft wins"}.get(self.kind, "another config wins")
        where = (f"between {unit} {self.previous:g} and {self.load:g} (the levels between are undecided)"
                 if self.uncertain and self.previous is not None else f"at {unit} {self.load:g}")
        return f"{where}: {what} ({self.before} -> {self.after})"


@dataclass
class Band:
    start: float
    to: float                 # the highest load measured for it (inclusive)
    levels: list[float]
    best: Entry | None        # None: open (undecided, noise unknown, or nothing meets the SLO)
    state: str = "decided"
    why: str | None = None
    candidates: list[str] = field(default_factory=list)  # an open band's configs (leader first)
    tok_s: list[float] = field(default_factory=list)     # the best's tok/s at each measured level
    ci: list[tuple[float, float] | None] = field(default_factory=list)
    regret: float | None = None  # an open band: the largest regret bound of its levels (its line's)

    @property
    def name(self) -> str | None:
        return self.best.name if self.best is not None else None

    @property
    def key(self) -> tuple[str, ...]:
        """Levels merge into one band only when they say the same: the same best, or (open) the same
        pick among the same contenders -- one line for two open levels named the first one's pick."""
        if self.best is not None:
            return ("pick", self.best.name)
        return (self.state, *self.candidates[:1], *sorted(self.candidates[1:]))

    def to_dict(self, last: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"from": _num(self.start), "to": _num(self.to),
                               "measured": [_num(x) for x in self.levels], "config": self.name,
                               "state": self.state}
        if last:
            out["beyond"] = f"not measured above {_num(self.to)}"
        if self.best is None:
            return {**out, "overrides": None, "spec": None, "why": self.why, "candidates": self.candidates}
        return {**out, "overrides": overrides_of(self.best.row.doc), "spec": knobs_of(self.best.row.doc),
                "tok_s": [round(x, 3) for x in self.tok_s],
                "tok_s_ci": [[round(c[0], 3), round(c[1], 3)] if c else None for c in self.ci]}


@dataclass
class Schedule:
    group: Group
    context: int
    over: str  # concurrency | rate
    slo: Slo | None
    levels: list[Level]
    curves: dict[str, list[tuple[float, float, tuple[float, float] | None]]]  # name -> (load, tok/s, ci)
    rows: list[Row]
    bands: list[Band] = field(default_factory=list)
    crossovers: list[Crossover] = field(default_factory=list)
    spread: float | None = None  # the box's spread: a prior where nothing was measured twice
    campaign: Campaign[str, tuple[int, float]] | None = None

    @property
    def unit(self) -> str:
        return "rate" if self.over == "rate" else "concurrency"

    @property
    def title(self) -> str:
        engine = self.group.first.config_section("server").get("name")
        return (f"{engine} · " if engine else "") + f"{self.group.hardware_label} · {self.group.model_label} · " \
            f"ctx {self.context}"

    @property
    def envelope(self) -> list[tuple[float, float]]:
        return [(lv.load, lv.best.tok_s) for lv in self.levels if lv.best is not None]

    @property
    def noise(self) -> str:
        """What the verdicts were judged with, in one line (the campaign model's noise)."""
        if self.campaign is None:
            return "noise unknown"
        line = self.campaign.noise.line()
        return f"{line}; margin {self.campaign.margin:.0%}"

    @property
    def speculation_stops_paying(self) -> float | None:
        """The lowest load from which on the baseline is the pick at every measured level (decided or
        equivalent: no config beats it by more than the margin, at 95%)."""
        out = None
        for lv in reversed(self.levels):
            if not lv.baseline_wins:
                break
            out = lv.load
        return out


def _num(x: float | None) -> float | int | None:
    if x is None:
        return None
    return int(x) if float(x).is_integer() else round(float(x), 4)


def overrides_of(doc: TrialResult) -> list[str]:
    """The overrides that start this config on top of the sweep's own command line: the trial's
    overrides without those that say how it was run (ports, tracking, the workload, the objective)."""
    out = []
    for o in doc.trial.overrides:
        key = o.lstrip("+~").split("=", 1)[0]
        if any(key == p or key.startswith(p + ".") or key.startswith(p + "/") for p in RUN_ONLY):
            continue
        out.append(o)
    return out


def knobs_of(doc: TrialResult) -> dict[str, Any]:
    """The speculative settings as resolved (``spec.*`` scalars): what the overrides amount to."""
    return {k: v for k, v in doc.config_section("spec").items()
            if isinstance(v, (str, int, float, bool)) or v is None}


def correct(row: Row) -> bool:
    """The correctness gate of the trial's own objective (coding pass rate)."""
    floor = row.objective.constraints.coding_pass_rate_min
    rate = row.metrics.coding_pass_rate
    return floor is None or rate is None or float(rate) >= float(floor)


def _entry(row: Row, cell: Cell, slo: Slo | None) -> Entry:
    ci = cell.output_tok_s_ci
    judged = cell_goodput(cell, slo, slo_of(row.doc)) if slo is not None and slo.active else None
    attain = judged[0] if judged is not None else None
    max_errors = row.objective.constraints.max_errors
    clean = max_errors is None or float(cell.errors or 0) <= float(max_errors)
    meets = clean and (slo is None or not slo.active or (attain is not None and attain >= slo.target))
    return Entry(row, cell, float(cell.output_tok_s or 0.0),
                 (float(ci[0]), float(ci[1])) if ci and len(ci) == 2 and None not in ci else None, attain, meets)


def judge(level: Level, camp: Campaign[str, tuple[int, float]], key: tuple[int, float],
          among: Sequence[Entry] | None = None) -> None:
    """The level's verdict from the campaign model, among the entries that meet (or ``among``);
    each entry's figure and interval become the model's (rounds as blocks, pooled noise)."""
    pool = [e for e in (among if among is not None else level.entries) if e.meets]
    if not pool:
        return
    v = camp.verdict(key, [e.row.config_id for e in pool])
    if v.state == "none":
        return
    level.verdict = v
    for e in level.entries:
        est = v.estimates.get(e.row.config_id)
        if est is not None:
            e.tok_s = est.tok_s
            e.ci = v.interval(e.row.config_id)
    level.leader = level.entry(v.leader)
    level.pick = level.entry(v.pick)
    level.best = level.pick if v.state in ("decided", "equivalent") else None
    level.tied = [e for e in pool if e.row.config_id in v.contenders and e is not level.pick] \
        if v.state in ("open", "unknown") else []


def _winner(lv: Level) -> str | None:
    """Who a decided level belongs to: the baseline where it leads or ties, else the best."""
    if lv.baseline_wins and lv.baseline is not None:
        return lv.baseline.name
    return lv.best.name if lv.best is not None else None


def _crossovers(levels: Sequence[Level]) -> list[Crossover]:
    """Where the decided winner changes hands (undecided levels between make the place uncertain)."""
    out: list[Crossover] = []
    prev: Level | None = None
    open_between = False
    for lv in levels:
        now = _winner(lv)
        if now is None:
            open_between = open_between or prev is not None
            continue
        before = _winner(prev) if prev is not None else None
        if prev is not None and before is not None and now != before:
            if lv.baseline_wins:
                kind = "baseline"
            else:
                a = prev.best.row if prev.best is not None else None
                b = lv.best.row if lv.best is not None else None
                x, y = (a.budget if a else None), (b.budget if b else None)
                same = a is not None and b is not None and a.spec == b.spec
                kind = ("shorter draft" if same and isinstance(x, (int, float)) and isinstance(y, (int, float))
                        and y < x else "longer draft" if same and isinstance(x, (int, float))
                        and isinstance(y, (int, float)) and y > x else "other config")
            out.append(Crossover(lv.load, before, now, kind, uncertain=open_between, previous=prev.load))
        prev, open_between = lv, False
    return out


def _bands(levels: Sequence[Level]) -> list[Band]:
    bands: list[Band] = []
    for lv in levels:
        cands = [] if lv.best is not None or lv.pick is None else [lv.pick.name, *(e.name for e in lv.tied)]
        band = Band(start=lv.load, to=lv.load, levels=[lv.load], best=lv.best, state=lv.state, why=lv.why,
                    candidates=cands, tok_s=[lv.best.tok_s] if lv.best is not None else [],
                    ci=[lv.best.ci] if lv.best is not None else [], regret=lv.regret if lv.best is None else None)
        if bands and bands[-1].key == band.key:
            last = bands[-1]
            last.levels.append(lv.load)
            last.to = lv.load
            if last.state != lv.state and lv.best is not None:
                last.state = "equivalent"  # a band of decided and equivalent levels: a pick, within the margin
            if lv.best is not None:
                last.tok_s.append(lv.best.tok_s)
                last.ci.append(lv.best.ci)
            elif (lv.regret or 0.0) > (last.regret or 0.0):  # the band's line gives its largest bound
                last.why, last.regret = lv.why, lv.regret
            continue
        bands.append(band)
    if bands and bands[-1].best is not None:  # the best's own max-load probes that met the SLO count
        ml = bands[-1].best.row.doc.max_load
        if ml is not None and ml.value is not None and float(ml.value) > bands[-1].to:
            bands[-1].to = float(ml.value)
    return bands


def schedules_of(group: Group, slo: Slo | None = None) -> list[Schedule]:
    """One schedule per context of the group (``slo``: judge under this SLO instead of the trials')."""
    # one row per config: copies were pooled when the group was built (sweep/score/configs.py)
    rows = [r for r in group.rows if r.doc.ok and correct(r) and ok_cells(r.doc.cells)]
    if not rows:
        return []
    spread = spread_of(rows[0].doc)
    own = slo_of(group.rows[0].doc)
    slo = slo if slo is not None else own
    slo = slo if slo.active else None  # Slo() with no limit: every cell counts
    rate = any(c.request_rate and c.load_search == "max_load" for r in rows for c in r.doc.cells)
    camp = group_campaign(rows, spread)
    out = []
    for ctx in sorted({c.context for r in rows for c in ok_cells(r.doc.cells)}):
        cells = {id(r): {load_of(c): c for c in ok_cells(r.doc.cells) if c.context == ctx} for r in rows}
        loads = sorted({x for by in cells.values() for x in by})
        measured_by = {x: sum(1 for by in cells.values() if x in by) for x in loads}
        keep = [x for x in loads if measured_by[x] >= 2 or len(rows) == 1]
        levels = []
        for x in keep:
            entries = [_entry(r, cells[id(r)][x], slo) for r in rows if x in cells[id(r)]]
            lv = Level(load=x, entries=entries, baseline=next((e for e in entries if e.row.is_baseline), None))
            judge(lv, camp, (int(ctx), float(x)))
            levels.append(lv)
        judged = {(id(e.row), lv.load): e for lv in levels for e in lv.entries}
        curves = {r.name: [(x, judged[(id(r), x)].tok_s, judged[(id(r), x)].ci) if (id(r), x) in judged
                           else (x, float(c.output_tok_s or 0.0), None)
                           for x, c in sorted(cells[id(r)].items())] for r in rows if cells[id(r)]}
        sched = Schedule(group, ctx, "rate" if rate else "concurrency", slo, levels, curves, rows, spread=spread,
                         campaign=camp)
        sched.bands = _bands(levels)
        sched.crossovers = _crossovers(levels)
        out.append(sched)
    return out


def group_campaign(rows: Sequence[Row], prior: float | None) -> Campaign[str, tuple[int, float]]:
    """The campaign model of one group's configs (their copies, rounds as blocks; sweep/score/verdicts.py)."""
    return campaign([(r.config_id, r.parts or [(r.source, r.doc)], r.doc) for r in rows], prior=prior)


def build_schedules(docs: Sequence[TrialResult], slo: Slo | None = None,
                    sources: Sequence[str] | None = None) -> list[Schedule]:
    """Every group's schedules (see the module doc)."""
    return [s for g in build_groups(docs, sources) for s in schedules_of(g, slo)]


def schedule_document(schedules: Sequence[Schedule], *, command: str = "") -> dict[str, Any]:
    """``schedule.yaml``: per group and context, load bands -> config overrides, every verdict with its noise."""
    out: dict[str, Any] = {"format": FORMAT, "command": command, "schedules": []}
    for s in schedules:
        first = s.group.first
        out["schedules"].append({
            "hardware": s.group.hardware_label, "model": s.group.model_label,
            "workload": s.group.rows[0].workload, "context": s.context, "over": s.over,
            "simulated": bool(first.simulated),
            "slo": s.slo.to_dict() if s.slo is not None else None,
            "noise": s.noise,
            "bands": [b.to_dict(last=i == len(s.bands) - 1) for i, b in enumerate(s.bands)],
            "crossovers": [{"at": _num(c.load), "kind": c.kind, "from": c.before, "to": c.after,
                            "uncertain": c.uncertain, "after": _num(c.previous)} for c in s.crossovers],
            "speculation_stops_paying_at": _num(s.speculation_stops_paying),
            "levels": [_level_dict(lv) for lv in s.levels],
        })
    return out


def _ci(ci: tuple[float, float] | None, nd: int = 3) -> list[float] | None:
    return [round(ci[0], nd), round(ci[1], nd)] if ci is not None else None


def _level_dict(lv: Level) -> dict[str, Any]:
    lead = lv.leader
    regret = lv.regret
    return {"load": _num(lv.load), "best": lv.best.name if lv.best else None, "state": lv.state,
            "pick": lv.pick.name if lv.pick else None,
            "regret_at_most": round(regret, 4) if regret is not None else None,
            "why": lv.why, "leader": lead.name if lead else None,
            "tok_s": round(lead.tok_s, 3) if lead else None, "tok_s_ci": _ci(lead.ci) if lead else None,
            "measurements": lead.n if lead else None,
            "tied": [e.name for e in lv.tied],
            "tied_tok_s": [[round(e.tok_s, 3), _ci(e.ci)] for e in lv.tied],
            "speedup": round(lv.speedup, 4) if lv.speedup is not None else None,
            "speedup_ci": _ci(lv.speedup_ci, 4),
            "baseline_tok_s": round(lv.baseline.tok_s, 3) if lv.baseline else None,
            "baseline_tok_s_ci": _ci(lv.baseline.ci) if lv.baseline else None,
            "missed_slo": sorted(e.name for e in lv.entries if not e.meets)}
