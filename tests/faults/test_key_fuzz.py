"""A fuzz test generated from the key table: every key, values its kind must refuse (issue 24).

For each key of ``sweep.compose.keys.RULES`` (a ``x.*`` key through one of its
children), in a context where the key exists (``tests/faults/bad_inputs.py``:
``launcher=ssh`` for SSH keys, ``-m hydra/sweeper=optuna`` for the sweeper's),
hypothesis draws values from the classes the key's *kind* must refuse:

* wrong types -- a word for a number, a list or a mapping for a scalar, a
  boolean for a string, a scalar for a mapping;
* out of bounds -- past either end of a number's range, far past it (digits
  beyond what a float holds);
* special floats -- ``nan``, ``inf``, ``-inf``, ``1e309``;
* huge strings (past 4,096 characters) and empty strings where a value is
  required; control characters (newline, NUL);
* path keys -- special files (``/dev/zero``, ``/dev/null``, a FIFO, a socket,
  ``/proc/self/mem``), traversal (``../../``), a missing file, a directory, an
  empty file, a file that is not what the key reads (``/etc/hostname`` as a
  dataset, a tokenizer, a calibration), an output dir that cannot be written;
* URL keys -- malformed URLs (no host, a bad port, a broken IPv6 literal, two
  slashes for SQLite, spaces, an unknown database), an unreachable database.

Breadth runs in this process through :func:`sweep.compose.cmdline.validate`
(what ``python -m sweep`` runs before Hydra): it must raise a SweepError
naming the fuzzed key (``key`` or ``key[i]``), printing as one line, exit
code 2. A seeded sample of the same generated cases runs through the real CLI
as subprocesses: exit 2, one line on stderr naming the key, no traceback,
nothing written, no server on the run's port. Seeded (``derandomize``) and
bounded (``max_examples``) to stay within about two minutes.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _support import free_port, subprocess_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faults.bad_inputs import _child, _where
from faults.orphan_scenarios import Server, port_free
from sweep.cli import plugins
from sweep.compose import arguments, bounds, cmdline
from sweep.compose.arguments import ARGUMENTS
from sweep.compose.keys import RULES, Rule
from sweep.errors import EXIT_INPUT, SweepError

plugins.register()

FILES = Path(tempfile.mkdtemp(prefix="specsweep-fuzz-files-"))


def _special_files() -> dict[str, str]:
    """Paths of each kind of file a path key must not accept (made once for the module)."""
    fifo = FILES / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    sock_path = FILES / "sock"
    if not sock_path.exists():
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(sock_path))  # left bound: a socket file on disk
    (FILES / "empty.jsonl").write_text("")
    (FILES / "binary.json").write_bytes(b"\x00\xff\xfe" * 100)
    (FILES / "notjson.jsonl").write_text("this is not json\n{broken\n")
    (FILES / "nocal.yaml").write_text("schema: 1\nconstants: 5\n")
    (FILES / "dir").mkdir(exist_ok=True)
    return {"fifo": str(fifo), "socket": str(sock_path), "empty": str(FILES / "empty.jsonl"),
            "binary": str(FILES / "binary.json"), "notjson": str(FILES / "notjson.jsonl"),
            "nocal": str(FILES / "nocal.yaml"), "dir": str(FILES / "dir")}


SPECIAL = _special_files()


def q(text: str) -> str:
    """A Hydra quoted string (no quotes or backslashes inside the texts used here)."""
    return f"'{text}'"


def _num(x: float) -> str:
    return bounds._fmt(x)


# ------------------------------------------------------------------------------ bad values by kind

WRONG_SCALAR = st.sampled_from(["abc", "[1,2]", "{a: 1}", "true"])
SPECIAL_FLOATS = st.sampled_from(["nan", "inf", "-inf", "1e309", "-1e309"])
HUGE = st.integers(min_value=4_100, max_value=6_000).map(lambda n: "x" * n)
CONTROL = st.sampled_from([q("a\nb"), q("a\rb"), q("a\x00b")])
SPECIAL_PATH_LIST = ["/dev/zero", "/dev/null", "/dev/urandom", SPECIAL["fifo"], SPECIAL["socket"],
                     "/proc/self/mem", "/proc/self/environ", "/sys/kernel/notes"]
SPECIAL_PATHS = st.sampled_from(SPECIAL_PATH_LIST)
MALFORMED_URLS = st.sampled_from([q(u) for u in (
    "http://", "https://", "http://[::1", "http://host:99999", "https://:80/x", "http:/host",
    "sqlite://relative.db", "://x", "http://a b", "postgresql://u@h:70000/d", "postgresql://u@h:port/d")])


def _numbers(rule: Rule) -> st.SearchStrategy[str]:
    out = [WRONG_SCALAR, SPECIAL_FLOATS, st.just("''")]
    if rule.hi is not None:
        out.append(st.integers(min_value=int(rule.hi) + 1, max_value=int(rule.hi) * 1000 + 10**12).map(str))
        out.append(st.sampled_from(["1" + "0" * 400, "9" * 5000]))  # past a float, past int parsing
    if rule.lo is not None:
        out.append(st.integers(min_value=int(rule.lo) - 10**12, max_value=int(rule.lo) - 1).map(str))
        if rule.lo_open:
            out.append(st.sampled_from([_num(rule.lo), "0.0", "-0.0"] if rule.lo == 0 else [_num(rule.lo)]))
    if rule.kind == "int":
        out.append(st.sampled_from(["1.5", "0.25", "-0.5"]))
    return st.one_of(out)


def _texts(extra: list[str]) -> st.SearchStrategy[str]:
    # (no bare `true`: Hydra's typed str keys, hydra.job.name, take it as the word "true")
    return st.one_of(st.sampled_from(extra), HUGE, CONTROL, st.sampled_from(["[a,b]", "{a: 1}"]))


def strategy(rule: Rule) -> st.SearchStrategy[str]:
    """Override values (Hydra's grammar) that the rule must refuse."""
    kind = rule.kind
    if kind in ("int", "float"):
        return _numbers(rule)
    if kind in ("ints", "floats"):
        inner = _numbers(rule).filter(lambda v: not v.startswith(("[", "{")) and v != "''")
        return st.one_of(inner.map(lambda v: f"[{v}]"), st.sampled_from(["{a: 1}", "[[1]]"]),
                         *([st.just("[]"), st.just("abc")] if kind == "ints" else [st.just("abc")]))
    if kind == "bool":
        return st.sampled_from(["maybe", "yes", "no", "1", "0", "''", "[true]", "{a: 1}", "nan"])
    if kind == "enum":
        choices = {str(c).lower() for c in rule.choices}
        return st.one_of(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)
                         .filter(lambda w: w not in choices and w not in ("true", "false", "null", "nan", "inf")),
                         st.sampled_from(["[a]", "{a: 1}", q("$(reboot)"), "''"]).filter(lambda w: w != "''" or
                                                                                             "" not in choices))
    if kind == "str":  # (true/false: a word for Hydra's typed str keys)
        return st.one_of(HUGE, CONTROL, st.sampled_from(["[a,b]", "{a: 1}"]))
    if kind == "name":
        return _texts(["''", q("a b"), q("a/b"), q("../../x"), q("$(id)"), q("a;b"), q("-x")])
    if kind in ("host", "ssh_host"):  # (a..b is no host name, but it may be an ~/.ssh/config alias)
        return _texts(["''", q("a b"), q("-oProxyCommand=id"), q("$(id)"), q("a;b")]
                      + ([q("a..b")] if kind == "host" else []))
    if kind == "user":
        return _texts([q("a;b"), q("a b"), q("-x"), q("$(id)")])
    if kind == "gateway":
        return _texts([q("a b"), q("h:99999"), q("u@-x"), q("a;b")])
    if kind == "unit":
        return _texts(["../../X", q("a b"), q("-x"), q("x;y.service"), q("$(id)"), "''"])
    if kind == "abspath":
        return _texts(["relative/dir", "/etc/../tmp", "a/../../b"])
    if kind == "remote_dir":
        return _texts(["relative", "''", "x/y"])
    if kind == "url_path":
        return _texts(["health", q("/a b"), q("x/y")])
    if kind == "url_paths":
        return st.sampled_from(["[health]", "[/ok,x]", "{a: 1}", q("/a b")])
    if kind == "uri":
        return st.one_of(MALFORMED_URLS, HUGE, CONTROL, st.sampled_from(["[a]", "{a: 1}"]))
    if kind == "storage":
        return st.one_of(MALFORMED_URLS, st.sampled_from(
            ["notaurl", "ftp//x", q("sqlite:////proc/x/a.db"), q("journal:/dev/null/x.log"), q(f"sqlite:///{SPECIAL['dir']}"),
             q("postgresql+psycopg://u@127.0.0.1:1/db"), q("mongodb://h/x"), "true", "[a]"]))
    if kind in ("path", "paths"):
        if kind == "path":
            return st.one_of(SPECIAL_PATHS, HUGE, CONTROL, st.sampled_from(["{a: 1}", "true"]))
        return st.sampled_from([f"[{q(p)}]" for p in SPECIAL_PATH_LIST] + ["[" + q("a\nb") + "]", "{a: 1}"])
    if kind == "file":
        wrong = {"jsonl": [SPECIAL["notjson"], SPECIAL["binary"], "/etc/hostname"],
                 "tokenizer": [SPECIAL["notjson"], "/etc/hostname", SPECIAL["binary"]],
                 "calibration": [SPECIAL["nocal"], "/etc/hostname", SPECIAL["binary"]]}.get(rule.fmt, [])
        return st.one_of(SPECIAL_PATHS, st.sampled_from([SPECIAL["empty"], SPECIAL["dir"], "/nonexistent/x.json",
                                                         "../../../../../nonexistent/x", *wrong]),
                         HUGE, CONTROL, st.sampled_from(["[a]", "{a: 1}", "true"]))
    if kind == "outdir":
        return st.one_of(st.sampled_from(["/proc/x", "/sys/x", "/dev/null/x", "/etc/hostname/x", SPECIAL["fifo"]]),
                         HUGE, CONTROL, st.sampled_from(["[a]", "{a: 1}"]))
    if kind == "subpath":
        return st.one_of(st.sampled_from(["../x", "../../x", "a/../../b", "/abs", q("~/x"), "''"]), HUGE, CONTROL)
    if kind == "directions":
        return st.sampled_from(["sideways", "up", "[maximize,up]", "[]", "5", "{a: 1}", "''"])
    if kind == "strs":
        empty = ["''", "[]"] if rule.required else []
        return st.sampled_from(["{a: 1}", "[" + q("a\nb") + "]", "[[a]]", "[{a: 1}]", *empty])
    if kind == "enums":  # a list of choices (failure reasons): a typo, a wrong shape
        return st.sampled_from(["[cuda_grpah]", "[oom,oomm]", "bogus", "{a: 1}", "[[oom]]", "[{a: 1}]", "['']"])
    if kind == "mapping":
        return st.sampled_from(["5", "abc", "[1]", "true", "''"])
    if kind == "list":
        return st.sampled_from(["5", "{a: 1}", "abc", "true"])
    if kind == "figure":
        return st.one_of(st.sampled_from(["-1", q("a b"), "nan", "inf", "-inf", "[1]", q("$(id)")]), HUGE)
    if kind == "cpus":
        return st.one_of(st.sampled_from([q("0-3;id"), q("$(id)"), "abc", q("0-"), q("1,,2"), "[1]", "{a: 1}"]),
                         CONTROL)
    if kind == "slurm_time":
        return st.one_of(st.sampled_from(["2h", q("1:2:3:4"), q("1-"), "-5", q("$(id)"), "[1]"]), CONTROL)
    if kind == "gres":
        return st.one_of(st.sampled_from([q("gpu 8"), q("gpu:8;id"), q("$(id)"), q("gpu:-1"), "[a]"]), CONTROL)
    if kind == "slurm_mem":
        return st.sampled_from(["64GB", q("1 G"), "-5", q("x$(id)"), "[1]", "{a: 1}"])
    if kind == "slurm_constraint":
        return st.one_of(st.sampled_from([q("a b"), q("x$(id)"), q("a;b"), "[a]"]), CONTROL)
    if kind == "sbatch_args":
        return st.sampled_from([f"[{q('--x y')}]", "[partition=gpu]", f"[{q('--wrap=$(id)')}]", "5", "{a: 1}"])
    if kind == "cells":  # [context, concurrency] pairs
        return st.sampled_from(["5", "abc", "{a: 1}", "[[1]]", "[[1,2,3]]", "[[0,1]]", "[[1,-1]]", "[[a,1]]"])
    if kind == "per_load":  # [from, to, budget] bands: shape, range, order, start, all-zero
        return st.sampled_from(["5", "abc", "{a: 1}", "[]", "[[1,2]]", "[[0,2,4]]", "[[1,2,-1]]", "[[1,2,100000]]",
                                "[[2,4,4]]", "[[1,4,4],[3,8,2]]", "[[3,1,4]]", "[[1,4,0]]", "[[1,a,4]]"])
    if kind == "lines":
        return st.sampled_from(["{a: 1}", "[[a]]", "[{a: 1}]", f"[{q('a' + chr(0) + 'b')}]"])
    if kind == "cells":  # [[context, concurrency], ...]
        return st.sampled_from(["60", "[60]", "[[60]]", "[[60,2,3]]", "[[a,2]]", "[[60,-1]]", "[[0,2]]",
                                "[[60,99999999999]]", "{a: 1}", "[[60,nan]]", "abc"])
    # -- kinds of the commands' arguments (sweep/compose/arguments.py): values as argv words
    if kind == "indir":
        return st.one_of(SPECIAL_PATHS, st.sampled_from(["/nonexistent/specsweep-x", "/etc/hostname", "/proc/self"]),
                         HUGE)
    if kind == "inputs":
        return st.one_of(SPECIAL_PATHS, st.sampled_from(["/nonexistent/specsweep-x", "/proc/self/status"]))
    if kind == "outfile":
        return st.sampled_from([SPECIAL["dir"], SPECIAL["fifo"], "/dev/null", "/proc/specsweep-x/out",
                                "/etc/hostname/x", "/nonexistent-root-dir/specsweep/out"])
    if kind == "slo_limits":
        return st.sampled_from(["tpot_ms=inf", "tpot_ms=0", "ttft_ms=1e400", "e2e_ms=-1", "itl_ms=abc", "bogus=5",
                                "tpot_ms", "tpot_ms=nan", "tpot_ms=-0.0", "tpot_ms=1e12"])
    if kind == "csv_ints":
        return st.sampled_from(["0,1", "x", "1,,2", "1e400", "-5", "99999999999999", "1.5", ","])
    if kind == "overrides":
        return st.sampled_from(BAD_OVERRIDES)
    if kind == "names":
        return st.sampled_from(["../x", "a b", "$(id)", "a/b", ".hidden", "-x"])
    raise AssertionError(f"no bad values for kind {kind!r}: add them (the fuzz covers every kind)")


