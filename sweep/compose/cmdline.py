"""Check the command line before Hydra runs anything.

Hydra reports a wrong group option or key as a multi-line traceback with
exit status 1, and a multirun only discovers a bad value when that job
starts -- after earlier jobs have restarted servers. This module composes
every job of a grid up front -- from the primary config the run will use
(``--config-dir/-cd``, ``--config-path/-cp``, ``--config-name/-cn``:
:mod:`sweep.compose.config_source`) -- and validates each one, Hydra's own
keys the run depends on (the run/sweep dir, the job subdir, the Optuna
sweeper's settings and storage) and every value of a search space, so any
mistake is one line naming the key and what is allowed, exit status 2,
before a server is touched. :func:`validate` raises the ConfigError (the
command's boundary prints it); :func:`check` prints it itself.
"""

from __future__ import annotations

import difflib
import re
import shlex
import sys
from typing import Any, Sequence

from sweep.compose import config_source
from sweep.errors import EXIT_INPUT, ConfigError, SweepError

CONFIG_MODULE = "sweep.conf"
CONFIG_NAME = config_source.CONFIG_NAME
MAX_JOBS_CHECKED = 256
PARAMS_PREFIX = "hydra.sweeper.params."

_SKIP_FLAGS = ("help", "hydra_help", "info", "shell_completion")


def _option_error(exc: Exception, overrides: Sequence[str]) -> ConfigError:
    text = str(exc)
    m = re.search(r"Could not (?:find|load) '([^']+)/([^']+)'", text)
    if m:
        group, option = m.group(1), m.group(2)
        opts = re.findall(r"^\t(\S+)$", text, flags=re.M)
        allowed = ", ".join(opts) if opts else "(see conf/" + group + "/)"
        near = difflib.get_close_matches(option, opts, n=2, cutoff=0.75)  # not fast -> dflash
        hint = f"did you mean {' or '.join(near)}? " if near else ""
        return ConfigError(group, f"unknown option {option!r}; {hint}allowed: {allowed}")
    m = re.search(r"In '([^']+)': Could not load '([^'/]+)'", text)
    if m:
        return ConfigError("defaults", f"{m.group(1)} names the config {m.group(2)!r}, which no config dir "
                           "holds (--config-dir adds a dir to the shipped configs; --config-path replaces them)")
    m = re.search(r"Cannot find primary config '([^']+)'", text)
    if m:
        return ConfigError("--config-name", f"no primary config {m.group(1)!r} in the search path "
                           "(--config-dir / --config-path)")
    cause = getattr(exc.__cause__, "full_key", None) or ""
    if str(cause).startswith(PARAMS_PREFIX):  # a param naming no key of the config (or not added with +)
        param = str(cause)[len(PARAMS_PREFIX):]
        return ConfigError(param, f"is no param of the search space: give it as the sweep override "
                           f"{param}=choice(...) (a key of the config), or add it with +hydra.sweeper.params")
    m = re.search(r"Could not override '([^']+)'", text) or re.search(r"Key '([^']+)' is not in struct", text)
    if m:
        return _no_such_key(m.group(1), overrides)
    m = re.search(r"Error merging override \+*([^=\s]+)=", text)
    if m:  # a value of the wrong shape for the key (a mapping for a list, ...)
        cause = str(exc.__cause__ or "").strip().splitlines()
        return ConfigError(m.group(1), "cannot take this value" + (f": {cause[0]}" if cause else "")
                           + " (its type: python -m sweep --cfg job)")
    key = getattr(exc, "full_key", None)
    first = next((line for line in text.splitlines() if line.strip()), text)
    return ConfigError(str(key) if key else "overrides", first.strip())


def _no_such_key(key: str, overrides: Sequence[str]) -> ConfigError:
    """A key the config does not have: the nearest keys it has; ``+key`` only where a new key is read."""
    from sweep.compose import known_keys

    place = known_keys.free_place_of(key)
    if place is not None:  # a key of your own under a free-form mapping: adding it is the way
        return ConfigError(key, f"not set yet; {place} takes keys of your own: add it with +{key}=VALUE")
    others = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") != key]
    try:
        candidates = known_keys.flat_keys(config_source.compose(_implied(others), hydra_config=True))
    except Exception:  # noqa: BLE001 - the other overrides do not compose either: the key table's keys
        candidates = []
    near = known_keys.nearest(key, candidates)
    hint = f"did you mean {' or '.join(near)}?" if near else "no key is close to it"
    return ConfigError(key, f"no such key; {hint} ({_lister(key, others)} lists them all)")


