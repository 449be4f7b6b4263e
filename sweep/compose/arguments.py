"""Every command's arguments in one table, each checked by a rule of the key table's kinds.

The config's keys have one rule each (:mod:`sweep.compose.keys`); the commands' own arguments
(``python -m sweep.schedule --slo tpot_ms=inf``, ``.report -o``, ``.calibrate -o``, the benchmarks'
``--rounds``) were checked ad hoc or not at all. Here each argument of each command is a row
(:data:`ARGUMENTS`: its flag, argparse's ``dest`` and a :class:`~sweep.compose.keys.Rule`), and
:func:`parse` -- what every command's parser goes through -- refuses a parser argument without a
row (so a new argument gets a rule with it), parses with one-line usage errors and checks every
value by its rule: a ConfigError naming the argument, exit 2, before anything runs. The bad-input
fuzz (tests/faults/test_key_fuzz.py) draws values from these rules as it does from the keys'.
Overrides a command passes on (``python -m sweep.engines llamacpp model=smollm2``, a benchmark's
trailing overrides) are checked by :func:`check_overrides`: the very check ``python -m sweep`` runs.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from sweep.compose.keys import (
    MAX_CONCURRENCY,
    MAX_CONTEXT,
    MAX_REQUESTS,
    MAX_SECONDS,
    MAX_SEED,
    MAX_TRIALS,
    RULES,
    Rule,
)
from sweep.errors import ConfigError


@dataclass(frozen=True)
class Arg:
    """One argument of a command: how it is written, argparse's ``dest`` and its rule; for override
    lines the command passes on, ``base``: the overrides they go on top of (of the parsed arguments);
    ``needs``: the argument it only works with (refused without it)."""

    flag: str
    dest: str
    rule: Rule
    base: Callable[[argparse.Namespace], list[str]] | None = None
    # the dest of an argument this one means nothing without (given alone it was silently ignored)
    needs: str | None = None


def _export_overrides(folder: Any, file: Any) -> list[str]:
    """The first table's identity overrides of a ``dynamic-<engine>.yaml`` (what ``verify_dynamic``'s
    extra overrides go on top of), read by the export's one reader (:mod:`sweep.compose.dynamic_read`:
    never a FIFO, a device or an alias bomb); none when there is no usable export (the command says so
    itself)."""
    from pathlib import Path

    from sweep.compose import dynamic_read

    try:
        files = [Path(file)] if file is not None else sorted(Path(folder).glob("dynamic-*.yaml"))
        if not files:
            return []
        t = dynamic_read.checked_tables(dynamic_read.read(files[0]), files[0])[0]
    except (ConfigError, OSError, IndexError):
        return []
    return [f"server={t.engine}", *(t.overrides or [])]


def _int(lo: float, hi: float, what: str = "") -> Rule:
    return Rule("int", lo, hi, what=what)


FLAG = Rule("bool")
NAME = Rule("name")
TEXT = Rule("str")
INDIR = Rule("indir")
OUTDIR = Rule("outdir")
OUTFILE = Rule("outfile")
OVERRIDES = Rule("overrides")
TOKENS = _int(1, MAX_CONTEXT, "new tokens per request")
CONTEXT = _int(1, MAX_CONTEXT, "prompt tokens")
CONCURRENCY = _int(1, MAX_CONCURRENCY, "in-flight requests")
REQUESTS = _int(1, MAX_REQUESTS, "requests")
ROUNDS = _int(1, 1000, "rounds")

ARGUMENTS: dict[str, tuple[Arg, ...]] = {
    "sweep.schedule": (
        Arg("--dir", "dir", Rule("indir", required=True)),
        Arg("--slo", "slo", Rule("slo_limits")),
        Arg("--percentile", "percentile", RULES["objective.slo.percentile"]),
        Arg("--no-slo", "no_slo", FLAG), Arg("--no-write", "no_write", FLAG), Arg("-o", "out", OUTDIR),
        Arg("--export", "export", Rule("enum", choices=(None, "vllm", "sim"))), Arg("--family", "family", TEXT),
        Arg("--format", "format", Rule("enum", choices=("table", "json"))), Arg("--full-names", "full_names", FLAG)),
    "sweep.verify_dynamic": (
        Arg("--dir", "dir", Rule("indir", required=True)), Arg("--file", "file", Rule("file", fmt="text")),
        Arg("--rounds", "rounds", _int(1, 100, "rounds")),
        Arg("--statics", "statics", Rule("enum", choices=("all", "chosen"))),
        Arg("--workload", "workload", NAME), Arg("--family", "family", TEXT), Arg("--table", "table", TEXT),
        Arg("--dry-run", "dry_run", FLAG), Arg("--report-only", "report_only", FLAG),
        # these go on every run after the table's own overrides (from the export file)
        Arg("overrides", "overrides", OVERRIDES, base=lambda a: _export_overrides(a.dir, a.file))),
    "sweep.report": (
        Arg("--experiment", "experiment", TEXT), Arg("--sweep-id", "sweep_id", TEXT),
        Arg("--hardware", "hardware", NAME), Arg("--spec", "spec", NAME),
        Arg("--format", "format", Rule("enum", choices=("table", "csv", "json", "md", "html"))),
        Arg("--output", "output", OUTFILE), Arg("--plots", "plots", OUTDIR),
        Arg("--tracking-uri", "tracking_uri", RULES["mlflow.tracking_uri"]), Arg("--dir", "dir", INDIR),
        Arg("--full-names", "full_names", FLAG)),
    "sweep.sync": (
        Arg("dir", "dir", Rule("indir", required=True)),
        Arg("--tracking-uri", "tracking_uri", RULES["mlflow.tracking_uri"]),
        Arg("--recorded-uri", "recorded_uri", FLAG), Arg("--experiment", "experiment", TEXT),
        Arg("--include-running", "include_running", FLAG)),
    "sweep.calibrate": (
        Arg("results", "results", Rule("inputs", required=True)), Arg("--out", "out", OUTDIR),
        Arg("--box", "box", Rule("names")), Arg("--dry-run", "dry_run", FLAG)),
    "sweep.sim.predict": (
        Arg("--calibration", "calibration", Rule("file", fmt="calibration")),
        Arg("--concurrency", "concurrency", Rule("csv_ints", 1, MAX_CONCURRENCY, what="in-flight requests"),
            needs="breakdown"),
        Arg("--json", "json", FLAG), Arg("--breakdown", "breakdown", FLAG),
        # a result.json or LANDSCAPE.json#CONFIG/WORKLOAD: the file is read by sweep/sim/budgets.py
        Arg("--acceptance", "acceptance", TEXT),
        Arg("--budgets", "budgets", Rule("csv_ints", 1, 1024, what="draft budgets")),
        Arg("--accept-model", "accept_model", Rule("enum", choices=(None, "span", "truncate")),
            needs="acceptance"),
        Arg("--config-dir", "config_dir", INDIR)),
    "sweep.engines": (
        Arg("engine", "engine", Rule("name", required=True)),
        Arg("overrides", "overrides", OVERRIDES, base=lambda a: [f"server={a.engine}"]),
        Arg("--check", "check", FLAG), Arg("--sdist", "sdist", Rule("file", fmt="text")),
        Arg("--source-dir", "source_dir", INDIR), Arg("--build-dir", "build_dir", OUTDIR)),
    # the benchmarks that take overrides
    "benchmarks/record_landscape.py": (
        Arg("--engine", "engine", Rule("enum", choices=("llamacpp", "vllm"))), Arg("--rounds", "rounds", ROUNDS),
        Arg("--contexts", "contexts", Rule("csv_ints", 1, MAX_CONTEXT, what="prompt tokens")),
        Arg("--concurrency", "concurrency", Rule("csv_ints", 1, MAX_CONCURRENCY, what="in-flight requests")),
        Arg("--max-tokens", "max_tokens", TOKENS), Arg("--configs", "configs", TEXT),
        Arg("--workloads", "workloads", TEXT),
        Arg("--out", "out", OUTFILE), Arg("--work", "work", OUTDIR),
        Arg("--trial-timeout", "trial_timeout", Rule("float", 1, MAX_SECONDS, what="seconds")),
        Arg("--summary", "summary", Rule("file", fmt="text")),
        # the overrides go on top of the engine's server and the matrix the arguments give
        Arg("extra", "extra", OVERRIDES, base=lambda a: [f"server={a.engine}", "hardware=cpu",
                                                          f"workload.contexts=[{a.contexts}]",
                                                          f"workload.concurrency=[{a.concurrency}]",
                                                          f"workload.max_tokens={a.max_tokens}"])),
    "benchmarks/dynamic_sd.py": (
        Arg("--requests", "requests", REQUESTS), Arg("--max-tokens", "max_tokens", TOKENS),
        Arg("--context", "context", CONTEXT),
        Arg("--concurrency", "concurrency", Rule("csv_ints", 1, MAX_CONCURRENCY, what="in-flight requests")),
        Arg("--budgets", "budgets", Rule("csv_ints", 1, 8, what="draft budgets (of 1,2,4,8)")),
        Arg("--workloads", "workloads", TEXT),  # each a workload option: composed with the overrides
        Arg("--measure-rounds", "measure_rounds", ROUNDS), Arg("--rounds", "rounds", _int(1, 100, "rounds")),
        Arg("--statics", "statics", Rule("enum", choices=("all", "chosen"))),
        Arg("--work", "work", OUTDIR), Arg("--measured", "measured", Rule("file", fmt="text")),
        # the overrides go on every trial: the recorder's vLLM on the CPU box, and verify_dynamic's runs
        Arg("extra", "extra", OVERRIDES, base=lambda a: ["server=vllm", "hardware=cpu",
                                                          "hardware.cpu.threads_bind=1",
                                                          f"workload.max_tokens={a.max_tokens}"])),
    "benchmarks/search_efficiency.py": (
        Arg("--seeds", "seeds", _int(1, 100_000, "seeds")), Arg("--hardware", "hardware", TEXT),
        Arg("--objective", "objective", TEXT),
        Arg("--target", "target", Rule("enum", choices=("objective", "schedule", "max_load", "per_load"))),
        Arg("--truth", "truth", Rule("enum", choices=("twin", "perturbed"))),
        Arg("--perturb-seed", "perturb_seed", _int(0, MAX_SEED, "seed")),
        Arg("--landscape", "landscape", Rule("file", fmt="text")),
        Arg("--slo-tpot-ms", "slo_tpot_ms", RULES["objective.slo.tpot_ms"]),
        Arg("--strategies", "strategies", TEXT), Arg("--max-trials", "max_trials", _int(1, MAX_TRIALS, "trials")),
        Arg("--enqueue", "enqueue", Rule("enum", choices=("none", "shipped"))),
        Arg("--prescreen-twin", "prescreen_twin", Rule("enum", choices=("subset", "none", "shipped"))),
        Arg("--override", "override", OVERRIDES, base=lambda a: ["-m", "hydra/sweeper=optuna"])),
    "benchmarks/harness_capacity.py": (
        Arg("--concurrency", "concurrency", CONCURRENCY), Arg("--requests", "requests", REQUESTS),
        Arg("--max-tokens", "max_tokens", TOKENS), Arg("--context", "context", CONTEXT),
        Arg("--rounds", "rounds", ROUNDS), Arg("--strict", "strict", FLAG),
        Arg("overrides", "overrides", OVERRIDES, base=lambda a: ["server=sim", "server.sim.time_scale=0"])),
    "benchmarks/sim_capacity.py": (
        Arg("--seconds", "seconds", Rule("float", 0, MAX_SECONDS, what="seconds", lo_open=True)),
        Arg("--max-tokens", "max_tokens", TOKENS),
        Arg("--concurrency", "concurrency", Rule("ints", 1, MAX_CONCURRENCY, what="in-flight requests")),
        Arg("overrides", "overrides", OVERRIDES, base=lambda a: ["hardware=b300", "spec=ddtree"])),
    "benchmarks/crosscheck_bench_serving.py": (
        Arg("--reps", "reps", ROUNDS), Arg("--max-tokens", "max_tokens", TOKENS), Arg("--cells", "cells", TEXT),
        Arg("--strict", "strict", FLAG), Arg("overrides", "overrides", OVERRIDES, base=lambda a: [])),
    "benchmarks/llamacpp_crosscheck.py": (
        Arg("--requests", "requests", REQUESTS), Arg("--max-tokens", "max_tokens", TOKENS),
        Arg("overrides", "overrides", OVERRIDES, base=lambda a: ["server=llamacpp", "workload=llamacpp_ci"])),
}


class Probe(SystemExit):
    """Raised by :func:`parse` instead of parsing while :data:`PROBE` is set: the parser a command
    builds, for the test that every argument of every command has a row."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__(0)
        self.parser = parser


