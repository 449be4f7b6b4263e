"""The twin judged on a recorded landscape through the user's path (benchmarks/sim_fidelity.py, tests/sim).

Every figure here is a ``sweep.sim.predict`` call -- from a landscape point's composed config
(its recorded hardware, the box's measured figures, engine, dtype, workload, repeats) or from
the command line a user types -- against the landscape's measured cells:

* :func:`user_table`: ``python -m sweep.sim.predict`` as a user runs it (composed from the
  recorder's overrides and the landscape's workload settings, the shipped calibration), cell by
  cell beside the landscape (the issue's table);
* :func:`acceptance_rows`: the accept length of budgets not measured, from the per-position
  acceptance of the family's largest budget (sweep/sim/budgets.py), and of the same budgets at
  other loads from one measured load;
* :func:`schedule_agreement`: the per-load schedule of a family predicted from the baseline and
  the largest budget measured (sweep/sim/crossover.py) against the landscape's measured schedule
  (``sweep.report.schedule`` over its rounds, as ``python -m sweep.schedule --dir`` reads it).
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


# --------------------------------------------------------------------------- the user's command line


def user_overrides(land: Any, cid: str, workload: str) -> list[str]:
    """The command line that composes this config as the recorder ran it (record_landscape.py's base
    overrides for the engine, the config's own, the landscape's workload settings)."""
    from record_landscape import ENGINES

    wl = (land.doc.get("workloads") or {}).get(workload) or {}
    recorded = [o for o in land.doc.get("base_overrides") or [] if not str(o).startswith("workload.")]
    base = recorded or list((ENGINES.get(land.engine) or {}).get("base") or [f"server={land.engine}"])
    out = [*base, *land.configs[cid].get("overrides", []), f"workload={workload}",
           f"workload.contexts=[{','.join(str(c) for c in wl.get('contexts') or [])}]",
           f"workload.concurrency=[{','.join(str(c) for c in wl.get('concurrency') or [])}]",
           f"workload.max_tokens={wl.get('max_tokens')}", f"workload.min_requests={wl.get('min_requests')}",
           "workload.coding=off"]
    if wl.get("requests_per_cell"):
        out.append(f"workload.requests_per_cell={wl['requests_per_cell']}")
    return out


@dataclass
class UserCell:
    config: str
    workload: str
    context: int
    concurrency: int
    measured: dict[str, float]    # the landscape's point: the mean over its rounds (TTFT: the first round's)
    predicted: dict[str, float]
    band: tuple[float, float]     # output tok/s, for one run (the user's workload.repeats=1)
    rounds: tuple[float, ...]     # each round's output tok/s: what one run measured

    @property
    def inside(self) -> list[bool]:
        """Each round's tok/s inside the band for one run."""
        return [self.band[0] <= v <= self.band[1] for v in self.rounds or (self.measured["output_tok_s"],)]


def user_table(path: Path, *, calibration: Any = None) -> list[UserCell]:
    """Every landscape cell predicted from the command line a user types (one compose per config
    and workload), with the box's shipped calibration unless ``calibration`` names another."""
    from sweep.compose.cmdline import compose
    from sweep.compose.config import from_omegaconf
    from sweep.sim.landscape import load
    from sweep.sim.predict import predict

    land = load(path)
    cache: dict[tuple[str, str], dict[str, Any]] = {}
    out: list[UserCell] = []
    for pt in land.points:
        key = (str(pt["config"]), str(pt["workload"]))
        if key not in cache:
            cache[key] = predict(from_omegaconf(compose(user_overrides(land, *key))), calibration=calibration,
                                 band=True)
        cell = next((c for c in cache[key]["cells"] if c["context"] == pt["context"]
                     and c["concurrency"] == pt["concurrency"]), None)
        if cell is None:
            continue
        measured = {k: float(pt[k]) for k in ("output_tok_s", "ttft_ms_p50", "accept_len") if pt.get(k)}
        predicted = {k: float(cell[k]) for k in ("output_tok_s", "ttft_ms_p50", "accept_len") if cell.get(k)}
        out.append(UserCell(key[0], key[1], int(pt["context"]), int(pt["concurrency"]), measured, predicted,
                            (cell["output_tok_s_low"], cell["output_tok_s_high"]),
                            tuple(float(v) for v in pt.get("output_tok_s_runs") or ())))
    return out


def coverage(cells: Sequence[UserCell]) -> float:
    """The share of single runs (each round of each cell) inside the band for one run."""
    flags = [f for c in cells for f in c.inside]
    return sum(flags) / len(flags) if flags else float("nan")


def median_error(cells: Sequence[UserCell], key: str) -> float:
    errs = [abs(c.predicted[key] / c.measured[key] - 1) for c in cells if key in c.measured and key in c.predicted]
    return 100 * statistics.median(errs) if errs else float("nan")


