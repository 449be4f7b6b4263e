"""The verdict model checked against a known truth: landscapes whose true means we set.

Why: a statistic is trusted only after it was run on data whose answer is known. This draws
landscapes from the recorded vLLM landscape's configs and levels (benchmarks/measured/landscapes/
vllm-cpu-smollm2.json): the true tok/s of each config at each level is the recorded mean with the
gaps between configs stretched (``--stretch``, 3x by default, so some levels have real 5-10%+
gaps), then measured in ``R`` interleaved rounds with a noise model of our choosing -- cell noise
(lognormal, ``--noise``), round drift shared by every cell of a round (``--drift``), outliers
(``--outliers``: a share of measurements 30% slow) and unequal variances (``--unequal``: each
config's noise between 0.5x and 1.5x). Each draw is written as a ``specsweep.landscape/1`` file
and read by the product's own path (``python -m sweep.schedule``'s reader and schedule builder:
:func:`sweep.schedule._landscapes`, :func:`sweep.report.schedule.build_schedules`), and we count:

* wrong picks: a decided or equivalent level whose pick is more than the margin below the true best;
* coverage: the pick's 95% speedup interval over the baseline holds the true speedup;
* decided share of levels whose true best leads the runner-up by >= 5% and >= 10%, at 2, 3, 5 rounds;
* regret: the true loss of the picks (median, worst);
* racing: runs until every level is decided or equivalent, racing (only contenders measured again,
  the rule ``sweep.decide`` uses: :func:`sweep.score.campaign.contenders`) against round-robin (every
  config measured every round), from two rounds, at most ``--max-rounds``.

    python benchmarks/verdict_calibration.py [--draws 20] [--rounds 2,3,5] [--noise 0.04] [--drift 0.04]

Targets (the issue's): wrong picks <= 5%; coverage 93-97%; true gaps of 10% decided >= 80% with 3
rounds at 4% noise and 4% drift; decided never falls as rounds are added; racing reaches the verdicts
with at most half the runs of round-robin.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SOURCE = ROOT / "benchmarks" / "busy-box" / "vllm-cpu-smollm2.json"


def truth_of(doc: dict[str, Any], stretch: float) -> dict[tuple[str, str, int], float]:
    """(config, workload, concurrency) -> true tok/s: the recorded means, gaps stretched."""
    means: dict[tuple[str, str, int], float] = {}
    for p in doc["points"]:
        runs = p.get("output_tok_s_runs") or [p["output_tok_s"]]
        key = (p["config"], p["workload"], int(p["concurrency"]))
        means[key] = math.exp(statistics.fmean(math.log(v) for v in runs))
    levels: dict[tuple[str, int], list[float]] = {}
    for (c, w, k), v in means.items():
        levels.setdefault((w, k), []).append(math.log(v))
    centre = {lv: statistics.fmean(vs) for lv, vs in levels.items()}
    return {key: math.exp(centre[(key[1], key[2])] + stretch * (math.log(v) - centre[(key[1], key[2])]))
            for key, v in means.items()}


def draw(doc: dict[str, Any], truth: dict[tuple[str, str, int], float], rounds: int, rng: random.Random,
         noise: float, drift: float, outliers: float, unequal: bool) -> dict[str, Any]:
    """A landscape of ``rounds`` rounds measured from ``truth`` with the noise model."""
    out = copy.deepcopy(doc)
    scale = {c["id"]: (rng.uniform(0.5, 1.5) if unequal else 1.0) for c in doc["configs"]}
    shifts = [rng.gauss(0.0, drift) for _ in range(rounds)]
    template = {(r["config"], r["workload"]): r for r in doc["runs"] if int(r.get("round", 1)) == 1}
    runs = []
    values: dict[tuple[str, str, int], list[float]] = {}
    for rnd in range(rounds):
        for (cid, wl), base in template.items():
            run = copy.deepcopy(base)
            run["round"] = rnd + 1
            for cell in run["cells"]:
                k = int(cell["concurrency"])
                v = truth[(cid, wl, k)] * math.exp(shifts[rnd] + rng.gauss(0.0, noise * scale[cid]))
                if outliers and rng.random() < outliers:
                    v *= 0.7
                v = round(v, 4)
                cell["output_tok_s"] = v
                for key in ("output_tok_s_runs", "output_tok_s_ci", "repeats"):
                    cell.pop(key, None)
                values.setdefault((cid, wl, k), []).append(v)
            runs.append(run)
    out["runs"] = runs
    for p in out["points"]:
        vs = values[(p["config"], p["workload"], int(p["concurrency"]))]
        p["output_tok_s_runs"] = vs
        p["output_tok_s"] = round(statistics.fmean(vs), 4)
        p["repeats"] = len(vs)
        p["output_tok_s_ci"] = None
    out["trials"] = [{**t, "rounds": rounds, "rounds_ok": rounds} for t in doc.get("trials") or []]
    return out


def judge(land: dict[str, Any], work: Path) -> list[Any]:
    """The product's path: the landscape file read and scheduled as ``python -m sweep.schedule`` does."""
    from sweep.io.readback import Skipped
    from sweep.report.schedule import build_schedules
    from sweep.schedule import _landscapes

    work.mkdir(parents=True, exist_ok=True)
    for old in work.glob("*.json"):
        old.unlink()
    (work / "landscape.json").write_text(json.dumps(land))
    skipped = Skipped()
    found = _landscapes(work, skipped)
    if skipped.exit_code():
        raise SystemExit(f"the drawn landscape was refused: {skipped}")
    return build_schedules([d for _, d in found], None, [p for p, _ in found])