def _target(rule_key: str) -> tuple[str, list[str], str]:
    key = _child(rule_key)
    context, target = _where(key)
    return key, context, target


# overrides a command passes on (python -m sweep.engines, the benchmarks): refused as python -m sweep refuses them
BAD_OVERRIDES = ["spec.budget=0", "workload.max_tokens=017", "objective.slo.tpot_ms=0", "specsweep_nope.x=1",
                 "spec.budget=[", "workload.max_load.enabled=maybe", "objective.slo.itl_ms=inf"]

TARGETS = {rule_key: _target(rule_key) for rule_key in RULES}
CASES = st.sampled_from(sorted(RULES)).flatmap(lambda k: st.tuples(st.just(k), strategy(RULES[k])))


def _named(err: SweepError, key: str) -> bool:
    named = getattr(err, "key", None) or getattr(err, "where", "")
    return named == key or named.startswith(key + "[") or named.startswith(key + ".")


def test_every_kind_has_bad_values() -> None:
    rules = [*RULES.values(), *(a.rule for args in ARGUMENTS.values() for a in args)]
    for rule in {r.kind: r for r in rules}.values():
        if rule.kind != "bool" or rule in RULES.values():
            strategy(rule)


def test_every_key_refuses_every_class_by_its_rule() -> None:
    """Breadth, deterministically: each key x each fixed bad value of its kind, through the key's rule
    (``bounds.check`` on the value as Hydra parses it; reachability for storage URLs)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    from sweep.compose import storage_url

    parser = OverridesParser.create()
    missed = []
    for rule_key, rule in RULES.items():
        key = TARGETS[rule_key][0]
        for text in representatives(rule):
            try:
                (override,) = parser.parse_overrides([f"x={text}"])
                value = override.value()
            except (HydraException, ValueError):
                continue  # refused while parsing: the CLI names the key (test_bad_input's grammar fuzz)
            try:
                bounds.check(key, value, rule_key=rule_key)
                if rule.kind == "storage":
                    storage_url.check_reachable(storage_url.parse(str(value)))
                missed.append(f"{key}={text[:60]}")
            except SweepError as err:
                if not _named(err, key) or "\n" in err.one_line():
                    missed.append(f"{key}={text[:60]}: {err.one_line()[:100]}")
    assert missed == [], "\n".join(missed)


@settings(max_examples=70, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(CASES)
def test_every_key_refuses_what_its_kind_refuses(case: tuple[str, str]) -> None:
    rule_key, value = case
    key, context, target = TARGETS[rule_key]
    argv = [*context, f"{target}={value}"]
    with pytest.raises(SweepError) as info:
        cmdline.validate(argv)
    err = info.value
    assert _named(err, key), f"{argv}: named {err.one_line()!r}, not {key}"
    assert err.exit_code == EXIT_INPUT, argv
    line = err.one_line()
    assert line.startswith("error: ") and "\n" not in line and "\r" not in line and len(line) < 2000, line


# ------------------------------------------------------------------------------ through the real CLI


def _sample(n: int, seed: int = 24) -> list[tuple[str, list[str]]]:
    """A seeded sample of generated cases a command line can carry (no NUL, no huge values)."""
    rng = random.Random(seed)
    out: list[tuple[str, list[str]]] = []
    keys = sorted(RULES)
    while len(out) < n:
        rule_key = rng.choice(keys)
        key, context, target = TARGETS[rule_key]
        value = rng.choice(representatives(RULES[rule_key]))
        if "\x00" in value or len(value) > 1000:
            continue
        out.append((key, [*context, f"{target}={value}"]))
    return out


def representatives(rule: Rule) -> list[str]:
    """Fixed values of the rule's strategy (the sampled strategies' own lists, the numbers' ends)."""
    out: list[str] = []
    for part in _parts(strategy(rule)):
        elements = getattr(part, "elements", None)
        if elements is not None:
            out.extend(str(e) for e in elements)
    if rule.kind in ("int", "float") and rule.hi is not None:
        out.append(_num(rule.hi + 1))
    return out or ["abc"]


