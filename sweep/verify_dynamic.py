"""``python -m sweep.verify_dynamic --dir DIR``: run a per-load table against what it replaces.

Reads ``dynamic-<engine>.yaml`` in DIR (``python -m sweep.schedule --dir DIR --export vllm``) and,
for each table in it (or the one ``--workload``/``--family`` pick; ``--table`` puts a
hand-written table in place of the derived one), measures over the same loads

* the **dynamic** config (``spec.per_load`` = the table),
* the family's **static budgets** (every budget measured, ``--statics all``; or only those the table
  chose between and the best static over the loads, ``--statics chosen``),
* the autoregressive **baseline** (spec=none),

in ``--rounds`` rounds (default 3): each round runs every config once, one server start each
(tables of several workloads that share a config share its start: ``workload=a,b``), the order
rotated each round so none always goes first, into ``DIR/verify/<run id>/round<r>/<n>-<label>/`` (every
run of the command a dir of its own, one verification of a dir at a time: a rerun never writes over
an earlier one, and its rounds count beside the earlier ones). Each run
is a ``python -m sweep`` multirun with the config's own overrides, the table's workload and its
loads (``workload.contexts=[C] workload.concurrency=[loads]``), so its trials reach MLflow like any.
Then per table and load: dynamic / best static, dynamic / the best static at that load, dynamic /
baseline, with 95% intervals over the rounds (paired), their geometric mean over the loads and
the worst load (:mod:`sweep.report.verify`); ``DIR/verify.yaml`` and ``DIR/verify-<n>-*.png``;
an MLflow run with the verdicts when the trials' ``mlflow.enabled``. The last line printed is the
headline of the table where speculation pays (the best static beats the baseline), else the last:

    dynamic vs best static: X.XXx geometric mean over loads (worst load Y.YYx); vs baseline: worst load Z.ZZx

    python -m sweep.verify_dynamic --dir DIR [--rounds 3] [--statics all|chosen] [--workload W]
        [--family TEXT] [--table '[[1,1,8],[2,256,2]]'] [--dry-run] [--report-only] [OVERRIDE ...]

OVERRIDEs go on every run (e.g. ``hardware.cpu.threads_bind=1 workload.requests_per_cell=8``: what
the measurement's own command line had, when the table came from a recorded landscape). The export is
input (:mod:`sweep.compose.dynamic_read`): its tables are checked before anything runs and give only
identity knobs; launch plumbing comes from OVERRIDEs and the config, never from the file. Every run's
command line is checked as ``python -m sweep`` checks it before the first one starts.
Exit status: 0; 1 when nothing could be verified; 2 on bad input.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from sweep.errors import ConfigError, command

VERIFY_DIR = "verify"
RESULT = "verify.yaml"
# workload overrides of a measurement that the verification sets itself (the table's context and loads)
_OWN = ("workload.contexts=", "workload.concurrency=", "workload.cells=")


@dataclass
class Unit:
    """One config to start once per round, with the workloads it is measured on."""

    label: str
    overrides: list[str]
    workloads: list[list[str]] = field(default_factory=list)

    def commands(self, run_dir: Path, extra: Sequence[str]) -> list[list[str]]:
        """One multirun when the workloads differ only in the workload group (one server start), else one each."""
        groups = [[o for o in w if o.startswith("workload=")] for w in self.workloads]
        rest = [[o for o in w if not o.startswith("workload=")] for w in self.workloads]
        base = [sys.executable, "-m", "sweep", "-m", *self.overrides]
        tail = ["baseline.auto_run=false", *extra]
        if all(r == rest[0] for r in rest) and all(len(g) == 1 for g in groups):
            sweep = "workload=" + ",".join(dict.fromkeys(g[0].split("=", 1)[1] for g in groups))
            return [[*base, sweep, *rest[0], *tail, f"hydra.sweep.dir={run_dir}"]]
        return [[*base, *w, *tail, f"hydra.sweep.dir={run_dir}/w{i}"] for i, w in enumerate(self.workloads)]


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m sweep.verify_dynamic", description=(
        "Run a per-load table, its family's static budgets and the baseline over the same loads, in "
        "interleaved rounds; report per load the ratios with intervals."))
    p.add_argument("--dir", type=Path, required=True, help="the dir holding dynamic-<engine>.yaml")
    p.add_argument("--file", type=Path, default=None, help="the export file (default: the dir's dynamic-*.yaml)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of every config (default 3)")
    p.add_argument("--statics", choices=("all", "chosen"), default="all",
                   help="all budgets of the family (default), or those the table uses and the best static")
    p.add_argument("--workload", default=None, help="only the table of this workload")
    p.add_argument("--family", default=None, metavar="TEXT", help="only tables whose family name contains TEXT")
    p.add_argument("--table", default=None, metavar="JSON",
                   help="a hand-written table in place of the derived one, e.g. [[1,1,8],[2,256,2]]")
    p.add_argument("--dry-run", action="store_true", help="print the runs, run nothing")
    p.add_argument("--report-only", action="store_true", help="run nothing: report the runs under DIR/verify")
    p.add_argument("overrides", nargs="*", help="more overrides for every run")
    from sweep.compose import arguments

    return arguments.parse("sweep.verify_dynamic", p, argv)  # every argument by its rule


def _export_file(args: argparse.Namespace) -> Path:
    if args.file is not None:
        if not args.file.is_file():
            raise ConfigError("--file", f"{args.file}: no such file")
        return Path(args.file)
    found = sorted(args.dir.glob("dynamic-*.yaml"))
    if len(found) != 1:
        raise ConfigError("--dir", f"{args.dir}: {'no' if not found else 'more than one'} dynamic-<engine>.yaml "
                          "(python -m sweep.schedule --dir DIR --export vllm writes it; --file picks one)")
    return found[0]


def _tables(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The export's tables to verify, each checked as data and carrying identity knobs only
    (:mod:`sweep.compose.dynamic_read`); what a table's file gave that is not taken is named."""
    from sweep import secrets
    from sweep.compose import dynamic_read
    from sweep.report.dynamic import parse_table, table_text

    path = _export_file(args)
    checked = dynamic_read.checked_tables(dynamic_read.read(path), path, family=not args.report_only)
    picked = [c for c in checked if (args.workload is None or c.workload == args.workload)
              and (args.family is None or args.family in c.family)]
    hand = parse_table(args.table) if args.table is not None else None
    if hand is not None:
        if len(picked) != 1:
            raise ConfigError("--table", f"applies to one table; {len(picked)} match (pick one with --workload "
                              "and --family)")
        if not args.report_only:
            dynamic_read.within_family(picked[0], hand, "--table")
        picked[0].per_load = hand
    picked = [c for c in picked if c.per_load]
    if not picked:
        raise ConfigError("--file", f"{path}: no table to verify (every matching one is 'no table': the baseline "
                          "wins; give one with --table)")
    tables = []
    for c in picked:
        if c.dropped:
            print(secrets.mask_text(f"note: {path.name} tables[{c.index}]: not taken from the file (launch "
                                    "plumbing comes from your command line and config): " + " ".join(c.dropped)),
                  file=sys.stderr)
        t = c.as_dict()
        assert c.per_load is not None
        keep = [o for o in (c.overrides if c.overrides is not None else _rebuild(t))
                if not o.lstrip("+~").startswith(("spec.budget=", "spec.per_load="))]
        # the table the file gives (or --table) is the one run: the budget and per_load lines are its own
        top = max(k for _, _, k in c.per_load)
        t["overrides"] = [*keep, f"spec.budget={top}", f"spec.per_load={table_text(c.per_load)}"]
        tables.append(t)
    return tables


