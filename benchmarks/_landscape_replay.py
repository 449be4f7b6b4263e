"""The search benchmark on a recorded real landscape, replayed with its measured noise.

A landscape (``specsweep.landscape/1``, /work/landscape-format.md: one engine
on one box, every config of a grid, every point's result.json cell, failed
configs kept with their reason) is a truth no twin wrote. Replaying it:

* a **trial** of a config costs its recorded startup (a failed config: its
  startup, then nothing) plus each measured point's time (``duration_s`` per
  repeat); box-hours x the box's GPUs (a CPU box counts as one);
* a **measurement** of a point draws one of its recorded repeats
  (``output_tok_s_runs``; without them the recorded mean), so the search sees
  the box's own run-to-run noise; SLO verdicts are judged from the point's
  ``latencies`` rows (``sweep.stats.slo``; else its p90 TPOT), each scaled by the
  drawn repeat's speed;
* the **truth** is the recorded mean of every point.

Targets as on the twin (``--target``): ``objective`` (tok/s at the lowest
load of the first workload's shortest context), ``schedule`` (every
workload x context x concurrency band within 2% of its best), ``max_load``
(the max-load search replayed on the recorded concurrency ladder: doubling
through the levels until one misses a TPOT SLO; found when the incumbent truly
reaches the best config's level -- the ladder is the resolution).

Strategies: the full grid (charged whole), random, and TPE over the configs'
recorded knobs (``configs[].knobs`` + the spec, each a categorical; a
combination the landscape does not hold is refused without cost, as the
sweeper's valid space refuses it). Optuna drives TPE directly here: the
configs of a landscape need not compose with this checkout's YAML.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

WITHIN = 0.02
FORMAT = "specsweep.landscape/"
RESTART_FALLBACK_S = 60.0  # a failed trial with no recorded startup


def load(path: Path) -> dict[str, Any]:
    """The landscape through the project's reader (sweep.sim.landscape.load: a regular file of bounded
    size, every value checked); a bad one is one line on stderr, exit 2."""
    from sweep.sim.landscape import LandscapeError
    from sweep.sim.landscape import load as load_landscape

    try:
        doc = load_landscape(Path(path)).doc
    except LandscapeError as exc:
        print(f"error: --landscape: {str(exc).removeprefix('error: ')}", file=sys.stderr)
        raise SystemExit(2) from None
    for key in ("configs", "trials", "points"):
        if not isinstance(doc.get(key), list):
            raise SystemExit(f"--landscape {path}: no {key!r} list")
    return doc


@dataclass
class Replay:
    doc: dict[str, Any]
    slo_tpot_ms: float | None = None
    configs: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    startup: dict[str, float] = field(default_factory=dict)
    points: dict[tuple[str, tuple[Any, int, int]], dict[str, Any]] = field(default_factory=dict)
    bands: list[tuple[Any, int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.configs = [str(c["id"]) for c in self.doc["configs"]]
        for t in self.doc["trials"]:
            cid = str(t["config"])
            if t.get("startup_s") is not None:
                self.startup[cid] = max(self.startup.get(cid, 0.0), float(t["startup_s"]))
            if t.get("status") != "ok":
                self.failed[cid] = str((t.get("failure") or {}).get("reason") if isinstance(t.get("failure"), dict)
                                       else t.get("failure") or t.get("status"))
        for p in self.doc["points"]:
            band = (p.get("workload"), int(p["context"]), int(p["concurrency"]))
            self.points[(str(p["config"]), band)] = p
        self.bands = sorted({b for (c, b) in self.points if c not in self.failed},
                            key=lambda b: (str(b[0]), b[1], b[2]))
        if self.slo_tpot_ms is None:
            self.slo_tpot_ms = self._default_slo()

    # -- the box ----------------------------------------------------------------------------
    @property
    def gpus(self) -> int:
        n = (self.doc.get("machine") or {}).get("gpus") or self.doc.get("gpus")
        return int(n) if isinstance(n, int) and n > 0 else 1

    @property
    def ok_configs(self) -> list[str]:
        return [c for c in self.configs if c not in self.failed and any((c, b) in self.points for b in self.bands)]

    def label(self, cid: str) -> str:
        return cid

    # -- truth and measurement -----------------------------------------------------------------
    def truth(self, cid: str, band: tuple[Any, int, int]) -> float | None:
        p = self.points.get((cid, band))
        return None if p is None or p.get("output_tok_s") is None else float(p["output_tok_s"])

    def measure(self, cid: str, band: tuple[Any, int, int], rng: random.Random) -> tuple[float, float] | None:
        """(drawn tok/s, its ratio to the mean) of one measurement of a point."""
        p = self.points.get((cid, band))
        if p is None or p.get("output_tok_s") is None:
            return None
        mean = float(p["output_tok_s"])
        runs = [float(x) for x in p.get("output_tok_s_runs") or [] if x]
        x = rng.choice(runs) if runs else mean
        return x, (x / mean if mean else 1.0)

    def point_seconds(self, cid: str, band: tuple[Any, int, int]) -> float:
        p = self.points.get((cid, band)) or {}
        reps = max(1, int(p.get("repeats") or 1))
        return float(p.get("duration_s") or 0.0) / reps

    def startup_s(self, cid: str) -> float:
        return self.startup.get(cid, RESTART_FALLBACK_S)

    # -- the SLO ----------------------------------------------------------------------------
    def ladder(self) -> list[tuple[Any, int, int]]:
        """The max-load ladder: the first workload's shortest context, every recorded concurrency."""
        if not self.bands:
            return []
        wl, ctx = self.bands[0][0], min(b[1] for b in self.bands if b[0] == self.bands[0][0])
        return sorted((b for b in self.bands if b[0] == wl and b[1] == ctx), key=lambda b: b[2])

    def _default_slo(self) -> float:
        """Twice the baseline's (else the median config's) TPOT at the ladder's lowest level."""
        ladder = self.ladder()
        if not ladder:
            return 1e9
        base = [c for c in self.ok_configs if self._spec(c) == "none"] or self.ok_configs
        tpots = [float(p["tpot_ms_p50"]) for c in base if (p := self.points.get((c, ladder[0])))
                 and p.get("tpot_ms_p50")]
        return 2.0 * statistics.median(tpots) if tpots else 1e9

    def _spec(self, cid: str) -> str:
        conf = next((c for c in self.doc["configs"] if str(c["id"]) == cid), {})
        return str(conf.get("spec") or (conf.get("knobs") or {}).get("method") or "")

    def meets(self, cid: str, band: tuple[Any, int, int], speed: float = 1.0) -> bool:
        """The point meets the TPOT SLO (its latency rows at the SLO's 90%, scaled by a repeat's speed)."""
        from sweep.stats.slo import Slo, judge

        p = self.points.get((cid, band))
        if p is None:
            return False
        slo = Slo(tpot_ms=self.slo_tpot_ms)
        rows = p.get("latencies") or []
        if rows:
            scaled = [[r[0], None if r[1] is None else r[1] / speed, r[2], r[3], None] for r in rows]
            ok = int(p.get("requests") or len(rows)) - int(p.get("errors") or 0)
            got = judge(scaled, slo, requests=int(p.get("requests") or len(rows)), ok=ok,
                        duration_s=float(p.get("duration_s") or 1.0),
                        completion_tokens=int(p.get("completion_tokens") or 0))
            return got is not None and got.slo_attainment >= slo.target
        tpot = p.get("tpot_ms_p90") or p.get("tpot_ms_p50")
        return tpot is not None and float(tpot) / speed <= float(self.slo_tpot_ms or 0)

    def true_max_load(self, cid: str) -> float:
        out = 0.0
        for b in self.ladder():
            if not self.meets(cid, b):
                break
            out = float(b[2])
        return out


