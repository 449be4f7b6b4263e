"""Check the command line before Hydra runs anything.

Hydra reports a wrong group option or key as a multi-line traceback with
exit status 1, and a multirun only discovers a bad value when that job
starts -- after earlier jobs have restarted servers. This module composes
every job of a grid up front (Hydra's own compose API and its basic
sweeper's expansion) and validates each one, so any mistake is one line
naming the key and what is allowed, exit status 2, before a server is
touched.
"""

from __future__ import annotations

import re
import sys
from typing import Any, Sequence

from sweep.errors import EXIT_CONFIG, ConfigError

CONFIG_MODULE = "sweep.conf"
CONFIG_NAME = "config"
MAX_JOBS_CHECKED = 256

_SKIP_FLAGS = ("help", "hydra_help", "info", "shell_completion")


def _option_error(exc: Exception, overrides: Sequence[str]) -> ConfigError:
    text = str(exc)
    m = re.search(r"Could not (?:find|load) '([^']+)/([^']+)'", text)
    if m:
        group, option = m.group(1), m.group(2)
        opts = re.findall(r"^\t(\S+)$", text, flags=re.M)
        allowed = ", ".join(opts) if opts else "(see conf/" + group + "/)"
        return ConfigError(group, f"unknown option {option!r}; allowed: {allowed}")
    m = re.search(r"Could not override '([^']+)'", text) or re.search(r"Key '([^']+)' is not in struct", text)
    if m:
        key = m.group(1)
        return ConfigError(key, "no such key; to add a new one write +" + key + "=VALUE "
                           "(keys of each group: python -m sweep --cfg job)")
    m = re.search(r"Error merging override \+*([^=\s]+)=", text)
    if m:  # a value of the wrong shape for the key (a mapping for a list, ...)
        cause = str(exc.__cause__ or "").strip().splitlines()
        return ConfigError(m.group(1), "cannot take this value" + (f": {cause[0]}" if cause else "")
                           + " (its type: python -m sweep --cfg job)")
    first = next((line for line in text.splitlines() if line.strip()), text)
    return ConfigError("overrides", first.strip())


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def compose(overrides: Sequence[str], *, hydra_config: bool = False) -> Any:
    """Compose the app's config for one job (raises ConfigError); ``hydra_config``: with ``hydra.*``."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from sweep.compose.group_defaults import implied

    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
            return hydra_compose(config_name=CONFIG_NAME, overrides=implied(overrides),
                                 return_hydra_config=hydra_config)
    except (HydraException, OmegaConfBaseException) as exc:
        raise _option_error(exc, overrides) from None
    except (ValueError, TypeError, KeyError, AttributeError, AssertionError) as exc:
        # Hydra's own checks of odd overrides (``=5``: "Config group override must be a string")
        raise ConfigError("overrides", f"{' '.join(overrides)[:200]}: {_first_line(exc)}") from None
    finally:
        GlobalHydra.instance().clear()


def expand(overrides: Sequence[str], multirun: bool) -> list[list[str]]:
    """The override lists of every job Hydra's basic sweeper would run."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    parsed = _parse(overrides)
    if not multirun:
        return [list(overrides)]
    if _custom_sweeper(parsed):
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
        except HydraException as exc:
            key = line.split("=", 1)[0].lstrip("+~") if "=" in line else ""
            if not key or not re.fullmatch(r"[\w./@-]+", key):
                raise ConfigError("overrides", f"{line!r}: {_first_line(exc)}") from None
            raise ConfigError(key, f"cannot parse the value {line.split('=', 1)[1]!r} ({_first_line(exc)}); "
                              f"quote it: {key}='...'") from None
    return out


def _custom_sweeper(parsed: Sequence[Any]) -> bool:
    return any(o.key_or_group == "hydra/sweeper" for o in parsed)


def _check_search_space(overrides: Sequence[str], fixed: list[str]) -> None:
    """Every value of the Optuna sweeper's space (``hydra.sweeper.params`` + sweep overrides)."""
    from omegaconf import OmegaConf

    from sweep.compose.config import from_omegaconf
    from sweep.compose.search_space import check_values, space_of

    cfg = compose(fixed, hydra_config=True)
    params = OmegaConf.to_container(cfg.hydra.sweeper.params, resolve=False) \
        if OmegaConf.select(cfg, "hydra.sweeper.params") is not None else {}
    sweeps = [o.input_line for o in _parse(overrides) if o.is_sweep_override() and o.input_line]
    space = space_of({str(k): v for k, v in params.items()} if isinstance(params, dict) else {}, sweeps)

    def compose_job(extra: list[str]) -> None:
        from_omegaconf(compose([*fixed, *extra]))

    check_values(space, compose_job)


def check(argv: Sequence[str]) -> None:
    """Validate the jobs ``python -m sweep <argv>`` would run; exit 2 on error.

    Bad input of any shape is one line (never a traceback), before Hydra
    runs anything: this is where every job of a grid and every value of a
    search space are checked.
    """
    from hydra._internal.utils import get_args_parser

    parser = get_args_parser()
    parser.prog = "python -m sweep"
    # A usage error is printed here, once, and ends the run (exit 2): Hydra would print it again.
    args = parser.parse_args(list(argv))
    if any(getattr(args, f, None) for f in _SKIP_FLAGS):
        return
    from sweep.compose.config import from_omegaconf

    try:
        jobs = expand(args.overrides, bool(args.multirun))
        for job in jobs[:MAX_JOBS_CHECKED]:
            cfg = compose(job)
            if args.cfg is None:
                from_omegaconf(cfg)
        if args.multirun and args.cfg is None and _custom_sweeper(_parse(args.overrides)):
            _check_search_space(args.overrides, jobs[0])
    except ConfigError as err:
        _refuse(err.one_line())
    except RecursionError:
        _refuse("error: overrides: nested too deeply")
    except Exception as exc:  # noqa: BLE001 - odd input must not end in a traceback either
        _refuse(f"error: overrides: could not be checked ({type(exc).__name__}: {_first_line(exc)[:300]})")


def _refuse(line: str) -> None:
    from sweep import secrets

    print(secrets.mask_text(line), file=sys.stderr)
    raise SystemExit(EXIT_CONFIG) from None


def print_job_config(argv: Sequence[str]) -> bool:
    """``--cfg job`` (one run, no ``--package``): the composed config resolved, secrets masked.

    Hydra prints it unresolved (``${sweep.python:}``, ``${spec.budget}``), which
    does not say what will run; resolved, a secret set through the environment
    (``${oc.env:SPECSWEEP_API_KEY}``) would show, so it is masked. False: not
    this case, Hydra handles the command line.
    """
    from hydra._internal.utils import get_args_parser

    args = get_args_parser().parse_args(list(argv))
    if args.cfg != "job" or args.multirun or args.package or args.info:
        return False
    import yaml
    from omegaconf import OmegaConf

    import sweep.compose.resolvers  # noqa: F401  (registers ${sweep.*})
    from sweep import secrets

    tree = OmegaConf.to_container(compose(args.overrides), resolve=True)
    assert isinstance(tree, dict)
    tree.pop("hydra", None)
    red = secrets.redactor(secrets.collect_secrets(tree, list(args.overrides)))
    sys.stdout.write(yaml.safe_dump(secrets.mask_tree(tree, red), sort_keys=False, default_flow_style=False))
    return True
