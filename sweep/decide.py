"""``python -m sweep.decide --dir SWEEP_DIR``: measure again only what is undecided, until it is decided.

A grid, a search or a schedule measured once (or a few times) leaves verdicts open: a leader
its runner-up is within noise of, or a leader measured once on a box whose spread is unknown
(:mod:`sweep.score.noise`). This re-measures **only those cells of only those configs** -- the
leader and the runners-up it does not separate from, at the objective's cell(s) of an open
group (``--what report``: a grid's or a search's best) and at each open load level of the
schedule (``--what schedule``) -- in rounds: each round runs every open config once, one
server start each, in the same order (rotated each round so none always goes first), with
``workload.cells`` naming the cells (the config and its matrix stay the same, so each run is
a copy of the config and pools with the earlier ones as repeats: :mod:`sweep.score.configs`).
After each round the verdicts are judged again from every result under the directory; it
stops when none is open, or when the budget is spent (``--max-trials`` runs, or
``--max-gpu-hours`` of measured trial time x the box's GPUs), and says what stays open.

    python -m sweep.decide --dir multirun/2026-12-01/10-00-00 [--what report|schedule|both]
        [--max-trials 12] [--max-gpu-hours H] [--near 0.2] [--dry-run] [OVERRIDE ...]

The runs go to ``<dir>/decide/round<r>/<n>/`` (result.json, the server's log), each a
``python -m sweep`` single run with the config's own overrides, so they reach MLflow like any
trial. A leader measured once with the noise unknown is compared with the configs within
``--near`` (20%) of it: farther ones are not made undecided by noise. Exit status: 0 when every
verdict is decided, 3 when some stay open (the budget ran out), 1 when nothing could be run,
2 on bad input.
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from sweep.errors import ConfigError, command, one_line_usage_errors

EXIT_OPEN = 3
# overrides of a copy that say where it ran, not what it is (a decide run sets its own)
_NOT_COPIED = ("hydra.", "server.port=", "workload.cells=", "baseline.", "resume.", "results.")


@dataclass
class Target:
    """One open config: its newest copy (the overrides that run it) and the cells to measure again."""

    config_id: str
    name: str
    overrides: list[str]
    cells: set[tuple[int, int]] = field(default_factory=set)
    why: list[str] = field(default_factory=list)
    gpus: int = 1


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m sweep.decide", description=(
        "Measure again only the cells whose verdict is open, until decided or the budget is spent."))
    p.add_argument("--dir", type=Path, required=True, help="a sweep dir (or any dir of result.json files)")
    p.add_argument("--what", choices=("report", "schedule", "both"), default="both",
                   help="open verdicts of the report's groups (the objective), the schedule's levels, or both")
    p.add_argument("--max-trials", type=int, default=12, help="runs at most (default 12)")
    p.add_argument("--max-gpu-hours", type=float, default=None,
                   help="GPU-hours at most: each run's measured time x the box's GPUs")
    p.add_argument("--near", type=float, default=0.2,
                   help="a leader measured once with unknown noise is compared with configs within this "
                        "fraction of it (default 0.2)")
    p.add_argument("--dry-run", action="store_true", help="print what would run, run nothing")
    p.add_argument("overrides", nargs="*", help="more overrides for every run (e.g. mlflow.enabled=false)")
    args = one_line_usage_errors(p).parse_args(argv)
    if not 1 <= args.max_trials <= 10_000:
        raise ConfigError("--max-trials", f"in [1, 10000], got {args.max_trials}")
    if args.max_gpu_hours is not None and not 0 < args.max_gpu_hours <= 1e6:
        raise ConfigError("--max-gpu-hours", f"in (0, 1e6], got {args.max_gpu_hours}")
    if not 0 < args.near < 1:
        raise ConfigError("--near", f"in (0, 1), got {args.near}")
    if not args.dir.is_dir():
        raise ConfigError("--dir", f"{args.dir}: not a directory")
    return args


def _overrides(doc: Any) -> list[str] | None:
    """The overrides that run this config again (None: they hold a masked secret, or there are none)."""
    out = [o for o in doc.trial.overrides if not o.lstrip("+~").startswith(_NOT_COPIED)]
    if any("***" in o for o in out):
        return None
    return out


def _objective_cells(row: Any) -> set[tuple[int, int]]:
    """The cells the group's objective reads (all of them for a weighted mean)."""
    from sweep.score.metrics import ok_cells

    metric = row.objective.measure
    cells = ok_cells(row.doc.cells)
    if metric == "cell":
        return {(int(row.objective.context), int(row.objective.concurrency))}
    if metric in ("weighted_mean", "goodput") or not cells:
        return {(int(c.context), int(c.concurrency)) for c in cells}
    if metric == "tok_s_peak":
        top = max(cells, key=lambda c: c.output_tok_s or 0.0)
        return {(int(top.context), int(top.concurrency))}
    return {(int(row.head.context), int(row.head.concurrency))} if row.head.context is not None else set()


def _near(leader_value: float, rows: Sequence[tuple[Any, float]], near: float) -> list[Any]:
    return [r for r, v in rows if v >= (1 - near) * leader_value]


