"""``python -m sweep.decide --dir SWEEP_DIR``: race the open verdicts to a decision.

A grid, a search, a schedule or a recorded landscape measured a few times leaves load levels
open (:mod:`sweep.score.campaign`: no config shown within the practical margin of the best).
This measures again, round by round, **only the configs still in contention at each open level**
(racing: F-Race's shape over the campaign model's verdicts) -- a config is dropped as soon as it
is shown worse than the leader by more than the margin, a level stops as soon as it is decided or
equivalent, and a level whose gaps would need more rounds than the budget has left is said to be
better left (with its pick and regret bound) than measured. Each round runs every config still
in contention once, one server start each, rotated so none always goes first, with
``workload.cells`` naming its open cells: a copy of the config that pools into those cells only
(:mod:`sweep.score.configs`), never its headline, speedup or "run the best again". Repeated looks
at the data are paid for: the racing verdicts use a level split over the planned rounds
(Bonferroni), so stopping early does not find differences that are not there.

    python -m sweep.decide --dir multirun/2026-12-01/10-00-00 [--max-trials 12]
        [--max-gpu-hours H] [--margin 0.02] [--dry-run] [OVERRIDE ...]

**What runs comes from you and the project, not from files.** A copy's overrides contribute
only the knobs that make the config's identity (its groups and their keys), each checked as
``python -m sweep`` checks a command line; launch plumbing -- executables, environment, setup,
launcher, hosts, paths, ports, keys -- comes from decide's own command line (``OVERRIDE``) and the
project's config. A config whose identity needs plumbing from its file (an environment variable,
a masked api key) is named and not run: give it on the command line.

The runs go to ``<dir>/decide/<run>/round<r>/<config id>/`` (a new ``<run>`` each time: a rerun
never overwrites, and resumes from every result already there); one decide at a time per
directory (a second one is refused in one line); Ctrl-C or SIGTERM stop the running trial and its
server and keep what finished.

Exit status: 0 every raced level decided or equivalent; 3 some stay open (the budget ran out, or
a level is better left); 1 nothing could be run (no result, or no open config can be run again
from here); 2 bad input.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from sweep.errors import ConfigError, command, one_line_usage_errors

EXIT_OPEN = 3
# the groups whose knobs make a config's identity (sweep/score/configs.py)
_IDENTITY = ("spec", "hardware", "model", "server", "workload")
# launch plumbing and run settings: never taken from a file read back
_PLUMBING = ("server.executable", "server.env", "server.extra_env", "server.setup", "server.install",
             "server.api_key", "server.plumbing", "server.secret_flags",
             "workload.dataset_path", "hardware.perf.calibration")
# what decide sets itself on every run, or how a server is reached (not what it is): dropped
_OWN = ("workload.cells", "server.port", "server.host")
_PATHLIKE = ("path", "dir", "file", "executable", "command", "script")


@dataclass
class Target:
    """One config in contention: the overrides that run it again and the cells to measure."""

    config_id: str
    name: str
    overrides: list[str] | None
    cells: set[tuple[int, int]] = field(default_factory=set)
    why: list[str] = field(default_factory=list)
    gpus: int = 1
    refused: str | None = None  # why it cannot be run again from here


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m sweep.decide", description=(
        "Race the open load levels to a decision: measure again only the configs still in contention. "
        "Exit status: 0 decided, 3 some stay open, 1 nothing could be run, 2 bad input."))
    p.add_argument("--dir", type=Path, required=True, help="a sweep dir (or any dir of result.json files)")
    p.add_argument("--max-trials", type=int, default=12, help="runs at most (default 12)")
    p.add_argument("--max-gpu-hours", type=float, default=None,
                   help="GPU-hours at most: each run's measured time x the box's GPUs")
    p.add_argument("--margin", type=float, default=None,
                   help="the practical margin (default: the trials' objective.margin, 2%%)")
    p.add_argument("--what", choices=("schedule",), default="schedule",
                   help="what to decide: the schedule's load levels (the default and only choice)")
    p.add_argument("--dry-run", action="store_true", help="print what would run, run nothing")
    p.add_argument("overrides", nargs="*", help="overrides for every run (launch plumbing: server.port=..., "
                   "server.api_key=..., mlflow.enabled=false)")
    args = one_line_usage_errors(p).parse_args(argv)
    if not 1 <= args.max_trials <= 10_000:
        raise ConfigError("--max-trials", f"in [1, 10000], got {args.max_trials}")
    if args.max_gpu_hours is not None and not (math.isfinite(args.max_gpu_hours) and 0 < args.max_gpu_hours <= 1e6):
        raise ConfigError("--max-gpu-hours", f"in (0, 1e6], got {args.max_gpu_hours}")
    if args.margin is not None and not (math.isfinite(args.margin) and 0 <= args.margin < 0.5):
        raise ConfigError("--margin", f"a fraction in [0, 0.5), got {args.margin}")
    real = os.path.realpath(args.dir)
    if real in ("/proc", "/sys") or real.startswith(("/proc/", "/sys/", "/dev/")) or real == "/dev":
        raise ConfigError("--dir", f"{args.dir}: not a sweep dir (under /proc, /sys or /dev)")
    if not args.dir.is_dir():
        raise ConfigError("--dir", f"{args.dir}: not a directory")
    for o in args.overrides:
        if o.lstrip("+~").split("=", 1)[0].startswith(("hydra.run", "hydra.sweep", "workload.cells")):
            raise ConfigError(o.split("=", 1)[0], "decide sets it itself (each run's directory and cells)")
    if args.overrides:
        from sweep.compose import cmdline

        cmdline.validate(list(args.overrides))  # typos, values inside lists, /proc paths: as python -m sweep
    return args


def identity_overrides(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """(kept, plumbing): a copy's overrides split into the knobs of its identity and what a file may
    not choose (launch plumbing, paths, run settings)."""
    kept: list[str] = []
    plumbing: list[str] = []
    for o in overrides:
        key = o.lstrip("+~").split("=", 1)[0].strip()
        top = key.split(".", 1)[0].split("/", 1)[0]
        leaf = key.rsplit(".", 1)[-1].lower()
        if top not in _IDENTITY or key in _OWN:
            continue  # hydra.*, results.*, mlflow.*, baseline.*, resume.*, objective.*: how it ran
        if any(key == p or key.startswith(p + ".") for p in _PLUMBING) or any(w in leaf for w in _PATHLIKE) \
                or "***" in o:
            plumbing.append(key)
            continue
        kept.append(o)
    return kept, plumbing


def _target(row: Any) -> Target:
    doc = row.doc
    num = doc.config_section("hardware").get("num_gpus")
    t = Target(row.config_id, row.name, None, gpus=max(1, int(num or 1)) if isinstance(num, (int, float)) else 1)
    own = list(doc.trial.overrides or [])
    if not own:
        t.refused = "a recorded landscape's round: run it again with benchmarks/record_landscape.py"
        return t
    kept, plumbing = identity_overrides(own)
    if plumbing:
        t.refused = (f"its overrides set {', '.join(sorted(set(plumbing)))} (launch plumbing or a secret is never "
                     "taken from a file): give it on decide's command line to run it again")
        return t
    t.overrides = kept
    return t


@dataclass
class Plan:
    """One racing step: what to run, what is open, what is better left."""

    targets: dict[str, Target]
    open_levels: list[str]
    left: list[str]
    verdicts: dict[str, str]  # level label -> state and pick


def plan(docs: Sequence[Any], sources: Sequence[str], *, alpha: float, margin: float | None,
         budget_runs: int) -> Plan:
    """The next racing step from every result under the directory (the campaign model's verdicts at
    the racing level ``alpha``)."""
    from sweep.report.compare import build_groups
    from sweep.report.schedule import schedules_of
    from sweep.score.campaign import contenders
    from sweep.score.verdicts import campaign

    targets: dict[str, Target] = {}
    open_levels: list[str] = []
    left: list[str] = []
    verdicts: dict[str, str] = {}
    for g in build_groups(docs, sources):
        for s in schedules_of(g):
            if s.over != "concurrency":
                continue
            rows = {r.config_id: r for r in s.rows}
            camp = campaign([(r.config_id, r.parts or [(r.source, r.doc)], r.doc) for r in s.rows],
                            prior=s.spread, margin=margin, alpha=alpha)
            for lv in s.levels:
                label = f"{s.group.hardware_label} · {s.group.rows[0].workload} · ctx {s.context} x conc {lv.load:g}"
                among = [e.row.config_id for e in lv.entries if e.meets]
                if len(among) < 2:
                    continue
                v = camp.verdict((int(s.context), float(lv.load)), among)
                pick = rows[v.pick].name if v.pick in rows else "?"
                verdicts[label] = f"{v.state}: {v.pick_line(lambda k: rows[k].name if k in rows else k)}"
                race = contenders(v)
                if not race:
                    continue
                need = camp.rounds_needed((int(s.context), float(lv.load)), v)
                if need is None or need * len(race) > budget_runs:
                    # said, and still raced: what the budget buys is a tighter regret bound
                    more = "more than 50" if need is None else f"~{need}"
                    left.append(f"{label}: likely needs {more} more rounds of {len(race)} configs, more than the "
                                f"budget left ({budget_runs} run(s)): the budget may be better spent elsewhere; "
                                f"its pick now: {pick} ({verdicts[label]})")
                open_levels.append(label)
                for key in race:
                    row = rows[key]
                    t = targets.get(key) or _target(row)
                    targets[key] = t
                    t.cells.add((int(s.context), int(lv.load)))
                    if label not in t.why:
                        t.why.append(label)
    return Plan(targets, open_levels, left, verdicts)


def _read(root: Path) -> tuple[list[Any], list[str]]:
    from sweep.io.readback import Skipped
    from sweep.record.result import iter_results

    skipped = Skipped()
    found = sorted(iter_results(root, on_error=skipped), key=lambda x: str(x[0]))
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


def _command(t: Target, run_dir: Path, extra: Sequence[str]) -> list[str]:
    cells = "[" + ",".join(f"[{c},{k}]" for c, k in sorted(t.cells)) + "]"
    return [sys.executable, "-m", "sweep", *(t.overrides or []), f"workload.cells={cells}",
            "baseline.auto_run=false", *extra, f"hydra.run.dir={run_dir}"]


def _check(t: Target, extra: Sequence[str]) -> None:
    """The run's command line checked as ``python -m sweep`` checks it (refused: named, not run)."""
    from sweep.compose import cmdline
    from sweep.errors import SweepError

    try:
        cmdline.validate(_command(t, Path("/tmp/decide-check"), extra)[3:-1])
    except SweepError as exc:
        t.refused = f"its overrides do not check: {exc.one_line()}"


