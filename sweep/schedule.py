"""``python -m sweep.schedule --dir SWEEP_DIR``: which config to run at which load.

Reads every result.json under the directory (and every recorded landscape,
``specsweep.landscape/1``: each of its rounds is a trial), and per group of comparable
trials and context prints the best feasible config at each measured load
level (ties within noise marked), its speedup over the autoregressive
baseline there, and where the baseline or a shorter draft takes over
(:mod:`sweep.report.schedule`). Writes ``schedule.yaml`` (load bands ->
config overrides) and the charts (``schedule-ctx<C>.png``: tok/s vs load, one
line per config, the best envelope marked; ``pareto-user-vs-gpu.png``) into
the directory.

    python -m sweep.schedule --dir multirun/2026-12-01/10-00-00
        [--slo tpot_ms=50 --slo ttft_ms=2000] [--percentile 90] [--no-slo] [--no-write]

``--slo`` judges under another SLO than the trials ran with, from the
latency rows each cell keeps (the trials' own ``objective.slo`` by default).

``--export vllm`` (or ``sim``) also derives, for every family of configs that differ only in
``spec.budget`` (and the baseline), the per-load budget table the engine runs itself
(``spec.per_load``, vLLM's ``num_speculative_tokens_per_batch_size``;
:mod:`sweep.report.dynamic`), prints its ``--speculative-config`` and the overrides that run it,
and writes ``dynamic-<engine>.yaml`` beside ``schedule.yaml`` -- what
``python -m sweep.verify_dynamic --dir DIR`` checks against the static budgets and the baseline.
``--family TEXT`` keeps the families whose name contains TEXT.
The tables fit the terminal (``$COLUMNS`` when piped): a pick is named without what every config
of its schedule shares (the title says it once), shortened from the middle; ``--full-names`` lists
each config's full name and id under its table; ``--format json`` prints the levels as JSON rows
(full name, config id, verdict, tok/s, interval, n) instead of the tables.
Exit status: 0; 1 when no trial finished, or when a result file was skipped (each named in one
line on stderr, ``skipped <path>: <why>``: sweep/io/readback.py; the others are scheduled); 2 on
bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

from sweep.errors import ConfigError, command
from sweep.stats.slo import LIMITS, Slo

FILENAME = "schedule.yaml"
DYNAMIC = "dynamic-{engine}.yaml"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sweep.schedule", description=(
        "Per load level the best feasible config, its speedup over the baseline, the crossover; "
        "writes schedule.yaml and charts into the sweep dir."))
    p.add_argument("--dir", type=Path, required=True, help="a sweep dir (or any dir of result.json files)")
    p.add_argument("--slo", action="append", default=[], metavar="LIMIT=MS",
                   help=f"judge under this limit instead of the trials' objective.slo ({', '.join(LIMITS)}); "
                        "repeatable")
    p.add_argument("--percentile", type=float, default=None,
                   help="with --slo: the share of requests (percent) that must meet every limit (default 90)")
    p.add_argument("--no-slo", action="store_true",
                   help="ignore the trials' objective.slo: every cell without failed requests counts")
    p.add_argument("--no-write", action="store_true", help="print only: no schedule.yaml, no charts")
    p.add_argument("-o", dest="out", type=Path, default=None,
                   help="where schedule.yaml, the charts and the export go (default: the --dir itself, unless it "
                        "lies inside this project's source tree: then give -o)")
    p.add_argument("--export", choices=("vllm", "sim"), default=None,
                   help="derive each budget family's per-load table (spec.per_load) for this engine: print its "
                        "launch argument and overrides, write dynamic-<engine>.yaml")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="table (default) or json: each level's pick with its full name, config id, tok/s, "
                        "interval and n, on stdout")
    p.add_argument("--full-names", action="store_true",
                   help="with the table: every config's full name and config id under its table")
    p.add_argument("--family", default=None, metavar="TEXT",
                   help="with --export: only families whose name contains TEXT (e.g. ngram-max4-min2)")
    return p


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    from sweep.compose import arguments

    return arguments.parse("sweep.schedule", parser(), argv)  # every argument by its rule


def _slo(args: argparse.Namespace) -> Slo | None:
    if args.no_slo:
        if args.slo or args.percentile is not None:
            raise ConfigError("--no-slo", "not with --slo/--percentile")
        return Slo()  # no limit: nothing is judged
    if not args.slo and args.percentile is None:
        return None
    from sweep.compose import bounds

    values: dict[str, float] = {}
    for item in args.slo:
        key, sep, raw = item.partition("=")
        if not sep or key not in LIMITS:
            raise ConfigError("--slo", f"LIMIT=MS with LIMIT one of {', '.join(LIMITS)}, got {item!r}")
        # the rule of objective.slo.<limit> (the key table): finite, > 0, bounded -- as in a config
        values[key] = bounds.check(f"--slo {key}", raw.strip(), rule_key=f"objective.slo.{key}")
    pct = args.percentile
    if pct is not None:
        pct = bounds.check("--percentile", pct, rule_key="objective.slo.percentile")
    if not values:
        raise ConfigError("--percentile", "needs at least one --slo LIMIT=MS to judge")
    return Slo(**values, **({"percentile": pct} if pct is not None else {}))


def _out_dir(args: argparse.Namespace) -> Path | None:
    """Where the files go: ``-o``, else the results' dir -- never into the project's own source tree
    (a recorded landscape under benchmarks/ is read, not written beside). None: print only."""
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        return Path(args.out)
    src = Path(__file__).resolve().parents[1]
    here = args.dir.resolve()
    if (src / ".git").exists() and (here == src or src in here.parents):
        print(f"note: {args.dir} lies inside the project's source tree: nothing written there (give -o OUT)",
              file=sys.stderr)
        return None
    return Path(args.dir)


def _landscapes(root: Path, skipped: Any) -> list[tuple[Any, Any]]:
    """Recorded landscapes (``specsweep.landscape/1``) among the directory's JSON files, as the
    trials they ran: anyone can check a schedule against a landscape's raw cells without its work dir."""
    from sweep.report.landscape_trials import landscape_trials

    return list(landscape_trials(root, skipped.add))