def _parts(strat: object) -> list[object]:
    """The leaves of a one_of/map strategy tree (hypothesis' lazy wrappers unwrapped)."""
    inner = getattr(strat, "wrapped_strategy", strat)
    subs = getattr(inner, "original_strategies", None) or getattr(inner, "element_strategies", None)
    if subs:
        return [leaf for sub in subs for leaf in _parts(sub)]
    mapped = getattr(inner, "mapped_strategy", None)
    return [inner] if mapped is None else []


@pytest.mark.slow
def test_a_sample_through_the_real_cli(tmp_path: Path) -> None:
    cases = _sample(8)

    def one(i_case: tuple[int, tuple[str, list[str]]]) -> tuple[str, list[str], subprocess.CompletedProcess[str],
                                                                  Path, int]:
        i, (key, argv) = i_case
        cwd = tmp_path / f"case{i}"
        cwd.mkdir()
        port = free_port()
        flags = [a for a in argv if a.startswith("-") and "=" not in a]
        rest = [a for a in argv if a not in flags]
        proc = subprocess.run([sys.executable, "-m", "sweep", *flags, f"server.port={port}", *rest], cwd=cwd,
                              env=subprocess_env(), capture_output=True, text=True, timeout=120)
        return key, argv, proc, cwd, port

    with ThreadPoolExecutor(max_workers=3) as pool:
        runs = list(pool.map(one, enumerate(cases)))
    for key, argv, proc, cwd, port in runs:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 2, (argv, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr, proc.stderr
        assert len(lines) == 1 and lines[0].startswith(f"error: {key}"), (argv, lines)
        assert proc.stdout == "" and not any(cwd.iterdir()), (argv, list(cwd.iterdir()))
        assert port_free(port) and Server([port], token=None).processes() == {}


# ------------------------------------------------------------------------------ the commands' arguments

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = {"sweep.schedule": "sweep.schedule", "sweep.report": "sweep.report.__main__", "sweep.sync": "sweep.sync",
            "sweep.calibrate": "sweep.calibrate", "sweep.engines": "sweep.engines.__main__",
            "sweep.verify_dynamic": "sweep.verify_dynamic"}
# what a command needs besides the fuzzed argument (a required positional, the sweep dir)
NEEDS = {"sweep.schedule": ["--dir", str(FILES)], "sweep.sync": [str(FILES)], "sweep.calibrate": [str(FILES)],
         "sweep.engines": ["llamacpp"], "sweep.verify_dynamic": ["--dir", str(FILES)]}


def _main_of(command: str) -> object:
    import importlib
    import importlib.util

    if command in COMMANDS:
        return importlib.import_module(COMMANDS[command]).main
    path = ROOT / command
    name = f"specsweep_bench_{path.stem}"
    if name not in sys.modules:
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))  # a benchmark imports its private helpers (_landscape_replay)
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    module = sys.modules[name]
    return module._main if hasattr(module, "_main") else module.main