def _cid_of(entry: Any, land: dict[str, Any]) -> str:
    return str(entry.row.source.split("#", 1)[1].split("/", 1)[0])


def score(schedules: Sequence[Any], land: dict[str, Any], truth: dict[tuple[str, str, int], float],
          margin: float) -> list[dict[str, Any]]:
    """Per level: its verdict against the truth."""
    from sweep.stats import Z975, t975

    out = []
    for s in schedules:
        wl = s.group.rows[0].workload
        for lv in s.levels:
            chosen = getattr(lv, "pick", None) or lv.best or lv.leader  # (the old rule had no pick: its leader)
            if chosen is None:
                continue
            true = {_cid_of(e, land): truth[(_cid_of(e, land), wl, int(lv.load))] for e in lv.entries}
            ranked = sorted(true.values(), reverse=True)
            best = ranked[0]
            gap = ranked[0] / ranked[1] - 1 if len(ranked) > 1 else math.inf
            pick = _cid_of(chosen, land)
            loss = 1 - true[pick] / best
            decided = lv.state in ("decided", "equivalent")
            base = next((c for c in true if c == "none"), None)
            covered = marginal = None
            if lv.speedup_ci is not None and base is not None:
                t = true[pick] / true[base]
                covered = lv.speedup_ci[0] <= t <= lv.speedup_ci[1]
                # the same pair at the plain two-sided 95% (t on the pooled degrees of freedom): how well
                # the noise model itself is calibrated, apart from the simultaneous level the table uses
                noise = getattr(lv.verdict, "noise", None)
                if noise is not None and noise.sigma is not None:
                    crit = t975(max(1, int(noise.df))) if math.isfinite(noise.df) else Z975
                    got = lv.verdict.ratio(chosen.row.config_id, lv.baseline.row.config_id, crit)
                    if got is not None and got[1] is not None:
                        marginal = got[1][0] <= t <= got[1][1]
            out.append({"gap": gap, "decided": decided, "wrong": decided and loss > margin + 1e-9,
                        "loss": loss, "covered": covered, "marginal": marginal, "state": lv.state,
                        "regret_bound": getattr(lv, "regret", None)})
    return out