# --------------------------------------------------------------------------- acceptance


@dataclass
class AcceptRow:
    family: str
    source: str          # the measured config whose per-position acceptance predicts
    config: str          # the config predicted
    budget: int
    workload: str
    context: int
    concurrency: int
    measured: float
    predicted: float
    how: str             # "budget": same load, a smaller budget; "load": predicted from the lowest load's cell

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1


def acceptance_rows(path: Path, model: str = "span") -> list[AcceptRow]:
    """Per cell: the accept length of each smaller budget of a family, predicted from the largest
    budget's per-position acceptance and its own cell at the same load (``how='budget'``) or at the
    lowest load only (``how='load'``, every budget including the largest, at the other loads)."""
    from sweep.sim import budgets, measured
    from sweep.sim.landscape import load

    land = load(path)
    profs = budgets.profiles(land)
    pts = {(p.config, p.workload, p.context, p.concurrency): p
           for p in measured.landscape_points(path) if p.kind == "accept_len"}
    fams: dict[tuple[str, ...], list[tuple[int, str]]] = {}
    for cid, cfg in land.configs.items():
        b = budgets.budget_of(cfg)
        if b:
            fams.setdefault(budgets.family_key(cfg), []).append((b, cid))
    rows: list[AcceptRow] = []
    for members in fams.values():
        if len(members) < 2:
            continue
        members.sort()
        top_budget, top = members[-1]
        for (cid, wl, ctx, conc), p in sorted(pts.items()):
            if cid not in {c for _, c in members}:
                continue
            prof = profs.get((top, wl))
            if prof is None:
                continue
            b = next(b for b, c in members if c == cid)
            ref = pts.get((top, wl, ctx, conc))
            lows = sorted((k for k in pts if k[0] == top and k[1] == wl and k[2] == ctx), key=lambda k: k[3])
            if ref is not None and cid != top:
                rows.append(AcceptRow(" ".join(members[0][1:]), top, cid, b, wl, ctx, conc, p.measured,
                                      budgets.predict(prof, b, ref.measured, per_draft_measured=p.per_draft,
                                                      model=model), "budget"))
            if lows and lows[0][3] != conc:
                ref1 = pts[lows[0]]
                rows.append(AcceptRow(" ".join(members[0][1:]), top, cid, b, wl, ctx, conc, p.measured,
                                      budgets.predict(prof, b, ref1.measured, per_draft_measured=p.per_draft,
                                                      model=model), "load"))
    return rows


# --------------------------------------------------------------------------- the per-load schedule


@dataclass
class ScheduleLevel:
    workload: str
    context: int
    load: float
    predicted: int                 # budget (0: the baseline)
    measured: list[int]            # the measured leader and those tied with it (the best alone when decided)
    state: str                     # the measured level's verdict
    predicted_tied: list[int]      # the budgets the twin puts within the schedule's noise of its best
    kept: float | None = None      # the predicted best's measured tok/s over the measured leader's

    @property
    def agrees(self) -> bool:
        return self.predicted in self.measured

    @property
    def decided(self) -> bool:
        """The measurement separated a best (a level every budget ties says little)."""
        return self.state == "decided"


@dataclass
class ScheduleJudgement:
    levels: list[ScheduleLevel]
    crossover: list[tuple[str, float | None, float | None, bool]]  # workload, predicted, measured, within a step
    measured_cells: int
    family: list[tuple[int, str]]
    hours: dict[str, float]
    margin: float                  # the schedule's tie rule for the landscape's rounds and noise (log)

    @property
    def agreement(self) -> float:
        return sum(lv.agrees for lv in self.levels) / len(self.levels) if self.levels else float("nan")


def _budget_of_doc(doc: Any) -> int:
    spec = (doc.config or {}).get("spec") or {}
    if str(spec.get("algorithm") or "none") == "none":
        return 0
    return int(spec.get("budget") or 0)