def _rebuild(t: dict[str, Any]) -> list[str]:
    """A 'no table' entry's dynamic overrides: its newest static's, the budget left out."""
    statics = t.get("statics") or {}
    top = statics[max(statics)] if statics else {}
    return [o for o in top.get("overrides") or [] if not o.startswith(("server=", "spec.budget="))]


def _chosen(t: dict[str, Any]) -> set[int]:
    """The budgets the table uses, and the best static over the loads as measured."""
    import math

    used = {int(k) for _, _, k in t["per_load"] if int(k) > 0}
    names = {int(k): m.get("name") for k, m in (t.get("statics") or {}).items()}
    best, best_gm = None, -math.inf
    for k, name in names.items():
        vals = [lv.get("measured", {}).get(name) for lv in t.get("levels") or []]
        if vals and all(isinstance(x, (int, float)) and x > 0 for x in vals):
            gm = sum(math.log(x) for x in vals) / len(vals)
            if gm > best_gm:
                best, best_gm = k, gm
    return used | ({best} if best is not None else set())


def units_of(tables: Sequence[dict[str, Any]], statics: str) -> list[Unit]:
    """What to start each round: the dynamic configs, the statics and the baseline, each once."""
    units: dict[tuple[str, ...], Unit] = {}

    def add(label: str, overrides: list[str], workload: list[str]) -> None:
        u = units.setdefault(tuple(overrides), Unit(label, list(overrides)))
        if workload not in u.workloads:
            u.workloads.append(workload)

    for i, t in enumerate(tables, 1):
        loads = [int(lv["load"]) for lv in t.get("levels") or []]
        wl = [o for o in t.get("workload_overrides") or [] if not o.startswith(_OWN)]
        if not any(o.startswith("workload=") for o in wl):
            wl = [f"workload={t.get('workload')}", *wl]
        wl += [f"workload.contexts=[{int(t['context'])}]", "workload.concurrency=[" + ",".join(map(str, loads)) + "]"]
        engine = str(t.get("engine") or "vllm")

        def on(overrides: list[str], engine: str = engine) -> list[str]:
            return [f"server={engine}", *[o for o in overrides if not o.startswith("server=")]]

        add(f"dynamic{i}", on(list(t["overrides"])), wl)
        keep = _chosen(t) if statics == "chosen" else None
        for k, m in sorted((t.get("statics") or {}).items()):
            if keep is None or int(k) in keep:
                add(f"b{k}", on(list(m.get("overrides") or [])), wl)
        if t.get("baseline"):
            add("baseline", on(list(t["baseline"].get("overrides") or [])), wl)
    return list(units.values())