# ------------------------------------------------------------------------------------- targets
@dataclass
class Trial:
    cid: str
    cost_s: float
    cells: dict[tuple[Any, int, int], float]
    value: float | None  # what the search optimises (None: failed)


def run_trial(rep: Replay, cid: str, target: str, rng: random.Random) -> Trial:
    start = rep.startup_s(cid)
    if cid in rep.failed:
        return Trial(cid, start, {}, None)
    cost, cells = start, {}
    if target == "max_load":
        met = 0.0
        for b in rep.ladder():
            got = rep.measure(cid, b, rng)
            if got is None:
                break
            cost += rep.point_seconds(cid, b)
            cells[b] = got[0]
            if not rep.meets(cid, b, got[1]):
                break
            met = float(b[2])
        return Trial(cid, cost, cells, met)
    for b in rep.bands:
        got = rep.measure(cid, b, rng)
        if got is not None:
            cells[b] = got[0]
            cost += rep.point_seconds(cid, b)
    if not cells:
        return Trial(cid, cost, cells, None)
    if target == "objective":
        return Trial(cid, cost, cells, cells.get(rep.bands[0]))
    return Trial(cid, cost, cells, statistics.fmean(cells.values()))  # schedule: the mean over bands


def quality(rep: Replay, target: str, done: list[Trial]) -> float:
    ok = [t for t in done if t.value is not None]
    if not ok:
        return 0.0
    if target == "schedule":
        worst = 1.0
        for b in rep.bands:
            seen = [(t.cells[b], t.cid) for t in ok if b in t.cells]
            best = max((v for c in rep.ok_configs if (v := rep.truth(c, b)) is not None), default=None)
            if not seen or not best:
                return 0.0
            worst = min(worst, (rep.truth(max(seen)[1], b) or 0.0) / best)
        return worst
    inc = max(ok, key=lambda t: t.value or 0.0).cid
    if target == "max_load":
        best = max(rep.true_max_load(c) for c in rep.ok_configs)
        return rep.true_max_load(inc) / best if best else 1.0
    b0 = rep.bands[0]
    best = max((v for c in rep.ok_configs if (v := rep.truth(c, b0)) is not None), default=0.0)
    return (rep.truth(inc, b0) or 0.0) / best if best else 0.0


