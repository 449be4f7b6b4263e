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
from sweep.score.noise import Candidate, Ties, spread_of, tied_within_noise, with_spread
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
    load: float
    entries: list[Entry]
    leader: Entry | None = None   # the highest tok/s among the configs that meet
    best: Entry | None = None     # the leader when it beats every runner-up beyond noise
    tied: list[Entry] = field(default_factory=list)
    baseline: Entry | None = None
    verdict: Ties[Entry] | None = None

    @property
    def state(self) -> str:
        """``decided`` | ``tied`` (undecided between configs) | ``unknown`` (measured once, the noise
        unknown) | ``none`` (no config meets the SLO without failed requests)."""
        if self.leader is None:
            return "none"
        if self.best is not None:
            return "decided"
        return self.verdict.state if self.verdict is not None else "unknown"

    @property
    def why(self) -> str | None:
        """Why a level has no best (None: it has one)."""
        if self.best is not None:
            return None
        if self.leader is None:
            return "no config meets the SLO without failed requests here"
        if self.state == "tied":
            return ("undecided: " + ", ".join([self.leader.name, *(e.name for e in self.tied)])
                    + " are within noise (their 95% intervals overlap)")
        return f"{self.leader.name} leads, but it was measured once and the box's spread is unknown"

    @property
    def speedup(self) -> float | None:
        """The leader's tok/s over the baseline's at this load."""
        if self.leader is None or self.baseline is None or not self.baseline.tok_s:
            return None
        return self.leader.tok_s / self.baseline.tok_s

    @property
    def speedup_ci(self) -> tuple[float, float] | None:
        """95% interval of the speedup (the two relative half-widths added in quadrature)."""
        lead, base = self.leader, self.baseline
        ratio = self.speedup
        if ratio is None or lead is None or base is None or lead.ci is None or base.ci is None or not lead.tok_s:
            return None
        rel = (((lead.ci[1] - lead.ci[0]) / 2 / lead.tok_s) ** 2
               + ((base.ci[1] - base.ci[0]) / 2 / base.tok_s) ** 2) ** 0.5
        return (ratio * (1 - rel), ratio * (1 + rel))

    @property
    def baseline_wins(self) -> bool:
        """The baseline leads, or ties the leader: speculation does not pay here beyond noise."""
        return self.leader is not None and self.baseline is not None and self.baseline.meets and (
            self.leader is self.baseline or any(e is self.baseline for e in self.tied))


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

    @property
    def name(self) -> str | None:
        return self.best.name if self.best is not None else None

    @property
    def key(self) -> tuple[str, ...]:
        return ("decided", self.best.name) if self.best is not None else (self.state, *sorted(self.candidates))

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
    spread: float | None = None  # the box's spread that judged configs measured once (None: not used)

    @property
    def unit(self) -> str:
        return "rate" if self.over == "rate" else "concurrency"

    @property
    def title(self) -> str:
        return f"{self.group.hardware_label} · {self.group.model_label} · ctx {self.context}"

    @property
    def envelope(self) -> list[tuple[float, float]]:
        return [(lv.load, lv.best.tok_s) for lv in self.levels if lv.best is not None]

    @property
    def noise(self) -> str:
        """What the verdicts were judged with, in one line."""
        ns = sorted({e.n for lv in self.levels for e in lv.entries})
        if ns and ns[0] > 1:
            over = f"95% intervals over {ns[0]}{'' if len(ns) == 1 else f'-{ns[-1]}'} measurements per cell"
            if self.spread is not None:
                over += (f", never narrower than the box's spread gives ({self.spread:.1%} per measurement: "
                         "hardware.spread, a landscape's rounds, the simulator's server.sim.noise)")
            return over
        if self.spread is not None:
            return (f"cells measured once judged with the box's spread, {self.spread:.1%} per measurement "
                    "(hardware.spread; the simulator's server.sim.noise)")
        return ("some cells measured once and the box's spread unknown: those verdicts are open "
                "(workload.repeats=3, the same command again, or python -m sweep.decide)")

    @property
    def speculation_stops_paying(self) -> float | None:
        """The lowest load from which on the baseline wins (or ties) at every measured level."""
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


def _rank(level: Level, spread: float | None) -> None:
    ok = [e for e in level.entries if e.meets]
    found = tied_within_noise([Candidate(e, e.tok_s, e.ci, e.n) for e in ok], spread=spread)
    if found is None:
        return
    level.verdict = found
    level.leader = found.best.key
    level.tied = [c.key for c in found.tied]
    level.best = level.leader if (found.decided or len(ok) == 1) else None


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
        cands = [] if lv.best is not None or lv.leader is None else [lv.leader.name, *(e.name for e in lv.tied)]
        band = Band(start=lv.load, to=lv.load, levels=[lv.load], best=lv.best, state=lv.state, why=lv.why,
                    candidates=cands, tok_s=[lv.best.tok_s] if lv.best is not None else [],
                    ci=[lv.best.ci] if lv.best is not None else [])
        if bands and bands[-1].key == band.key:
            last = bands[-1]
            last.levels.append(lv.load)
            last.to = lv.load
            if lv.best is not None:
                last.tok_s.append(lv.best.tok_s)
                last.ci.append(lv.best.ci)
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
    out = []
    for ctx in sorted({c.context for r in rows for c in ok_cells(r.doc.cells)}):
        cells = {id(r): {load_of(c): c for c in ok_cells(r.doc.cells) if c.context == ctx} for r in rows}
        loads = sorted({x for by in cells.values() for x in by})
        measured_by = {x: sum(1 for by in cells.values() if x in by) for x in loads}
        keep = [x for x in loads if measured_by[x] >= 2 or len(rows) == 1]
        levels = []
        for x in keep:
            entries = [_entry(r, cells[id(r)][x], slo) for r in rows if x in cells[id(r)]]
            for e in entries:  # the interval judged with: never narrower than the box's spread gives
                e.ci = with_spread(Candidate(e, e.tok_s, e.ci, e.n), spread).ci
            lv = Level(load=x, entries=entries, baseline=next((e for e in entries if e.row.is_baseline), None))
            _rank(lv, None)
            levels.append(lv)
        curves = {r.name: [(x, float(c.output_tok_s or 0.0), _entry(r, c, None).ci)
                           for x, c in sorted(cells[id(r)].items())] for r in rows if cells[id(r)]}
        sched = Schedule(group, ctx, "rate" if rate else "concurrency", slo, levels, curves, rows, spread=spread)
        sched.bands = _bands(levels)
        sched.crossovers = _crossovers(levels)
        out.append(sched)
    return out


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
    return {"load": _num(lv.load), "best": lv.best.name if lv.best else None, "state": lv.state,
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