def schedule_agreement(path: Path, *, family: Sequence[str] | None = None, measured: Sequence[str] | None = None,
                       model: str = "span") -> ScheduleJudgement:
    """Fit the twin on the baseline's and the family's largest budget's cells only (every load, every
    round), carry that budget's per-position acceptance to the smaller ones, predict every budget at
    every load, and judge the predicted best per load against the measured schedule of the family
    (``sweep.report.schedule`` over the landscape's rounds, restricted to the family and the baseline)."""
    from sweep.report.schedule import build_schedules
    from sweep.score.metrics import metrics
    from sweep.sim import budgets
    from sweep.sim import measured as M
    from sweep.sim.crossover import predict_family, prescreen_hours, with_profile_points
    from sweep.sim.fit import fit
    from sweep.sim.landscape import load, trial_docs

    land = load(path)
    base = next(cid for cid, cfg in land.configs.items() if budgets.budget_of(cfg) is None
                and "spec=none" in (cfg.get("overrides") or []))
    if family is None:  # the family with the most budgets
        fams: dict[tuple[str, ...], list[tuple[int, str]]] = {}
        for cid, cfg in land.configs.items():
            b = budgets.budget_of(cfg)
            if b:
                fams.setdefault(budgets.family_key(cfg), []).append((b, cid))
        members = sorted(max(fams.values(), key=len))
    else:
        members = sorted((budgets.budget_of(land.configs[c]) or 0, c) for c in family)
    top_budget, top = members[-1]
    chosen = list(measured) if measured is not None else [base, top]
    profs = budgets.profiles(land)
    points = []
    for p in M.landscape_points(path):
        if p.config == top:  # the largest budget's cells, priced with its measured acceptance
            points += with_profile_points([p], profs.get((top, p.workload)), model)
        elif p.config in chosen:
            points.append(p)
    cal_fit = fit(points)
    levels: list[ScheduleLevel] = []
    crossover: list[tuple[str, float | None, float | None, bool]] = []
    hours = {"full_table": 0.0, "prescreen": 0.0}
    ids = {0: base, **{b: c for b, c in members}}
    docs = []
    for source, doc in trial_docs(land):
        cid = source.split("#", 1)[1].split("/", 1)[0]
        if cid in ids.values():
            doc.metrics = metrics(doc)
            docs.append(doc)
    schedules = build_schedules(docs)
    from sweep.sim.crossover import tie_margin
    from sweep.sim.scatter import measured_noise

    noise = {k: v for (_, k), v in measured_noise(M.landscape_points(path)).items()}.get("output_tok_s")
    rounds = min((len(p.runs) for p in points if p.kind == "output_tok_s"), default=1)
    margin = tie_margin(noise, rounds) if noise else 0.0
    for wname, wl in (land.doc.get("workloads") or {}).items():
        configs = {}
        for b, cid in ids.items():
            comp = land.composed(cid)
            configs[b] = {**{k: comp.get(k) for k in ("hardware", "model", "spec", "server")},
                          "workload": {**wl, "name": wname, "repeats": 1}}
        box_points = [p for p in points if p.workload == wname]
        cal = cal_fit.calibrations.get(box_points[0].box) if box_points else None
        fam = predict_family(configs, profile=profs.get((top, wname)), calibration=cal, model=model)
        cells = {b: [c for c in _cells_of(configs[b], cal, profs.get((top, wname)) if b else None, model)]
                 for b in ids}
        h = prescreen_hours(cells, wl, measured=[0, top_budget])
        hours["full_table"] += h["full_table"]
        hours["prescreen"] += h["prescreen"]
        for sched in schedules:
            if str(sched.group.rows[0].doc.config.get("workload", {}).get("name")) != wname:
                continue
            pred = {lv.load: lv for lv in fam.levels}
            for lv in sched.levels:
                p = pred.get(int(lv.load))
                if p is None or lv.leader is None:
                    continue
                meas = [_budget_of_doc(lv.best.row.doc)] if lv.best is not None else \
                    [_budget_of_doc(e.row.doc) for e in [lv.leader, *lv.tied]]
                got_tok = {_budget_of_doc(e.row.doc): e.tok_s for e in lv.entries}
                kept = got_tok[p.best] / lv.leader.tok_s if p.best in got_tok and lv.leader.tok_s else None
                levels.append(ScheduleLevel(wname, sched.context, lv.load, p.best, meas, lv.state, p.tied(margin),
                                            kept))
            loads = [lv.load for lv in sched.levels]
            m_stop, p_stop = sched.speculation_stops_paying, fam.stops_paying_within(margin)
            idx = {x: i for i, x in enumerate(loads)}
            mi = idx.get(m_stop, len(loads)) if m_stop is not None else len(loads)
            pi = idx.get(p_stop, len(loads)) if p_stop is not None else len(loads)
            # within one load step -- or every measured level between the two is open: a level the
            # measurement leaves undecided is no evidence against the prediction (sweep/score/campaign.py)
            between = sched.levels[min(mi, pi):max(mi, pi)]
            undecided = bool(between) and all(lv.state in ("open", "unknown") for lv in between)
            crossover.append((wname, p_stop, m_stop, abs(mi - pi) <= 1 or undecided))
    return ScheduleJudgement(levels, crossover, len({(p.config, p.workload, p.context, p.concurrency) for p in points}),
                             members, hours, margin)


def _cells_of(cfg: Mapping[str, Any], cal: Any, prof: Any, model: str) -> list[dict[str, Any]]:
    from sweep.sim.crossover import with_profile
    from sweep.sim.predict import predict

    return predict(with_profile(cfg, prof, model), calibration=cal)["cells"]