def report(root: Path, tables: Sequence[dict[str, Any]] | None, command_line: str) -> int:
    """Verdicts from every result under ``root/verify`` (and the export's tables to pick them)."""
    import yaml

    from sweep.io.atomic import write_atomic_text
    from sweep.record.result import iter_results
    from sweep.record.verify_run import log_verification
    from sweep.report.verify import verifications
    from sweep.report.verify_view import document, pngs, text_lines

    found = sorted(iter_results(root / VERIFY_DIR), key=lambda x: str(x[0]))
    docs, sources = [d for _, d in found], [str(p) for p, _ in found]
    vs = verifications(docs, sources)
    if tables is not None:
        wanted = {(str(t.get("workload")), int(t["context"]), str(t["per_load"])) for t in tables}
        vs = [v for v in vs if (v.workload, v.context, str(v.per_load)) in wanted]
    if not vs:
        print(f"nothing to verify under {root / VERIFY_DIR}: no dynamic config measured beside its family's "
              "static budgets", file=sys.stderr)
        return 1
    for v in vs:
        print("\n".join(text_lines(v)))
        print()
    doc = document(vs, command=command_line)
    path = write_atomic_text(root / RESULT, "# per-load tables checked against their static budgets and the baseline "
                             "(docs/deployment.md)\n" + yaml.safe_dump(doc, sort_keys=False, width=110))
    charts = pngs(vs, root)
    print(f"written: {path}", file=sys.stderr)
    for p in charts:
        print(f"chart:   {p}", file=sys.stderr)
    # the MLflow the trials logged to (their own mlflow block); none recorded, or off: no run
    settings = docs[-1].config_section("mlflow") if docs else {}
    if settings.get("enabled") is True:
        run = log_verification(settings, doc, [path, *charts], name=f"verify {root.name}")
        if run is not None:
            print(f"mlflow:  run {run} (verify)", file=sys.stderr)
    pays = [v for v in vs if v.pays]
    print((pays or vs)[-1].headline())
    return 0


# the verification sets these itself: the table's loads and context, and where each run writes
_SET_HERE = ("workload.contexts", "workload.concurrency", "workload.cells", "hydra.sweep.dir", "hydra.run.dir",
             "hydra.sweep.subdir")


def _own_keys_refused(overrides: Sequence[str]) -> None:
    for line in overrides:
        key = line.lstrip("+~").split("=", 1)[0]
        if key in _SET_HERE:
            raise ConfigError(key, "is set by the verification (the table's context and loads; its run dirs under "
                              "--dir): leave it out")


def _run_id() -> str:
    import os
    import time

    return time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"


def _new_run_dir(base: Path) -> Path:
    """``base/<run id>``, made here: a directory no other run of this dir used (none is ever reused)."""
    for n in range(1000):
        path = base / (_run_id() + (f"-{n}" if n else ""))
        try:
            path.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            continue
        return path
    raise ConfigError("--dir", f"{base}: no new run dir could be made")


def _run_dir(run_root: Path, rnd: int, i: int, label: str) -> Path:
    """``run_root/round<r>/<i>-<label>``, checked to stay inside ``run_root`` (the label is ours,
    ``b<budget>`` of a whole number; checked all the same, as every name that becomes a path)."""
    from sweep.io.readback import Invalid, inside

    try:
        return inside(run_root / f"round{rnd}", f"{i}-{label}", "", "run dir")
    except Invalid as exc:
        raise ConfigError("--file", str(exc)) from None


