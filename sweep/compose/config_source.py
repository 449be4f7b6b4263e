"""Which primary config a run composes, and composing it the way Hydra will.

``python -m sweep --config-dir DIR --config-name best`` (the rerun line a
search prints) or ``-cp /my/conf -cn mine`` runs a primary config other than
the shipped ``config.yaml``; the up-front check used to build the shipped one
and so checked -- and ``--cfg job`` printed -- something else than what ran.
:class:`Source` holds those three flags; :func:`compose` builds a job's
config from it with Hydra's own search path rules
(``create_automatic_config_search_path`` for the task module ``sweep.cli.app``,
``--config-dir`` prepended as Hydra's ``_run_hydra`` does), so what is
checked is what Hydra then runs. The user's config files are input: their
YAML aliases are bounded first (:mod:`sweep.compose.yaml_guard`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from sweep.errors import ConfigError

CONFIG_PATH = "pkg://sweep.conf"   # @hydra.main(config_path=...) in sweep/cli/app.py
CONFIG_NAME = "config"
TASK_MODULE = "sweep.cli.app"          # where the task function lives (Hydra resolves relative paths from it)
VERSION_BASE = "1.3"               # @hydra.main(version_base=...)


@dataclass(frozen=True)
class Source:
    config_path: str = CONFIG_PATH
    config_name: str = CONFIG_NAME
    config_dir: str | None = None

    @classmethod
    def of(cls, args: Any) -> "Source":
        """From Hydra's parsed arguments (``--config-path/-cp``, ``--config-name/-cn``, ``--config-dir/-cd``)."""
        return cls(config_path=args.config_path or CONFIG_PATH, config_name=args.config_name or CONFIG_NAME,
                   config_dir=args.config_dir)

    @property
    def shipped(self) -> bool:
        return self == Source()

    def user_dirs(self) -> list[Path]:
        """The directories of config files the user brings (their YAML is checked before use)."""
        out = []
        if self.config_dir:
            out.append(Path(self.config_dir).expanduser().absolute())
        if self.config_path != CONFIG_PATH and not self.config_path.startswith("pkg://"):
            out.append(Path(self.config_path).expanduser().absolute())
        return out


_current = Source()


def use(source: Source) -> None:
    """The primary config this process runs (set once from the command line)."""
    global _current
    _current = source


def current() -> Source:
    return _current


def check_files(source: Source) -> None:
    """The user's config directories exist; every YAML file Hydra reads from them is bounded."""
    from sweep.compose import yaml_guard

    if source.config_dir and not Path(source.config_dir).expanduser().is_dir():
        raise ConfigError("--config-dir", f"{source.config_dir}: not a directory")
    for d in source.user_dirs():
        if not d.is_dir():
            raise ConfigError("--config-path", f"{d}: not a directory")
    if not re.fullmatch(r"[\w.@/+-]{1,255}", source.config_name) or ".." in source.config_name.split("/"):
        raise ConfigError("--config-name", f"must be a config file's name (without .yaml), got {source.config_name!r}")
    yaml_guard.guard_hydra_files()


def _hydra(source: Source) -> Any:
    """Hydra's main object for ``source``'s search path (GlobalHydra set: the caller clears it)."""
    from hydra import version
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_automatic_config_search_path
    from hydra.core.config_search_path import SearchPathQuery
    from hydra.core.utils import setup_globals

    version.setbase(VERSION_BASE)
    setup_globals()
    search_path = create_automatic_config_search_path(None, TASK_MODULE, source.config_path)
    if source.config_dir:
        search_path.prepend(provider="command-line",
                            path=f"file://{os.path.abspath(os.path.expanduser(source.config_dir))}",
                            anchor=SearchPathQuery(provider="schema"))
    return Hydra.create_main_hydra2(task_name=TASK_MODULE.rpartition(".")[2], config_search_path=search_path)


def group_options(group: str, source: Source | None = None) -> list[str]:
    """The options of config group ``group`` in ``source``'s search path (what ``glob(...)`` picks from)."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.object_type import ObjectType

    GlobalHydra.instance().clear()
    try:
        loader = _hydra(source or _current).config_loader
        return list(loader.get_group_options(group, results_filter=ObjectType.CONFIG))
    finally:
        GlobalHydra.instance().clear()


def compose(overrides: Sequence[str], *, hydra_config: bool = False, source: Source | None = None) -> Any:
    """One job's config, composed as Hydra composes it for ``source`` (raises Hydra's exceptions)."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode
    from omegaconf import open_dict

    source = source or _current
    GlobalHydra.instance().clear()
    try:
        hydra = _hydra(source)
        cfg = hydra.compose_config(config_name=source.config_name, overrides=list(overrides),
                                   run_mode=RunMode.RUN, from_shell=False, with_log_configuration=False)
        if not hydra_config:
            with open_dict(cfg):
                del cfg["hydra"]
        return cfg
    finally:
        GlobalHydra.instance().clear()
