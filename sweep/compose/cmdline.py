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
    first = next((line for line in text.splitlines() if line.strip()), text)
    return ConfigError("overrides", first.strip())


def compose(overrides: Sequence[str]) -> Any:
    """Compose the app's config for one job (raises ConfigError)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from sweep.compose.group_defaults import implied

    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
            return hydra_compose(config_name=CONFIG_NAME, overrides=implied(overrides))
    except (HydraException, OmegaConfBaseException) as exc:
        raise _option_error(exc, overrides) from None
    finally:
        GlobalHydra.instance().clear()


def expand(overrides: Sequence[str], multirun: bool) -> list[list[str]]:
    """The override lists of every job Hydra's basic sweeper would run."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    try:
        parsed = parser.parse_overrides(list(overrides))
    except HydraException as exc:
        raise ConfigError("overrides", str(exc).splitlines()[0]) from None
    if not multirun:
        return [list(overrides)]
    custom_sweeper = any(o.key_or_group == "hydra/sweeper" for o in parsed)
    if custom_sweeper:
        # Another sweeper (Optuna) owns the sweep; check the fixed part only.
        return [[o.input_line for o in parsed if not o.is_sweep_override() and o.input_line]]
    batches = BasicSweeper.split_arguments(parsed, None)
    return [list(job) for batch in batches for job in batch]


def check(argv: Sequence[str]) -> None:
    """Validate the jobs ``python -m sweep <argv>`` would run; exit 2 on error."""
    from hydra._internal.utils import get_args_parser

    try:
        args = get_args_parser().parse_args(list(argv))
    except SystemExit:
        return  # let Hydra print its own usage error
    if any(getattr(args, f, None) for f in _SKIP_FLAGS):
        return
    from sweep.compose.config import from_omegaconf

    try:
        jobs = expand(args.overrides, bool(args.multirun))
        for job in jobs[:MAX_JOBS_CHECKED]:
            cfg = compose(job)
            if args.cfg is None:
                from_omegaconf(cfg)
    except ConfigError as err:
        print(err.one_line(), file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None