def _check_runs(units: Sequence[Unit], run_root: Path, extra: Sequence[str]) -> None:
    """Every run's command line checked as ``python -m sweep`` checks it, before the first one starts:
    the table through spec.per_load's rule and the engine's own limits, the user's overrides on it."""
    from sweep.compose import cmdline

    for i, u in enumerate(units):
        for cmd in u.commands(_run_dir(run_root, 1, i, u.label), extra):
            try:
                cmdline.validate(cmd[3:])
            except ConfigError as exc:
                raise ConfigError(exc.key, f"{exc.message} (in the {u.label} run: check the export's table, or "
                                  "your overrides)") from None


@command("sweep.verify_dynamic")
def main(argv: Sequence[str] | None = None) -> int:
    from sweep import secrets

    given = list(sys.argv[1:] if argv is None else argv)
    secrets.remember(secrets.found_in(given))  # an api key given here is masked wherever it would appear
    args = _parse(argv)
    _own_keys_refused(args.overrides)
    from sweep.bench.boxstate import recording_policy

    # a verification is a recording: it waits for a busy box, then refuses it (the user's policy wins)
    args.overrides = [*recording_policy(args.overrides), *args.overrides]
    root = args.dir.resolve()
    tables = _tables(args)
    line = secrets.mask_text("python -m sweep.verify_dynamic " + " ".join(secrets.mask_argv(given))).strip()
    if args.report_only:
        with _held(root):
            return report(root, tables, line)
    units = units_of(tables, args.statics)
    if args.dry_run:
        run_root = root / VERIFY_DIR / _run_id()  # what a run would make; nothing is made
        _check_runs(units, run_root, args.overrides)
        for rnd, i, u, run_dir in _schedule(units, args.rounds, run_root):
            for cmd in u.commands(run_dir, args.overrides):
                print(secrets.mask_text(" ".join(secrets.mask_argv(cmd[1:]))))
        return 0
    with _held(root):
        run_root = _new_run_dir(root / VERIFY_DIR)
        try:
            _check_runs(units, run_root, args.overrides)
        except ConfigError:
            run_root.rmdir()  # nothing ran: no empty run left behind
            raise
        if args.rounds < 3:
            print(f"note: {args.rounds} round(s): the ratios are judged by the campaign model (rounds as blocks, "
                  "the noise pooled over every arm and load); one round measures no noise, only a declared "
                  "hardware.spread judges", file=sys.stderr)
        print(f"runs: {run_root}", file=sys.stderr)
        from launchers.local import run_tied

        for rnd, i, u, run_dir in _schedule(units, args.rounds, run_root):
            for cmd in u.commands(run_dir, args.overrides):
                shown = secrets.mask_text(" ".join(secrets.mask_argv(cmd[3:])))
                print(f"[round {rnd}/{args.rounds}] {u.label}: {shown}", flush=True)
                run_dir.mkdir(parents=True, exist_ok=True)
                with open(run_dir / "verify.log", "a") as log:
                    # tied to us: a killed verification leaves no trial or server behind
                    code = run_tied(cmd, stdout=log, stderr=subprocess.STDOUT)
                if code != 0:
                    print(f"  exit {code}: see {run_dir / 'verify.log'}", file=sys.stderr)
                if busy := _refused_in(run_dir):
                    print(f"{busy}\nstopped: round {rnd} {u.label} was refused; {run_root} holds the runs before "
                          "it (run the same command again on a quiet box: a rerun adds new rounds)", file=sys.stderr)
                    report(root, tables, line)
                    return 1
        return report(root, tables, line)


def _refused_in(run_dir: Path) -> str | None:
    """The busy-box policy's line when a trial of this run was refused (sweep/bench/boxstate.py)."""
    from sweep.bench.boxstate import refused
    from sweep.record.result import iter_results

    return next((r for _, doc in iter_results(run_dir) if (r := refused(doc.to_dict()))), None)


def _schedule(units: Sequence[Unit], rounds: int, run_root: Path) -> list[tuple[int, int, Unit, Path]]:
    """Each round every unit once, the order rotated so none always goes first."""
    out = []
    for rnd in range(1, rounds + 1):
        shift = (rnd - 1) % len(units)
        for i, u in enumerate([*units[shift:], *units[:shift]]):
            out.append((rnd, i, u, _run_dir(run_root, rnd, i, u.label)))
    return out


def _held(root: Path) -> Any:
    """One verification of a dir at a time: a second one is refused in one line (sweep/io/dirlock.py)."""
    import contextlib

    from sweep.io import dirlock

    @contextlib.contextmanager
    def held() -> Any:
        lock = dirlock.acquire(root / VERIFY_DIR, key="--dir", who="another verify_dynamic",
                               hint="wait for it to end (a rerun adds new rounds beside its runs)")
        try:
            yield lock
        finally:
            lock.release()

    return held()


if __name__ == "__main__":
    sys.exit(main())
