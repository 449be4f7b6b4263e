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
  :mod:`sweep.slo`);
* the **best** is the candidate with the highest output tok/s; runners-up
  whose 95% interval overlaps it are **tied** (the one tie rule,
  :func:`sweep.score.noise.tied_within_noise`; intervals need
  ``workload.repeats`` > 1);
* its **speedup** is over the autoregressive (spec=none) trial's cell at the
  same load;
* a **crossover** is a load where the best changes: to the baseline
  (speculation stops paying; also when the baseline ties the best), or to a
  shorter draft (a smaller ``spec.budget``).

Consecutive levels with the same best make a **band**; ``schedule.yaml``
(:func:`schedule_document`) maps bands to the overrides that start that
config -- what a deployment acts on. A level is listed when at least two
configs measured it (max-load probes between the doubling steps are one
config's own), or when the group has one config.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from sweep.record.result import Cell, TrialResult
from sweep.report.compare import Group, Row, build_groups
from sweep.score.metrics import cell_goodput, load_of, ok_cells, slo_of
from sweep.score.noise import Candidate, tied_within_noise
from sweep.slo import Slo

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


@dataclass
class Level:
    load: float
    entries: list[Entry]
    best: Entry | None = None
    tied: list[Entry] = field(default_factory=list)
    baseline: Entry | None = None

    @property
    def speedup(self) -> float | None:
        if self.best is None or self.baseline is None or not self.baseline.tok_s:
            return None
        return self.best.tok_s / self.baseline.tok_s

    @property
    def baseline_wins(self) -> bool:
        """The baseline is the best, or tied with it: speculation does not pay here."""
        return self.best is not None and self.baseline is not None and self.baseline.meets and (
            self.best is self.baseline or any(e is self.baseline for e in self.tied))


@dataclass
class Crossover:
    load: float
    before: str
    after: str
    kind: str  # baseline | shorter draft | longer draft | other config

    def line(self, unit: str) -> str:
        what = {"baseline": "the autoregressive baseline wins", "shorter draft": "a shorter draft wins",
                "longer draft": "a longer draft wins"}.get(self.kind, "another config wins")
        return f"at {unit} {self.load:g}: {what} ({self.before} -> {self.after})"


@dataclass
class Band:
    start: float
    until: float | None  # the next band's first level (exclusive); None: to the highest measured
    levels: list[float]
    best: Entry | None   # None: no config meets the SLO (without errors) at these loads
    tok_s: list[float] = field(default_factory=list)  # the best's tok/s at each measured level

    @property
    def name(self) -> str | None:
        return self.best.name if self.best is not None else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"from": _num(self.start), "until": _num(self.until),
                               "measured": [_num(x) for x in self.levels], "config": self.name}
        if self.best is None:
            return {**out, "overrides": None, "note": "no config meets the SLO here: above the max load"}
        return {**out, "overrides": overrides_of(self.best.row.doc), "spec": knobs_of(self.best.row.doc),
                "tok_s": [round(x, 3) for x in self.tok_s]}


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


def _rank(level: Level) -> None:
    ok = [e for e in level.entries if e.meets]
    found = tied_within_noise([Candidate(e, e.tok_s, e.ci) for e in ok])
    if found is not None:
        level.best = found.best.key
        level.tied = [c.key for c in found.tied]


def _crossovers(levels: Sequence[Level]) -> list[Crossover]:
    out: list[Crossover] = []
    prev: Level | None = None
    for lv in levels:
        if lv.best is None:
            continue
        if prev is not None and prev.best is not None and (
                lv.best.name != prev.best.name or (lv.baseline_wins and not prev.baseline_wins)):
            if lv.baseline_wins:
                kind = "baseline"
            else:
                a, b = prev.best.row.budget, lv.best.row.budget
                same = prev.best.row.spec == lv.best.row.spec
                kind = ("shorter draft" if same and isinstance(a, (int, float)) and isinstance(b, (int, float))
                        and b < a else "longer draft" if same and isinstance(a, (int, float))
                        and isinstance(b, (int, float)) and b > a else "other config")
            after = lv.baseline.name if lv.baseline_wins and lv.baseline is not None else lv.best.name
            out.append(Crossover(lv.load, prev.best.name, after, kind))
        prev = lv
    return out