def _export(args: argparse.Namespace, docs: list[Any], sources: list[str], slo: Slo | None, command: str,
            out: Path | None) -> None:
    """``--export``: the per-load tables, printed and written beside schedule.yaml."""
    from sweep.report.dynamic import derive
    from sweep.report.dynamic_export import document, text_lines

    from sweep.report import dynamic_pick

    tables, other = dynamic_pick.for_engine(derive(docs, sources, slo=slo, family=args.family), args.export)
    print()
    if other:
        engines = ", ".join(sorted({t.server for t in other}))
        print(f"left out: {len(other)} table(s) measured on server={engines} -- an export for {args.export} is "
              f"made from {args.export}'s own measurements (or the simulator's)"
              + (f"; --export {engines} gives theirs" if engines in ("vllm", "sim") else ""))
    if not tables:
        match = f" matching {args.family!r}" if args.family else ""
        print(f"no per-load table: no family of configs differing only in spec.budget (with the baseline) "
              f"was measured at closed-loop loads on {args.export} under {args.dir}{match}")
        return
    doc, rendered = document(tables, args.export, command=command)
    for t, r in zip(tables, rendered):
        print("\n".join(text_lines(t, args.export, r)))
        print()
    picks = dynamic_pick.recommend(tables)
    doc["recommended"] = [p.to_dict() for p in picks]
    for p in picks:
        print("\n".join(dynamic_pick.lines(p, args.export, rendered[tables.index(p.table)])))
        print()
    if args.no_write or out is None:
        return
    import yaml

    from sweep.io.atomic import write_atomic_text

    path = write_atomic_text(out / DYNAMIC.format(engine=args.export),
                             "# per-load speculation derived from measured cells (docs/deployment.md); "
                             "python -m sweep.verify_dynamic --dir <this dir> checks it\n"
                             + yaml.safe_dump(doc, sort_keys=False, width=110))
    print(f"written: {path}", file=sys.stderr)


def _recommend(schedules: list[Any], docs: list[Any], sources: list[str], slo: Slo | None) -> None:
    """Per engine the one thing to deploy per workload, as ``--export`` ends, without writing it: the
    per-load table (sweep/report/dynamic_pick.py) where the engine takes one, else the one static
    config whose estimates give the most throughput over the schedule's loads."""
    from sweep.report import dynamic_pick
    from sweep.report.dynamic import derive
    from sweep.report.dynamic_export import ENGINES, render_table

    tables = derive(docs, sources, slo=slo)
    engines = sorted({str(d.config_section("server").get("name") or "") for d in docs} - {""})
    for engine in engines:
        print()
        if engine not in ENGINES:
            for sch in schedules:
                if sch.group.rows and sch.group.rows[0].doc.config_section("server").get("name") == engine:
                    print(f"recommended on {engine}: " + _static_pick(sch, engine))
            continue
        picks = dynamic_pick.recommend([t for t in tables if t.server == engine])
        if not picks:
            print(f"recommended on {engine}: no per-load table (no family of configs differing only in "
                  "spec.budget, with the baseline): the schedule's pick per load above")
        for pk in picks:
            rendered = render_table(pk.table, engine)
            print(f"recommended on {engine}: " + "\n".join(dynamic_pick.lines(pk, engine, rendered)))
        print(f"  (--export {engine} prints every table and writes dynamic-{engine}.yaml for sweep.verify_dynamic)")