PROBE = False


def arguments_of(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.dest != "help"]


def parse(command: str, parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The command's arguments parsed and checked by :data:`ARGUMENTS` (ConfigError: one line, exit 2)."""
    from sweep.errors import one_line_usage_errors

    rows = {a.dest for a in ARGUMENTS[command]}
    unruled = [a.option_strings[0] if a.option_strings else a.dest for a in arguments_of(parser) if a.dest not in rows]
    if unruled:  # a programming error: the argument was added without its rule
        raise AssertionError(f"{command}: no rule for {', '.join(unruled)} in sweep/compose/arguments.py")
    if PROBE:
        raise Probe(parser)
    args = one_line_usage_errors(parser).parse_args(None if argv is None else list(argv))
    check(command, vars(args))
    for arg in ARGUMENTS[command]:  # override lines passed on: as python -m sweep checks them
        lines = getattr(args, arg.dest, None)
        if arg.rule.kind == "overrides" and arg.base is not None and lines:
            check_overrides(arg.flag, list(lines), arg.base(args))
    return args


def _given(value: Any) -> bool:
    return value is not None and value is not False and value != [] and value != ""


def check(command: str, values: Mapping[str, Any]) -> None:
    """Every value given for the command's arguments, by its rule (messages name the flag); an
    argument given without the one it ``needs`` is refused (it would be ignored)."""
    from sweep.compose import bounds

    flags = {a.dest: a.flag for a in ARGUMENTS[command]}
    for arg in ARGUMENTS[command]:
        if arg.dest not in values:
            continue
        value = values[arg.dest]
        if arg.rule.kind == "overrides" and not value:
            continue
        if isinstance(value, (list, tuple)) and arg.rule.kind not in ("ints", "inputs", "names", "slo_limits",
                                                                      "overrides", "floats"):
            for item in value:
                bounds.check_rule(arg.flag, _plain(item), arg.rule)
            continue
        bounds.check_rule(arg.flag, _plain(value), arg.rule)
    for arg in ARGUMENTS[command]:  # then what goes together
        if arg.needs is not None and _given(values.get(arg.dest)) and not _given(values.get(arg.needs)):
            raise ConfigError(arg.flag, f"only with {flags.get(arg.needs, arg.needs)} (without it, it changes nothing)")


def _plain(value: Any) -> Any:
    from pathlib import PurePath

    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def check_overrides(flag: str, overrides: Sequence[str], base: Sequence[str] = ()) -> None:
    """Override lines a command passes on, checked as ``python -m sweep <base> <overrides>`` checks
    them (:func:`sweep.compose.cmdline.validate`); the line names the key, and ``flag`` when the
    error is about the lines as a whole."""
    from sweep.compose import cmdline

    try:
        cmdline.validate([*base, *overrides])
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever else: one line naming the argument
        raise ConfigError(flag, f"could not be checked ({type(exc).__name__}: {str(exc)[:200]})") from None