def _bands(levels: Sequence[Level]) -> list[Band]:
    bands: list[Band] = []
    for lv in levels:
        name = lv.best.name if lv.best is not None else None
        if bands and bands[-1].name == name:
            bands[-1].levels.append(lv.load)
            if lv.best is not None:
                bands[-1].tok_s.append(lv.best.tok_s)
            continue
        if bands:
            bands[-1].until = lv.load
        bands.append(Band(start=lv.load, until=None, levels=[lv.load], best=lv.best,
                          tok_s=[lv.best.tok_s] if lv.best is not None else []))
    return bands


def _newest_per_name(rows: Sequence[Row]) -> list[Row]:
    """One row per config name (a grid may run one config twice, e.g. spec=none under two budgets)."""
    keep: dict[str, Row] = {}
    for r in rows:
        old = keep.get(r.name)
        if old is None or (r.doc.trial.finished or "") > (old.doc.trial.finished or ""):
            keep[r.name] = r
    return [r for r in rows if keep[r.name] is r]


def schedules_of(group: Group, slo: Slo | None = None) -> list[Schedule]:
    """One schedule per context of the group (``slo``: judge under this SLO instead of the trials')."""
    rows = _newest_per_name([r for r in group.rows if r.doc.ok and correct(r) and ok_cells(r.doc.cells)])
    if not rows:
        return []
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
            lv = Level(load=x, entries=entries,
                       baseline=next((e for e in entries if e.row.is_baseline), None))
            _rank(lv)
            levels.append(lv)
        curves = {r.name: [(x, float(c.output_tok_s or 0.0), _entry(r, c, None).ci)
                           for x, c in sorted(cells[id(r)].items())] for r in rows if cells[id(r)]}
        sched = Schedule(group, ctx, "rate" if rate else "concurrency", slo, levels, curves, rows)
        sched.bands = _bands(levels)
        sched.crossovers = _crossovers(levels)
        out.append(sched)
    return out


def build_schedules(docs: Sequence[TrialResult], slo: Slo | None = None,
                    sources: Sequence[str] | None = None) -> list[Schedule]:
    """Every group's schedules (see the module doc)."""
    return [s for g in build_groups(docs, sources) for s in schedules_of(g, slo)]


def schedule_document(schedules: Sequence[Schedule], *, command: str = "") -> dict[str, Any]:
    """``schedule.yaml``: per group and context, load bands -> config overrides."""
    out: dict[str, Any] = {"format": FORMAT, "command": command, "schedules": []}
    for s in schedules:
        first = s.group.first
        out["schedules"].append({
            "hardware": s.group.hardware_label, "model": s.group.model_label,
            "workload": s.group.rows[0].workload, "context": s.context, "over": s.over,
            "simulated": bool(first.simulated),
            "slo": s.slo.to_dict() if s.slo is not None else None,
            "bands": [b.to_dict() for b in s.bands],
            "crossovers": [{"at": _num(c.load), "kind": c.kind, "from": c.before, "to": c.after}
                           for c in s.crossovers],
            "speculation_stops_paying_at": _num(s.speculation_stops_paying),
            "levels": [_level_dict(lv) for lv in s.levels],
        })
    return out


def _level_dict(lv: Level) -> dict[str, Any]:
    return {"load": _num(lv.load), "best": lv.best.name if lv.best else None,
            "tok_s": round(lv.best.tok_s, 3) if lv.best else None,
            "tied": [e.name for e in lv.tied],
            "speedup": round(lv.speedup, 4) if lv.speedup is not None else None,
            "baseline_tok_s": round(lv.baseline.tok_s, 3) if lv.baseline else None,
            "missed_slo": sorted(e.name for e in lv.entries if not e.meets)}