def found(rep: Replay, target: str, q: float) -> bool:
    """Within 2% (tok/s targets); max_load: the best config's level itself (the recorded ladder is
    the resolution: one level below is a factor of two)."""
    return q >= 1 - WITHIN if target != "max_load" else q >= 1 - 1e-9


# ------------------------------------------------------------------------------------- strategies
def _knobs(rep: Replay) -> dict[str, dict[str, Any]]:
    out = {}
    for c in rep.doc["configs"]:
        k = {"spec": str(c.get("spec") or "")}
        k.update({str(a): json.dumps(v) for a, v in (c.get("knobs") or {}).items()})
        out[str(c["id"])] = k
    return out


def proposer(rep: Replay, strategy: str, seed: int) -> Callable[[dict[str, float | None]], str | None]:
    """next(config) given the values seen so far: random order, or TPE over the recorded knobs."""
    rng = random.Random(f"replay:{strategy}:{seed}")
    order = list(rep.configs)
    rng.shuffle(order)
    if strategy in ("grid", "random"):
        it = iter(order)
        return lambda _seen: next(it, None)
    import optuna

    knobs = _knobs(rep)
    names = sorted({k for v in knobs.values() for k in v})
    choices = {n: sorted({v.get(n, "null") for v in knobs.values()}) for n in names}
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=4, multivariate=True)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    by_params = {tuple(v.get(n, "null") for n in names): cid for cid, v in knobs.items()}
    pending: dict[str, Any] = {}

    def nxt(seen: dict[str, float | None]) -> str | None:
        for cid, t in list(pending.items()):
            if cid in seen:
                _tell(study, t, seen[cid])
                del pending[cid]
        for _ in range(200):  # refused proposals (no such config) cost nothing, as the valid space's
            t = study.ask()
            key = tuple(t.suggest_categorical(n, choices[n]) for n in names)
            cid = by_params.get(key)
            if cid is None:
                study.tell(t, state=optuna.trial.TrialState.FAIL)
                continue
            if cid in seen:  # a repeat: answered from the first measurement, no server start
                _tell(study, t, seen[cid])
                continue
            pending[cid] = t
            return cid
        return next((c for c in order if c not in seen), None)

    return nxt