def open_targets(docs: Sequence[Any], sources: Sequence[str], what: str, near: float) -> dict[str, Target]:
    """Config id -> what of it to measure again, from the verdicts that are open now."""
    from sweep.report.compare import build_groups
    from sweep.report.schedule import schedules_of

    targets: dict[str, Target] = {}

    def add(row: Any, cells: set[tuple[int, int]], why: str) -> None:
        over = _overrides(row.doc)
        if over is None or not row.doc.trial.overrides:
            return  # a landscape's round, or a secret in the overrides: cannot be run again from here
        num = row.doc.config_section("hardware").get("num_gpus")
        t = targets.setdefault(row.config_id, Target(row.config_id, row.name, over,
                                                     gpus=max(1, int(num or 1))))
        t.cells |= cells
        if why not in t.why:
            t.why.append(why)

    for g in build_groups(docs, sources):
        if what in ("report", "both") and g.leader is not None and g.verdict in ("tied", "unknown"):
            lead = g.leader
            rivals: list[Any]
            if g.verdict == "tied":
                rivals = [r for r in g.rows if r.tied_with_best]
            else:
                rivals = _near(float(lead.objective_value or 0.0),
                               [(r, float(r.objective_value or 0.0)) for r in g.rows
                                if r is not lead and r.feasible and r.objective_value is not None], near)
            why = f"{g.objective_name}: {lead.name} leads, {g.verdict}"
            for r in [lead, *rivals]:
                add(r, _objective_cells(r), why)
        if what in ("schedule", "both"):
            for s in schedules_of(g):
                if s.over != "concurrency":
                    continue
                for lv in s.levels:
                    if lv.best is not None or lv.leader is None:
                        continue
                    entries: list[Any] = lv.tied if lv.state == "tied" else _near(
                        lv.leader.tok_s, [(e, e.tok_s) for e in lv.entries if e is not lv.leader and e.meets], near)
                    why = f"ctx {s.context} x {s.unit} {lv.load:g}: {lv.leader.name} leads, {lv.state}"
                    for e in [lv.leader, *entries]:
                        add(e.row, {(int(s.context), int(lv.load))}, why)
    return targets


def _read(root: Path) -> tuple[list[Any], list[str]]:
    from sweep.record.result import iter_results

    found = sorted(iter_results(root), key=lambda x: str(x[0]))
    return [d for _, d in found], [str(p) for p, _ in found]


def _hours(path: Path, gpus: int) -> float:
    """GPU-hours a run took: its measured wall time (started -> finished) x the box's GPUs."""
    from sweep.record.result import TrialResult

    try:
        doc = TrialResult.load(path)
        a, b = doc.trial.started, doc.trial.finished
        if a and b:
            secs = (dt.datetime.fromisoformat(b) - dt.datetime.fromisoformat(a)).total_seconds()
            return max(0.0, secs) / 3600.0 * gpus
    except (OSError, ValueError):
        pass
    return 0.0


def _run(t: Target, run_dir: Path, extra: Sequence[str]) -> int:
    cells = "[" + ",".join(f"[{c},{k}]" for c, k in sorted(t.cells)) + "]"
    cmd = [sys.executable, "-m", "sweep", *t.overrides, f"workload.cells={cells}", "baseline.auto_run=false",
           *extra, f"hydra.run.dir={run_dir}"]
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "decide.log", "w") as log:
        return subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, check=False).returncode


def _open_lines(targets: dict[str, Target]) -> list[str]:
    whys = sorted({w for t in targets.values() for w in t.why})
    return [f"  open: {w}" for w in whys]


@command("sweep.decide")
def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    root = args.dir.resolve()
    runs = hours = 0.0
    rnd = 0
    while True:
        docs, sources = _read(root)
        if not docs:
            print(f"no result.json under {root}: nothing to decide", file=sys.stderr)
            return 1
        targets = open_targets(docs, sources, args.what, args.near)
        if not targets:
            print(f"decided: every verdict under {root} is decided ({int(runs)} run(s), {hours:.2f} GPU-h)")
            return 0
        budget_left = runs < args.max_trials and (args.max_gpu_hours is None or hours < args.max_gpu_hours)
        if args.dry_run or not budget_left:
            if not budget_left:
                print(f"budget spent ({int(runs)} run(s), {hours:.2f} GPU-h): these stay open", file=sys.stderr)
            for t in targets.values():
                cells = ", ".join(f"ctx {c} x conc {k}" for c, k in sorted(t.cells))
                print(f"{'would run' if args.dry_run else 'open'}: {t.name} [{t.config_id}] at {cells}")
            print("\n".join(_open_lines(targets)))
            return 0 if args.dry_run else EXIT_OPEN
        rnd += 1
        order = list(targets.values())
        shift = (rnd - 1) % len(order)
        order = order[shift:] + order[:shift]
        for i, t in enumerate(order):
            if runs >= args.max_trials or (args.max_gpu_hours is not None and hours >= args.max_gpu_hours):
                break
            run_dir = root / "decide" / f"round{rnd}" / str(i)
            cells = ", ".join(f"ctx {c} x conc {k}" for c, k in sorted(t.cells))
            print(f"[round {rnd}] {t.name}: measuring again {cells} ({'; '.join(t.why)})", flush=True)
            code = _run(t, run_dir, args.overrides)
            runs += 1
            hours += _hours(run_dir / "result.json", t.gpus)
            if code not in (0, 1):
                print(f"  exit {code}: see {run_dir / 'decide.log'}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