def _run(t: Target, run_dir: Path, extra: Sequence[str]) -> int:
    from launchers.local import run_tied

    run_dir.mkdir(parents=True, exist_ok=False)
    with open(run_dir / "decide.log", "w") as log:
        return run_tied(_command(t, run_dir, extra), stdout=log, stderr=subprocess.STDOUT)


def _cells(t: Target) -> str:
    return ", ".join(f"ctx {c} x conc {k}" for c, k in sorted(t.cells))


@command("sweep.decide")
def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    root = args.dir.resolve()
    from sweep import secrets
    from sweep.io import dirlock

    docs, sources = _read(root)
    if not docs:
        print(f"no result.json under {root}: nothing to decide", file=sys.stderr)
        return 1
    # the racing looks: a level split over the rounds the budget allows (Bonferroni)
    first = plan(docs, sources, alpha=0.05, margin=args.margin, budget_runs=args.max_trials)
    width = max(1, len(first.targets))
    looks = max(1, min(10, math.ceil(args.max_trials / width)))
    alpha = 0.05 / looks
    step = plan(docs, sources, alpha=alpha, margin=args.margin, budget_runs=args.max_trials)
    before = dict(step.verdicts)
    mask = secrets.mask_text
    if args.dry_run:
        for t in step.targets.values():
            if not t.refused:
                _check(t, args.overrides)
            state = f"cannot run: {t.refused}" if t.refused else f"at {_cells(t)}"
            print(mask(f"would run: {t.name} [{t.config_id}] {state}"))
        for line in step.left:
            print(mask(f"note: {line}"))
        print(f"racing looks: {looks} (each at level {alpha:.3g}); budget {args.max_trials} run(s)")
        return 0
    lock = dirlock.acquire(root / "decide")  # one decider per directory: a second is refused in one line
    try:
        run_id = dt.datetime.now().strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
        runs = 0
        hours = 0.0
        rnd = 0
        while True:
            runnable = [t for t in step.targets.values() if not t.refused]
            for t in runnable:
                _check(t, args.overrides)
            for t in step.targets.values():
                if t.refused:
                    print(mask(f"cannot run {t.name} again from here: {t.refused}"), file=sys.stderr)
            runnable = [t for t in step.targets.values() if not t.refused]
            budget_left = runs < args.max_trials and (args.max_gpu_hours is None or hours < args.max_gpu_hours)
            if not runnable or not budget_left:
                break
            rnd += 1
            shift = (rnd - 1) % len(runnable)
            order = runnable[shift:] + runnable[:shift]
            for t in order:
                if runs >= args.max_trials or (args.max_gpu_hours is not None and hours >= args.max_gpu_hours):
                    break
                run_dir = root / "decide" / run_id / f"round{rnd}" / t.config_id
                print(mask(f"[round {rnd}] {t.name}: {_cells(t)} ({'; '.join(t.why)})"), flush=True)
                code = _run(t, run_dir, args.overrides)
                runs += 1
                hours += _hours(run_dir / "result.json", t.gpus)
                if code not in (0, 1):
                    print(f"  exit {code}: see {run_dir / 'decide.log'}", file=sys.stderr)
            docs, sources = _read(root)
            step = plan(docs, sources, alpha=alpha, margin=args.margin,
                        budget_runs=max(0, args.max_trials - runs))
    finally:
        lock.release()
    after = step.verdicts
    print(f"spent: {runs} run(s), {hours:.2f} GPU-h; racing looks at level {alpha:.3g}")
    changed = [f"  {k}: {before.get(k, '-')} -> {v}" for k, v in after.items() if before.get(k) != v]
    print("verdicts changed:" if changed else "verdicts changed: none")
    for line in changed:
        print(mask(line))
    still = [t for t in step.targets.values()]
    for line in step.left if still else []:
        print(mask(f"note: {line}"))
    if not still:
        print(f"decided: every raced level under {root} is decided or equivalent")
        return 0
    if runs == 0 and still and all(t.refused for t in still):
        print("nothing could be run again from here (see above): these stay open", file=sys.stderr)
        for label in step.open_levels:
            print(mask(f"  open: {label}"), file=sys.stderr)
        return 1
    print(f"budget spent ({runs} run(s), {hours:.2f} GPU-h): these stay open", file=sys.stderr)
    for label in step.open_levels:
        print(mask(f"  open: {label}"), file=sys.stderr)
    return EXIT_OPEN


if __name__ == "__main__":
    sys.exit(main())