def _tell(study: Any, trial: Any, value: float | None) -> None:
    import optuna

    if value is None:  # a config that failed: Optuna's FAIL, as the sweeper records a crash
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
    else:
        study.tell(trial, value)


@dataclass
class Run:
    hours: float
    trials: int
    hit: bool


def search(rep: Replay, strategy: str, target: str, seed: int) -> Run:
    rng = random.Random(f"measure:{strategy}:{seed}")
    propose = proposer(rep, strategy, seed)
    seen: dict[str, float | None] = {}
    done: list[Trial] = []
    spent = 0.0
    while (cid := propose(seen)) is not None:
        t = run_trial(rep, cid, target, rng)
        spent += t.cost_s
        seen[cid] = t.value
        done.append(t)
        if found(rep, target, quality(rep, target, done)):
            return Run(spent / 3600 * rep.gpus, len(done), True)
    return Run(spent / 3600 * rep.gpus, len(done), False)


def grid_hours(rep: Replay, target: str) -> float:
    rng = random.Random("grid")
    return sum(run_trial(rep, c, target, rng).cost_s for c in rep.configs) / 3600 * rep.gpus


STRATEGIES = {"grid": "full grid", "random": "random", "tpe": "TPE (recorded knobs)"}


def replay_main(args: argparse.Namespace) -> int:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    doc = load(args.landscape)
    rep = Replay(doc, slo_tpot_ms=args.slo_tpot_ms)
    target = args.target
    names = [s for s in (args.strategies or ",".join(STRATEGIES)).split(",") if s]
    unknown = [s for s in names if s not in STRATEGIES]
    if unknown:
        raise SystemExit(f"--strategies: unknown {unknown}; allowed with --landscape: {', '.join(STRATEGIES)}")
    what = f"{doc.get('engine')} {doc.get('engine_version') or ''} · {doc.get('model')} · {doc.get('hardware')}"
    print(f"truth: the recorded landscape {args.landscape} ({what}), replayed with its measured noise; "
          f"target: {target}")
    print(f"   {len(rep.configs)} configs ({len(rep.failed)} failed: "
          f"{', '.join(f'{c} {r}' for c, r in rep.failed.items()) or 'none'}); {len(rep.bands)} load bands"
          + (f"; SLO TPOT <= {rep.slo_tpot_ms:.4g} ms; true max loads "
             + ", ".join(f"{c} {rep.true_max_load(c):g}" for c in rep.ok_configs) if target == "max_load" else ""))
    grid_h = grid_hours(rep, target)
    print(f"   {'strategy':<27} {'box-h':>7} {'of grid':>8} {'trials':>7}  found")
    summary: dict[str, float] = {}
    for name in names:
        runs = [search(rep, name, target, seed) for seed in range(args.seeds)]
        med = statistics.median(r.hours for r in runs)
        note = ""
        if name == "grid":
            note = f"  (in its random order the target is met after {med:.3f} box-h)"
            med = grid_h
        else:
            summary[STRATEGIES[name]] = med / grid_h if grid_h else math.nan
        print(f"   {STRATEGIES[name]:<27} {med:7.3f} {med / grid_h if grid_h else math.nan:8.1%} "
              f"{statistics.median(r.trials for r in runs):7.1f}  {sum(r.hit for r in runs)}/{len(runs)}{note}")
    print(f"share of the grid's GPU-hours per strategy ({target}, landscape {Path(args.landscape).name}, median "
          f"over {args.seeds} seeds): " + "; ".join(f"{k} {v:.1%}" for k, v in summary.items()))
    return 0