def race(doc: dict[str, Any], truth: dict[tuple[str, str, int], float], rng: random.Random, noise: float,
         drift: float, max_rounds: int, racing: bool) -> tuple[int, int, int]:
    """(runs, levels settled, levels) measuring from two rounds until every level is decided or equivalent:
    racing (only contenders) or round-robin (every config of an open level). Runs are decide's: after the
    sweep's own two rounds, one per config and workload (a workload is part of a config's identity)."""
    from sweep.score.campaign import Campaign, Obs, contenders

    configs = [c["id"] for c in doc["configs"]]
    levels = sorted({(w, k) for (_, w, k) in truth})
    obs: list[Obs[str, tuple[str, int]]] = []
    runs = 0
    cost = {c: ((0.0, 0.0) if c == "none" else (1.0, float(c.split("-b")[1].split("-")[0]))) for c in configs}

    def measure(rnd: int, which: dict[str, set[tuple[str, int]]]) -> int:
        shift = rng.gauss(0.0, drift)
        for c, lvs in which.items():
            for lv in lvs:
                v = truth[(c, lv[0], lv[1])] * math.exp(shift + rng.gauss(0.0, noise))
                obs.append(Obs(c, lv, f"r{rnd}", v))
        return len([c for c, lvs in which.items() if lvs])

    for rnd in range(2):  # the sweep's own two rounds: where decide starts, not counted as its runs
        measure(rnd, {c: set(levels) for c in configs})
    settled = 0
    for rnd in range(2, max_rounds):
        camps = {w: Campaign([o for o in obs if o.level[0] == w], cost=cost) for w in {lv[0] for lv in levels}}
        todo: dict[str, set[tuple[str, int]]] = {}
        settled = 0
        for lv in levels:
            v = camps[lv[0]].verdict(lv)
            if v.decided:
                settled += 1
                continue
            for c in (contenders(v) if racing else list(v.estimates)):
                todo.setdefault(c, set()).add(lv)
        if not todo:
            return runs, settled, len(levels)
        # a run is one config (its workload is part of its identity) at its open levels: one server start
        measure(rnd, todo)
        runs += sum(len({lv[0] for lv in lvs}) for lvs in todo.values())
    camps = {w: Campaign([o for o in obs if o.level[0] == w], cost=cost) for w in {lv[0] for lv in levels}}
    settled = sum(1 for lv in levels if camps[lv[0]].verdict(lv).decided)
    return runs, settled, len(levels)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--draws", type=int, default=20)
    p.add_argument("--rounds", default="2,3,5")
    p.add_argument("--noise", type=float, default=0.04)
    p.add_argument("--drift", type=float, default=0.04)
    p.add_argument("--stretch", type=float, default=3.0)
    p.add_argument("--outliers", type=float, default=0.0)
    p.add_argument("--unequal", action="store_true")
    p.add_argument("--race-draws", type=int, default=None, help="draws of the racing comparison (default --draws)")
    p.add_argument("--max-rounds", type=int, default=12)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = p.parse_args(argv)
    try:
        rounds = [int(x) for x in args.rounds.split(",")]
    except ValueError:
        print(f"error: --rounds: a comma-separated list of integers >= 2, got {args.rounds!r}", file=sys.stderr)
        return 2
    if any(r < 2 or r > 50 for r in rounds) or not 1 <= args.draws <= 10_000:
        print("error: --rounds in [2, 50] and --draws in [1, 10000]", file=sys.stderr)
        return 2
    doc = json.loads(SOURCE.read_text())
    truth = truth_of(doc, args.stretch)
    rng = random.Random(args.seed)
    margin = 0.02
    figures: dict[str, Any] = {"noise": args.noise, "drift": args.drift, "stretch": args.stretch,
                               "outliers": args.outliers, "unequal": args.unequal, "draws": args.draws, "by_rounds": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for r in rounds:
            rows: list[dict[str, Any]] = []
            for i in range(args.draws):
                land = draw(doc, truth, r, rng, args.noise, args.drift, args.outliers, args.unequal)
                rows += score(judge(land, Path(tmp) / f"r{r}"), land, truth, margin)
            dec = [x for x in rows if x["decided"]]
            cov = [x["covered"] for x in rows if x["covered"] is not None]
            marg = [x["marginal"] for x in rows if x["marginal"] is not None]
            g5 = [x for x in rows if x["gap"] >= 0.05]
            g10 = [x for x in rows if x["gap"] >= 0.10]
            figures["by_rounds"][r] = {
                "levels": len(rows),
                "decided": len(dec) / len(rows) if rows else 0.0,
                "wrong_picks": (sum(x["wrong"] for x in dec) / len(dec)) if dec else 0.0,
                "coverage": sum(cov) / len(cov) if cov else None,
                "coverage_pair": sum(marg) / len(marg) if marg else None,
                "decided_gap5": sum(x["decided"] for x in g5) / len(g5) if g5 else None,
                "decided_gap10": sum(x["decided"] for x in g10) / len(g10) if g10 else None,
                "regret_median": statistics.median(x["loss"] for x in rows) if rows else None,
                "regret_worst": max((x["loss"] for x in rows), default=None),
            }
    n_race = args.race_draws if args.race_draws is not None else args.draws
    if n_race <= 0:  # the verdicts alone (also how the old rule's figures are taken: it had no racing)
        figures["racing"] = None
        return _print(args, figures, n_race)
    race_runs: dict[str, list[float]] = {"racing": [], "round_robin": []}
    settled: dict[str, list[float]] = {"racing": [], "round_robin": []}
    for i in range(n_race):
        seed = rng.randrange(1 << 30)
        for how in ("racing", "round_robin"):
            runs, done, total = race(doc, truth, random.Random(seed), args.noise, args.drift, args.max_rounds,
                                     racing=how == "racing")
            race_runs[how].append(runs)
            settled[how].append(done / total)
    figures["racing"] = {how: {"runs_mean": statistics.fmean(race_runs[how]),
                               "settled": statistics.fmean(settled[how])} for how in race_runs}
    rr = figures["racing"]["round_robin"]["runs_mean"]
    figures["racing"]["ratio"] = figures["racing"]["racing"]["runs_mean"] / rr if rr else None
    return _print(args, figures, n_race)


def _print(args: argparse.Namespace, figures: dict[str, Any], n_race: int) -> int:
    if args.json:
        print(json.dumps(figures))
        return 0
    extra = (f", outliers {args.outliers:.0%}" if args.outliers else "") + (
        ", unequal variances" if args.unequal else "")
    print(f"verdict calibration: {args.draws} draws a setting, truth = the recorded vLLM means with gaps "
          f"x{args.stretch:g}; noise {args.noise:.0%} a measurement, drift {args.drift:.0%} a round{extra}")
    print(f"{'rounds':>6} {'levels':>6} {'decided':>8} {'wrong':>6} {'cover':>6} {'pair':>5} {'gap>=5%':>8} "
          f"{'gap>=10%':>9} {'regret med':>10} {'worst':>6}")
    for r, f in figures["by_rounds"].items():
        def pct(x: float | None) -> str:
            return "-" if x is None else f"{x:.0%}"
        print(f"{r:>6} {f['levels']:>6} {pct(f['decided']):>8} {pct(f['wrong_picks']):>6} {pct(f['coverage']):>6} "
              f"{pct(f['coverage_pair']):>5} {pct(f['decided_gap5']):>8} {pct(f['decided_gap10']):>9} "
              f"{f['regret_median']:>10.1%} {f['regret_worst']:>6.1%}")
    print("cover: the pick's speedup interval as shown (the verdict's simultaneous 95%); pair: the same pair at "
          "a plain two-sided 95% (the noise model's own calibration)")
    rc = figures["racing"]
    if rc is None:
        return 0
    print(f"decide's runs from 2 rounds to a verdict (at most {args.max_rounds} rounds, {n_race} draws): "
          f"racing {rc['racing']['runs_mean']:.1f} runs ({rc['racing']['settled']:.0%} of levels settled), "
          f"round-robin {rc['round_robin']['runs_mean']:.1f} runs ({rc['round_robin']['settled']:.0%}); "
          f"ratio {rc['ratio']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
