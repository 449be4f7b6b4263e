"""Hydra callback: what happens around a whole multirun.

At the start of a multirun the MLflow parent run is opened (children find
it through ``<sweep dir>/mlflow_parent.json``); at the end every server this
process started is stopped (jobs of one multirun reuse a server whose
fingerprint did not change, so nothing stops it between jobs), a summary of
all trials is printed and the parent run is closed with its cross-trial
plots.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)


def _settings(config: DictConfig) -> dict[str, Any]:
    node = config.get("mlflow")
    if node is None:
        return {"enabled": False}
    return OmegaConf.to_container(node, resolve=True)  # type: ignore[return-value]


class SweepCallback(Callback):
    def __init__(self) -> None:
        self._open_parent: tuple[dict[str, Any], Path] | None = None

    def _end_killed(self) -> None:
        """atexit: a multirun stopped by Ctrl-C never reaches on_multirun_end."""
        if self._open_parent is None:
            return
        settings, sweep_dir = self._open_parent
        self._open_parent = None
        try:
            from sweep.tracking import Tracker

            Tracker(settings).end_parent(sweep_dir, "KILLED")
        except Exception:  # noqa: BLE001 - best effort at exit
            pass

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        settings = _settings(config)
        if not settings.get("enabled", True) or config.get("dry_run"):
            return
        sweep_dir = Path(config.hydra.sweep.dir)
        self._open_parent = (settings, sweep_dir)
        import atexit

        atexit.register(self._end_killed)
        try:
            from sweep.tracking import Tracker

            overrides = list(config.hydra.overrides.task)
            Tracker(settings).start_parent(sweep_dir, name=sweep_dir.name,
                                           params={"overrides": " ".join(overrides)[:5000]})
        except Exception as exc:  # noqa: BLE001 - tracking never stops a sweep
            log.warning("MLflow parent run not started: %s", exc)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            import launchers

            launchers.stop_all()
        finally:
            sweep_dir = Path(config.hydra.sweep.dir)
            if not config.get("dry_run"):
                try:
                    from sweep.summary_sweep import print_sweep

                    print_sweep(sweep_dir)
                except Exception as exc:  # noqa: BLE001
                    log.warning("could not print the sweep summary: %s", exc)
            settings = _settings(config)
            self._open_parent = None
            if settings.get("enabled", True) and not config.get("dry_run"):
                try:
                    from sweep.tracking import Tracker

                    Tracker(settings).end_parent(sweep_dir)
                except Exception as exc:  # noqa: BLE001
                    log.warning("MLflow parent run not closed: %s", exc)