def _lister(key: str, overrides: Sequence[str]) -> str:
    """The command that lists the keys ``key`` sits among: ``--cfg job`` has no ``hydra.`` key,
    ``--cfg hydra`` has them, the sweeper's only with the command's ``hydra/...`` choices."""
    if not key.startswith("hydra."):
        return "python -m sweep --cfg job"
    groups = [o for o in overrides if o.lstrip("+~").startswith("hydra/")]
    return shlex.join(["python", "-m", "sweep", "--cfg", "hydra", *groups])


def _implied(overrides: Sequence[str]) -> list[str]:
    from sweep.compose.group_defaults import implied

    return implied(overrides)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def compose(overrides: Sequence[str], *, hydra_config: bool = False) -> Any:
    """Compose the app's config for one job (raises ConfigError); ``hydra_config``: with ``hydra.*``.

    From the primary config this run uses (:func:`sweep.compose.config_source.use`).
    """
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    import sweep.compose.resolvers  # noqa: F401  (${sweep.*}: a sweeper space resolves some as it composes)
    from sweep.compose.group_defaults import implied

    try:
        return config_source.compose(implied(overrides), hydra_config=hydra_config)
    except SweepError:
        raise
    except (HydraException, OmegaConfBaseException) as exc:
        first = _option_error(exc, overrides)
    except (ValueError, TypeError, KeyError, AttributeError, AssertionError) as exc:
        # Hydra's own checks of odd overrides (``=5``: "Config group override must be a string")
        raise ConfigError("overrides", f"{' '.join(overrides)[:200]}: {_first_line(exc)}") from None
    from sweep.compose.typos import every_typo  # each misspelling of the line, one line each

    raise every_typo(overrides, first, lambda rest: compose(rest, hydra_config=hydra_config)) from None


def expand(overrides: Sequence[str], multirun: bool, *, custom_sweeper: bool | None = None) -> list[list[str]]:
    """The override lists of every job Hydra's basic sweeper would run (another sweeper: its fixed part)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    parsed = _parse(overrides)
    if not multirun:
        return [list(overrides)]
    if custom_sweeper if custom_sweeper is not None else _custom_sweeper(parsed):
        # Another sweeper (Optuna) owns the sweep; check the fixed part (its values: search_space).
        return [[o.input_line for o in parsed if not o.is_sweep_override() and o.input_line]]
    batches = BasicSweeper.split_arguments(parsed, None)
    return [list(job) for batch in batches for job in batch]


def _parse(overrides: Sequence[str]) -> list[Any]:
    """Hydra's parse of the overrides; one that does not parse is named by its key."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    out = []
    for line in overrides:
        try:
            out += parser.parse_overrides([line])
        except (HydraException, ValueError) as exc:  # ValueError: 5,000 digits are past int()'s limit
            key = line.split("=", 1)[0].lstrip("+~") if "=" in line else ""
            if not key or not re.fullmatch(r"[\w./@-]+", key):
                raise ConfigError("overrides", f"{line!r}: {_first_line(exc)}") from None
            value = line.split("=", 1)[1]
            value = value if len(value) <= 80 else value[:77] + "..."
            if re.match(r"^\s*(choice|range|interval|int|float|tag|shuffle|sort|glob)\s*\(", value):
                from sweep.compose.search_space import SYNTAX

                raise ConfigError(key, f"not a search space ({SYNTAX}; an empty choice() has no value): "
                                  f"{value!r}") from None
            raise ConfigError(key, f"cannot parse the value {value!r} ({_first_line(exc)[:160]}); "
                              f"quote it: {key}='...'") from None
    for o in out:
        _no_leading_zeros(o)
    out = [_glob_resolved(o, parser) for o in out]
    for o in out:  # a number past any float: Hydra's typed float keys would overflow composing it
        number = o.value() if not o.is_sweep_override() else None
        if isinstance(number, int) and not isinstance(number, bool) and abs(number) >= 2**1024:
            raise ConfigError(o.key_or_group, f"a number of {len(str(abs(number)))} digits is past any the "
                              "config can hold")
    return out


_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_NUMBER_TOKEN = re.compile(r"(?<![\w.:/~$@-])[-+]?\d[\w.]*(?![\w.:/~@-])")