def parser_of(command: str) -> object:
    """The parser the command builds (its main, stopped in sweep.compose.arguments.parse)."""
    arguments.PROBE = True
    try:
        _main_of(command)(NEEDS.get(command, []))  # type: ignore[operator]
    except arguments.Probe as probe:
        return probe.parser
    finally:
        arguments.PROBE = False
    raise AssertionError(f"{command} does not parse through sweep.compose.arguments.parse")


PARSED = [c for c in ARGUMENTS if c != "sweep.sim.predict"]  # predict reads Hydra overrides and two options


def test_every_argument_of_every_command_has_a_rule() -> None:
    """A command's argument without a row in ARGUMENTS fails here (and in the command itself)."""
    for command in PARSED:
        parser = parser_of(command)
        dests = {a.dest for a in arguments.arguments_of(parser)}  # type: ignore[arg-type]
        assert dests == {a.dest for a in ARGUMENTS[command]}, command
    from sweep.sim import predict

    assert {*predict.VALUE_OPTIONS, *predict.FLAGS} == {a.flag for a in ARGUMENTS["sweep.sim.predict"]}


def arg_strategy(rule: Rule) -> st.SearchStrategy[str]:
    """The kind's bad values as argv words: a word is no Hydra value, so a list or mapping written as
    text is a fine string for a text argument (its bad ones: huge, control characters)."""
    strat = strategy(rule)
    if rule.kind in ("str", "path", "outdir", "outfile", "indir", "inputs", "file", "uri"):
        return strat.filter(lambda v: not v.startswith(("[", "{")) and v != "true")
    return strat