def _static_pick(sch: Any, engine: str) -> str:
    """One config for every load (an engine that runs one draft length for all batches): the one whose
    estimates over the schedule's loads have the highest geometric mean, the others' distance below."""
    import math

    from sweep.report.shortnames import short_names

    loads = [lv.load for lv in sch.levels]
    scores = []
    for name, curve in sch.curves.items():
        at = {load: tok for load, tok, _ in curve if tok and tok > 0}
        if loads and all(x in at for x in loads):
            scores.append((sum(math.log(at[x]) for x in loads) / len(loads), name))
    where = f"{sch.group.workload_label.split(' (')[0]} (ctx {sch.context})"
    if not scores:
        return f"{where}: no config measured at every load of the schedule: its pick per load above"
    scores.sort(reverse=True)
    short = dict(zip([n for _, n in scores], short_names([n for _, n in scores]).names))
    best, name = scores[0]
    others = ", ".join(f"{short[n]} ({1 - math.exp(v - best):.0%} below)" for v, n in scores[1:4])
    return (f"{where}: {short[name]} at every load ({engine} runs one draft length for all batches) -- "
            f"{math.exp(best):,.1f} tok/s, the geometric mean of its estimates at {sch.unit} "
            f"{','.join(f'{x:g}' for x in loads)}" + (f"; alternatives: {others}" if others else "")
            + ("; open levels above: within their noise, not a verdict" if any(lv.state in ("open", "unknown")
                                                                               for lv in sch.levels) else ""))


@command("sweep.schedule")
def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    slo = _slo(args)  # a ConfigError: one line at the boundary, exit 2
    if args.family is not None and args.export is None:
        raise ConfigError("--family", "only with --export")
    if not args.dir.is_dir():
        raise ConfigError("--dir", f"{args.dir}: not a directory")
    from sweep.record.result import iter_results
    from sweep.report.schedule import build_schedules, schedule_document
    from sweep.report.schedule_text import print_schedules
    from sweep.io.readback import Skipped

    skipped = Skipped()  # each bad file: one line on stderr; the others are scheduled; exit 1
    found = sorted(iter_results(args.dir, on_error=skipped), key=lambda x: str(x[0]))
    found += _landscapes(args.dir, skipped)  # recorded landscapes: each round a trial
    from sweep.score.consistency import consistent

    # a copy whose identity fields contradict its own launch: named (exit 1), never pooled
    found = consistent(found, lambda f: f[1], lambda f: f[0], on_bad=skipped.add)
    schedules = build_schedules([d for _, d in found], slo, [str(p) for p, _ in found])
    if not schedules:
        print(f"no finished trial that passes the correctness gate under {args.dir}: no schedule", file=sys.stderr)
        return 1
    if args.format == "json":
        import json

        from sweep.report.schedule_text import schedule_rows

        print(json.dumps({"dir": str(args.dir), "levels": schedule_rows(schedules)}, indent=2, default=str))
    else:
        print_schedules(schedules, where=args.dir, full=args.full_names)
    command = "python -m sweep.schedule " + " ".join(sys.argv[1:] if argv is None else list(argv))
    out = None if args.no_write else _out_dir(args)
    if args.export is not None:
        _export(args, [d for _, d in found], [str(p) for p, _ in found], slo, command.strip(), out)
    elif args.format != "json":
        _recommend(schedules, [d for _, d in found], [str(p) for p, _ in found], slo)
    if out is None:
        return skipped.exit_code()
    import yaml

    from sweep.io.atomic import write_atomic_text
    from sweep.report.deployment_plots import deployment_plots

    doc = schedule_document(schedules, command=command.strip())
    path = write_atomic_text(out / FILENAME, "# which config at which load (docs/deployment.md): each band's "
                             "overrides go on the sweep's own command line\n"
                             + yaml.safe_dump(doc, sort_keys=False, width=110))
    print(f"written: {path}", file=sys.stderr)
    for p in deployment_plots(schedules, out):
        print(f"chart:   {p}", file=sys.stderr)
    return skipped.exit_code()


if __name__ == "__main__":
    sys.exit(main())