def _no_leading_zeros(override: Any) -> None:
    """``workload.max_tokens=017`` is refused: the command line reads 17 where a config file reads
    octal 15 (:func:`sweep.compose.yaml_guard.ambiguous_number`); quoted text is a string, left alone."""
    from sweep.compose.yaml_guard import ambiguous_number

    line = override.input_line or ""
    if "=" not in line:
        return
    value = _QUOTED.sub("''", line.split("=", 1)[1])
    for m in _NUMBER_TOKEN.finditer(value):
        why = ambiguous_number(m.group(0))
        if why:
            raise ConfigError(override.key_or_group, why)


def _glob_resolved(override: Any, parser: Any) -> Any:
    """``hardware=glob(pro6000_*)`` as the choice of the group's options it matches.

    Hydra's basic sweeper resolves ``glob`` against the config loader when the
    sweep starts; the up-front check has none, so it resolves it here, against
    the search path this run uses. A glob over a value (not a config group), or
    one that matches nothing, would run no job at all: one line instead.
    """
    from hydra.core.override_parser.types import ValueType

    if override.value_type != ValueType.GLOB_CHOICE_SWEEP:
        return override
    group = override.key_or_group
    options = config_source.group_options(group) if re.fullmatch(r"[\w/-]+", group) else []
    if not options:
        raise ConfigError(group, "glob(...) picks options of a config group (hardware, spec, workload, ...); "
                          f"{group} has none: give its values as a list (a,b,c) or choice(...)")
    picked = list(override.value().filter(options))
    if not picked:
        raise ConfigError(group, f"{override.input_line.split('=', 1)[-1]} matches no option; options: "
                          + ", ".join(options))
    line = f"{override.get_key_element()}={','.join(picked)}"
    return parser.parse_overrides([line])[0]


def _custom_sweeper(parsed: Sequence[Any]) -> bool:
    return any(o.key_or_group == "hydra/sweeper" for o in parsed)


def canonical(argv: Sequence[str]) -> list[str]:
    """``hydra.sweeper.params.<key>=<expr>`` as the sweep override ``<key>=<expr>``.

    Hydra's Optuna sweeper documents its search space as ``hydra.sweeper.params``
    in YAML and as sweep overrides on the command line (``'spec.budget=choice(4,8,16)'``);
    the dotted form on the command line would set a nested key that is no param
    (params are keyed ``spec.budget``), or be refused as a sweep of Hydra's own
    config. Both mean the same search, so the dotted form becomes the sweep
    override (later wins over the YAML's params, as Hydra's sweeper merges them).
    """
    out = []
    for arg in argv:
        m = re.match(r"^\+{0,2}" + re.escape(PARAMS_PREFIX) + r"([\w.@/+-]+)=(.*)$", arg, flags=re.S)
        if m is None or arg.startswith("-"):
            out.append(arg)
            continue
        key, value = m.group(1), m.group(2)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]  # '...' kept the shell's quotes: the expression inside
        out.append(f"{key}={value}")
    return out


def flags_first(argv: Sequence[str]) -> list[str]:
    """Hydra's flags (with their values) before the overrides, each kept in its order.

    Hydra's parser takes the overrides as one positional run: ``workload=smoke -m
    spec.budget=4,8`` leaves ``spec.budget=4,8`` "unrecognized". Every override is
    a ``key=value`` word and every flag is one of the parser's options, so moving
    the flags to the front changes nothing but that. An unknown ``-x`` stays where
    it is (the parser names it).
    """
    from hydra._internal.utils import get_args_parser

    options = {s: a for a in get_args_parser()._actions for s in a.option_strings}
    flags: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        action = options.get(word.split("=", 1)[0]) if word.startswith("-") else None
        if action is None:
            rest.append(word)
            i += 1
            continue
        flags.append(word)
        i += 1
        if "=" in word or action.nargs == 0 or i >= len(argv):
            continue
        if action.nargs is None or (action.nargs == "?" and action.choices and argv[i] in action.choices):
            flags.append(argv[i])
            i += 1
    return flags + rest


def duplicates(overrides: Sequence[str]) -> list[str]:
    """One warning per key given more than once (Hydra keeps the last, silently). The value of a
    secret key is shown as ``***`` by its name: masking the line as text missed it (``wins:`` read as
    the name of an assignment whose value was ``server.api_key=sk-...``; a value with a space)."""
    from sweep import secrets

    seen: dict[str, list[str]] = {}
    for line in overrides:
        key = line.split("=", 1)[0].lstrip("+~") if "=" in line else line.lstrip("~")
        if key:
            seen.setdefault(key, []).append(line)

    def shown(key: str, line: str) -> str:
        if "=" in line and secrets.is_secret_name(key):
            return f"{line.split('=', 1)[0]}={secrets.MASK}"
        return secrets.mask_text(line)

    return [f"warning: {key} is given {len(lines)} times; the last one wins: {shown(key, lines[-1])}"
            for key, lines in seen.items() if len(lines) > 1]