ARG_CASES = st.sampled_from([(c, a) for c in PARSED for a in ARGUMENTS[c] if a.rule.kind != "bool"]).flatmap(
    lambda ca: st.tuples(st.just(ca[0]), st.just(ca[1]), arg_strategy(ca[1].rule)))


def _argv(command: str, arg: arguments.Arg, value: str) -> list[str]:
    base = [w for w in NEEDS.get(command, []) if not (arg.dest in ("dir", "results", "engine") and w != "--dir")]
    if arg.dest == "dir" and command == "sweep.schedule":
        base = []
    words = [value] if not arg.flag.startswith("-") else [arg.flag, value]
    if arg.dest == "dir" and command == "sweep.schedule":
        words = ["--dir", value]
    return [*base, *words]


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(ARG_CASES)
def test_every_command_argument_refuses_what_its_kind_refuses(case: tuple[str, arguments.Arg, str]) -> None:
    command, arg, value = case
    value = value[1:-1] if len(value) > 1 and value[0] == value[-1] == "'" else value  # argv: no Hydra quotes
    argv = _argv(command, arg, value)
    parser = parser_of(command)
    with pytest.raises(SweepError) as info:
        arguments.parse(command, parser, argv)  # type: ignore[arg-type]
    err = info.value
    named = getattr(err, "key", "")
    allowed = {arg.flag, arg.dest, "arguments", *(o for o in ("overrides",) if arg.rule.kind == "overrides")}
    assert named.split("[")[0].split(" ")[0] in allowed or arg.rule.kind == "overrides", (argv, err.one_line())
    assert err.exit_code == EXIT_INPUT and "\n" not in err.one_line(), argv


