"""The Hydra Sweeper class: a thin shell that defers all work to ``_impl``.

Hydra imports every public module of a plugin package to discover plugins,
so this module only imports Hydra; Optuna (and its scipy/torch weight) is
imported when a sweep actually starts.
"""

from __future__ import annotations

from typing import Any, List, Optional

from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from .config import SpecsweepOptunaSweeperConf  # noqa: F401  (registers the ConfigStore nodes)


class SpecsweepOptunaSweeper(Sweeper):
    """Optuna (>= 5) search over Hydra overrides with constraints, failure memory and resume."""

    def __init__(self, **settings: Any) -> None:
        from sweep import errors

        from ._impl import OptunaSweeperImpl

        with errors.boundary("sweeper", exit=True):  # a bad hydra.sweeper.* value: one line, exit 2
            self._impl = OptunaSweeperImpl(settings)
        self.config: Optional[DictConfig] = None
        self.hydra_context: Optional[HydraContext] = None
        self.launcher = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction,
              config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self._impl.setup(hydra_context=hydra_context, task_function=task_function, config=config)
        self.launcher = self._impl.launcher

    def sweep(self, arguments: List[str]) -> Any:
        """The search, inside the sweeper's boundary: an error is one line and an exit status
        (``python -m sweep`` has its own boundary around this one; other apps get this one)."""
        from sweep import errors

        with errors.boundary("sweeper", exit=True):
            return self._impl.sweep(arguments)
        return None