def _args(argv: Sequence[str]) -> Any:
    from hydra._internal.utils import get_args_parser

    from sweep.errors import one_line_usage_errors

    parser = get_args_parser()
    parser.prog = "python -m sweep"
    # A usage error is one line here, before Hydra (which would print its usage block, then again).
    args = one_line_usage_errors(parser, "--hydra-help").parse_args(list(argv))
    given = [flag for flag, on in (("--run", args.run), ("--multirun", args.multirun), ("--cfg", args.cfg),
                                   ("--info", args.info), ("--shell-completion", args.shell_completion)) if on]
    if len(given) > 1:  # Hydra's own rule, which it raises as a ValueError (an "internal error")
        hint = " (--cfg shows one job's config: drop -m, one value per key)" if {"--cfg", "--multirun"} <= set(given) \
            else ""
        raise ConfigError(given[0], f"cannot be combined with {', '.join(given[1:])}: give one of --run, "
                          f"--multirun, --cfg, --info and --shell-completion{hint}")
    return args


def parse_args(argv: Sequence[str]) -> Any:
    """Hydra's reading of ``python -m sweep <argv>`` (flags, overrides); a usage error is one line."""
    return _args(argv)


def fixed_overrides(overrides: Sequence[str]) -> list[str]:
    """The overrides that are not sweeps (``spec.budget=4,8`` is one; ``workload=smoke`` is not)."""
    return [o.input_line for o in _parse(overrides) if not o.is_sweep_override() and o.input_line]


def validate(argv: Sequence[str]) -> None:
    """Validate the jobs ``python -m sweep <argv>`` would run; raises ConfigError (or StorageError).

    Bad input of any shape is one error (never a traceback), before Hydra
    runs anything: this is where every job of a grid, Hydra's keys the run
    depends on and every value of a search space are checked.
    """
    args = _args(argv)
    if any(getattr(args, f, None) for f in _SKIP_FLAGS):
        return
    from sweep import secrets

    try:
        source = config_source.Source.of(args)
        config_source.check_files(source)
        config_source.use(source)
        _validate(args)
    except SweepError:
        raise
    except RecursionError:
        raise ConfigError("overrides", "nested too deeply") from None
    except Exception as exc:  # noqa: BLE001 - odd input must not end in a traceback either
        raise ConfigError("overrides", f"could not be checked ({type(exc).__name__}: "
                          f"{_first_line(exc)[:300]})") from None
    for line in duplicates(args.overrides):  # once, for a command line that will run
        print(secrets.mask_text(line), file=sys.stderr, flush=True)


def _validate(args: Any) -> None:
    from sweep.compose import hydra_checks
    from sweep.compose.config import from_omegaconf

    parsed = _parse(args.overrides)
    multirun = bool(args.multirun)
    if not multirun:  # Hydra: "Ambiguous value for argument" / "Sweep parameters ... requires --multirun"
        for o in parsed:
            if o.is_sweep_override():
                value = o.input_line.split("=", 1)[-1]
                raise ConfigError(o.key_or_group, f"{value} is several values, a sweep: add -m "
                                  f"(python -m sweep -m {shlex.join(args.overrides)})")
    for o in parsed:
        if multirun and o.is_sweep_override() and re.match(r"hydra[./]", o.key_or_group):
            raise ConfigError(o.key_or_group, "Hydra's own settings take one value per run, not a sweep "
                              f"({o.input_line}); run one command per value")
    fixed = [o.input_line for o in parsed if not o.is_sweep_override() and o.input_line] \
        if multirun else list(args.overrides)
    head = compose(fixed, hydra_config=True)  # the run's Hydra settings (which sweeper, which dirs)
    custom = multirun and hydra_checks.custom_sweeper(head)
    jobs = expand(args.overrides, multirun, custom_sweeper=custom)
    for job in jobs[:MAX_JOBS_CHECKED]:
        cfg = _without_hydra(head) if job == fixed else compose(job)  # one run: composed once
        if args.cfg is None:
            trial = from_omegaconf(cfg)
            _check_pool(job, trial.pool)
    if args.cfg is not None:
        return
    from sweep.compose import known_keys

    # a key added with + that nothing reads would change nothing: refused (sweep/compose/known_keys.py)
    known_keys.check_added(parsed, head, groups=[str(o.key_or_group) for o in parsed
                                                if "." not in str(o.key_or_group)
                                                and config_source.group_options(str(o.key_or_group))],
                           exists=lambda key: _has_key(key, [o.input_line for o in parsed
                                                             if o.input_line and not o.is_force_add()
                                                             and not o.is_sweep_override()]))
    _launcher_applies(head, parsed, multirun, custom)  # after the values: a bad one is named first
    hydra_checks.check(head, multirun=multirun, custom_sweeper=custom)
    if custom:
        hydra_checks.check_search_space(head, [o.input_line for o in parsed
                                               if o.is_sweep_override() and o.input_line], fixed, compose)