@pytest.mark.slow
def test_command_arguments_through_the_real_cli(tmp_path: Path) -> None:
    """A sample per command, as real processes: exit 2, one line naming the argument, nothing written."""
    cases = [("sweep.schedule", ["--dir", str(tmp_path), "--slo", "tpot_ms=inf"], "--slo tpot_ms"),
             ("sweep.schedule", ["--dir", str(tmp_path), "--slo", "tpot_ms=0"], "--slo tpot_ms"),
             ("sweep.schedule", ["--dir", str(tmp_path), "--percentile", "nan"], "--percentile"),
             ("sweep.report", ["--dir", str(tmp_path), "-o", str(tmp_path)], "--output"),
             ("sweep.sync", [SPECIAL["fifo"]], "dir"),
             ("sweep.calibrate", ["--box", "../../x", str(tmp_path)], "--box"),
             ("sweep.sim.predict", ["--concurrency", "0,1"], "--concurrency"),
             ("sweep.sim.predict", ["--calibration", SPECIAL["fifo"]], "--calibration"),
             ("sweep.engines", ["llamacpp", "--source-dir", "/dev/zero"], "--source-dir")]
    bench = [("benchmarks/record_landscape.py", ["--rounds", "0"], "--rounds"),
             ("benchmarks/record_landscape.py", ["workload.max_tokens=017"], "workload.max_tokens"),
             ("benchmarks/sim_capacity.py", ["--seconds", "inf"], "--seconds"),
             ("benchmarks/search_efficiency.py", ["--slo-tpot-ms", "0"], "--slo-tpot-ms")]
    before = set(tmp_path.rglob("*"))
    for command, argv, key in [*cases, *bench]:
        cmd = [sys.executable, "-m", command] if not command.endswith(".py") else [sys.executable, str(ROOT / command)]
        proc = subprocess.run([*cmd, *argv], cwd=tmp_path, env=subprocess_env(), capture_output=True, text=True,
                              timeout=120)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 2, (command, argv, proc.stderr[-1000:])
        assert len(lines) == 1 and lines[0].startswith(f"error: {key}"), (command, argv, lines)
        assert "Traceback" not in proc.stderr
    assert set(tmp_path.rglob("*")) == before


