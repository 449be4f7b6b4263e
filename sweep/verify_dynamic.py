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
rotated each round so none always goes first, into ``DIR/verify/round<r>/<n>-<label>/``. Each run
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
the measurement's own command line had, when the table came from a recorded landscape).
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
    import yaml

    from sweep.report.dynamic import FORMAT, parse_table, table_text

    path = _export_file(args)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError("--file", f"{path}: cannot read it ({str(exc).splitlines()[0]})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("tables"), list):
        raise ConfigError("--file", f"{path}: not a {FORMAT} file")
    tables = [t for t in doc["tables"] if isinstance(t, dict)
              and (args.workload is None or t.get("workload") == args.workload)
              and (args.family is None or args.family in str(t.get("family")))]
    hand = parse_table(args.table) if args.table is not None else None
    if hand is not None:
        if len(tables) != 1:
            raise ConfigError("--table", f"applies to one table; {len(tables)} match (pick one with --workload "
                              "and --family)")
        t = tables[0]
        top = max(k for _, _, k in hand)
        keep = [o for o in (t.get("overrides") or _rebuild(t)) if not o.startswith(("spec.budget=", "spec.per_load="))]
        t.update(per_load=hand, overrides=[*keep, f"spec.budget={top}", f"spec.per_load={table_text(hand)}"])
    tables = [t for t in tables if t.get("per_load")]
    if not tables:
        raise ConfigError("--file", f"{path}: no table to verify (every matching one is 'no table': the baseline "
                          "wins; give one with --table)")
    return tables


def _rebuild(t: dict[str, Any]) -> list[str]:
    """A 'no table' entry's dynamic overrides: its newest static's, the budget left out."""
    statics = t.get("statics") or {}
    top = statics[max(statics)] if statics else {}
    return [f"server={t.get('engine')}",
            *[o for o in top.get("overrides") or [] if not o.startswith(("server=", "spec.budget="))]]


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


@command("sweep.verify_dynamic")
def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    root = args.dir.resolve()
    tables = _tables(args)
    line = "python -m sweep.verify_dynamic " + " ".join(sys.argv[1:] if argv is None else list(argv))
    if args.report_only:
        return report(root, tables, line.strip())
    units = units_of(tables, args.statics)
    if args.rounds < 3:
        print(f"note: {args.rounds} round(s): the intervals rest on the box's spread measured over the rounds' "
              "cells (two rounds: the wider of it and each pair's own; one: no spread can be measured, only a "
              "declared hardware.spread judges); 3 or more give each ratio an interval of its own",
              file=sys.stderr)
    for rnd in range(1, args.rounds + 1):
        shift = (rnd - 1) % len(units)
        for i, u in enumerate(units[shift:] + units[:shift]):
            run_dir = root / VERIFY_DIR / f"round{rnd}" / f"{i}-{u.label}"
            for cmd in u.commands(run_dir, args.overrides):
                if args.dry_run:
                    print(" ".join(cmd[1:]))
                    continue
                print(f"[round {rnd}/{args.rounds}] {u.label}: {' '.join(cmd[3:])}", flush=True)
                run_dir.mkdir(parents=True, exist_ok=True)
                from launchers.local import run_tied

                with open(run_dir / "verify.log", "a") as log:
                    # tied to us: a killed verification leaves no trial or server behind
                    code = run_tied(cmd, stdout=log, stderr=subprocess.STDOUT)
                if code != 0:
                    print(f"  exit {code}: see {run_dir / 'verify.log'}", file=sys.stderr)
    if args.dry_run:
        return 0
    return report(root, tables, line.strip())


if __name__ == "__main__":
    sys.exit(main())