def _has_key(key: str, overrides: Sequence[str]) -> bool:
    """Whether the config composed from ``overrides`` has ``key`` (``++key=v`` then only sets it)."""
    from omegaconf import OmegaConf

    try:
        return OmegaConf.select(compose(overrides, hydra_config=True), key, default=_ABSENT) is not _ABSENT
    except SweepError:
        return False


_ABSENT = object()
def _launcher_applies(head: Any, parsed: Sequence[Any], multirun: bool, custom: bool) -> None:
    """A launcher whose trials run as jobs (``launcher=slurm``: ``sweep.launch.BACKENDS[...].trials``)
    runs the trials of a search (``-m hydra/sweeper=optuna``). A single run or a plain grid has no
    controller to submit them: every trial would run on this machine (the login node) -- refused."""
    from omegaconf import OmegaConf

    from sweep.launch import BACKENDS

    names = {str(OmegaConf.select(head, "launcher.name") or "")}
    for o in parsed:  # a grid over launchers: each of them
        if o.key_or_group == "launcher" and o.is_sweep_override():
            names |= {str(v) for v in o.sweep_iterator()}
    for name in sorted(names):
        entry = BACKENDS.get(name)
        if entry is None or entry.trials is None or (multirun and custom):
            continue
        where = "a plain grid (-m with Hydra's basic sweeper)" if multirun else "a single run"
        raise ConfigError("launcher", f"launcher={name} submits the trials of a search as jobs; {where} would "
                          f"run them all on this machine: use -m hydra/sweeper=optuna (a grid: "
                          f"hydra/sweeper/sampler=grid), or hydra/launcher=submitit_slurm for a plain grid "
                          f"(docs/cluster.md)")


def _check_pool(job: Sequence[str], pool: Sequence[Any]) -> None:
    """Each box of ``launcher.hosts`` composed as its worker will be (the job's overrides, then the
    entry's: ``server_port``, ``host``, its own ``overrides``), before any worker starts: a bad
    per-host value is one line naming the entry, not a worker that dies after the others began."""
    from sweep.compose.config import from_omegaconf

    for i, host in enumerate(pool):
        try:
            _parse(host.overrides)
            from_omegaconf(compose([*job, *host.overrides]))
        except ConfigError as err:
            raise ConfigError(f"launcher.hosts[{i}]", f"({host.label}) {err.key}: {err.message}") from None
        except SweepError:
            raise
        except Exception as exc:  # noqa: BLE001 - a line Hydra cannot apply: named with its entry
            raise ConfigError(f"launcher.hosts[{i}]", f"({host.label}) {_first_line(exc)[:300]}") from None


def _without_hydra(cfg: Any) -> Any:
    import copy

    from omegaconf import open_dict

    out = copy.deepcopy(cfg)
    with open_dict(out):
        del out["hydra"]
    return out


def check(argv: Sequence[str]) -> None:
    """:func:`validate`, printing its one line and exiting 2 itself (for callers without a boundary)."""
    try:
        validate(argv)
    except SweepError as err:
        _refuse(err.one_line(), err.exit_code)


def _refuse(line: str, code: int = EXIT_INPUT) -> None:
    from sweep import secrets

    print(secrets.mask_text(line), file=sys.stderr)
    raise SystemExit(code) from None


def print_config(argv: Sequence[str]) -> bool:
    """``--cfg job|hydra|all`` of one run: what runs, secrets masked (:mod:`sweep.compose.show_config`)."""
    from sweep.compose import show_config

    return show_config.show(_args(argv), compose)


print_job_config = print_config  # the older name