# ------------------------------------------------------------------------------ an export read back (issue 39)

PLUMBING = ["server.executable=[/bin/sh,-c,id]", "+server.env.LD_PRELOAD=/tmp/x.so", "server.setup=[id]",
            "launcher=ssh", "launcher.hosts=[{host: h}]", "hydra.sweep.dir=/tmp/x", "server.extra_args=[--x]",
            "spec.render.args=[--y]", "workload.dataset_path=/proc/self/environ", "mlflow.tracking_uri=http://h"]
HOSTILE_KEYS = ["/../../x_statics", "../x", "4/../../y", "-1", "0", "1e9", "nan", "b4", "", "4; id", "99999"]
BAD_TABLES: list[object] = [[[3, 16, 4], [1, 2, 8]], [[1, 4, 8], [3, 16, 4]], [[1, 2, -8]], [[1, 2, 8], [3, 1e9, 4]],
                            [[2, 4, 4]], [[1, 2, 0]], "[[1,2,8]]", [[1, 2]], [[1, "2", 8]], [[1, 2, 8.5]], {"a": 1}]


def _export_table(statics_key: object, per_load: object, extra: list[str]) -> dict[str, object]:
    return {"workload": "seed", "context": 1024, "family": "f", "engine": "sim", "per_load": per_load,
            "overrides": ["spec=ddtree", "hardware=b300", "spec.budget=8", *extra],
            "levels": [{"load": 1}, {"load": 2}], "workload_overrides": ["workload.contexts=[1024]", *extra],
            "statics": {statics_key: {"name": "x", "overrides": ["spec=ddtree", *extra]},
                        8: {"name": "b8", "overrides": ["spec=ddtree", "spec.budget=8"]}},
            "baseline": {"name": "n", "overrides": ["spec=none", *extra]}}


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.sampled_from(HOSTILE_KEYS + [4]), st.sampled_from(BAD_TABLES + [[[1, 1, 8], [2, 64, 4]]]),
       st.lists(st.sampled_from(PLUMBING), max_size=3))
def test_an_export_table_contributes_identity_knobs_only(statics_key: object, per_load: object,
                                                         extra: list[str]) -> None:
    """Whatever a dynamic-<engine>.yaml table holds: refused in one line naming the table's field, or taken with
    whole-number budgets (no name from the file becomes a path) and no launch plumbing in what runs."""
    from sweep.compose.dynamic_read import checked_table

    try:
        t = checked_table(_export_table(statics_key, per_load, extra), 0)
    except SweepError as err:
        assert err.exit_code == EXIT_INPUT and "\n" not in err.one_line()
        assert getattr(err, "key", "").startswith("tables[0]."), err.one_line()
        return
    assert all(isinstance(k, int) and k > 0 for k in t.statics) and t.per_load == [[1, 1, 8], [2, 64, 4]]
    taken = [*(t.overrides or []), *t.workload_overrides, *(o for m in t.statics.values() for o in m["overrides"]),
             *(t.baseline or {}).get("overrides", [])]
    assert not [o for o in taken if o in PLUMBING], taken
    assert set(extra) <= set(t.dropped)  # what was left out is named
