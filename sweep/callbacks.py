"""Hydra callback: what happens around a whole multirun, and around each job's files.

At the start of a multirun the MLflow parent run is opened (children find
it through ``<sweep dir>/mlflow_parent.json``); at the end every server this
process started is stopped (jobs of one multirun reuse a server whose
fingerprint did not change, so nothing stops it between jobs), a summary of
all trials is printed and the parent run is closed with its cross-trial
plots.

Hydra writes the job's config, its own settings and the overrides to
``<job dir>/.hydra/`` (and the sweep's to ``<sweep dir>/multirun.yaml``)
before a job starts, secrets included; ``on_job_start`` runs right after
and rewrites those files with every secret masked (:mod:`sweep.secrets`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from sweep import secrets

log = logging.getLogger(__name__)
HYDRA_FILES = ("config.yaml", "hydra.yaml", "overrides.yaml")


def _settings(config: DictConfig) -> Any:
    from sweep.compose.settings import Mlflow

    node = config.get("mlflow")
    if node is None:
        return Mlflow(enabled=False, tracking_uri=None, experiment="")
    return Mlflow.from_mapping(OmegaConf.to_container(node, resolve=True))  # type: ignore[arg-type]


def _secrets_of(config: DictConfig) -> secrets.Redactor:
    """Every secret value of a job: under secret names in its config, in its overrides, in the env."""
    try:
        tree = OmegaConf.to_container(config, resolve=True)
    except Exception:  # noqa: BLE001 - an unresolvable value: its raw form still names its secrets
        tree = OmegaConf.to_container(config, resolve=False)
    assert isinstance(tree, dict)
    hydra = tree.pop("hydra", None) or {}
    secrets.configure(tree.get("secret_names") or ())
    overrides = list((hydra.get("overrides") or {}).get("task") or [])
    found = secrets.collect_secrets(tree, overrides)
    secrets.remember(found)
    return secrets.redactor(found)


def mask_file(path: Path, red: secrets.Redactor) -> bool:
    """Rewrite a YAML file Hydra saved with its secrets masked; True if anything changed.

    Keys of Hydra's own settings (the ``hydra`` node) are not judged by name
    (``hosts_key: launcher.hosts`` is no key), only their values by value.
    """
    import yaml

    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return False
    if isinstance(doc, dict):
        masked: Any = {k: secrets.mask_tree(v, red, names=k != "hydra") for k, v in doc.items()}
    else:
        masked = secrets.mask_tree(doc, red)
    if masked == doc:
        return False
    path.write_text(yaml.safe_dump(masked, sort_keys=False, default_flow_style=False))
    return True


class SweepCallback(Callback):
    def __init__(self) -> None:
        self._open_parent: tuple[Any, Path] | None = None

    def _end_killed(self) -> None:
        """atexit: a multirun stopped by Ctrl-C never reaches on_multirun_end."""
        if self._open_parent is None:
            return
        settings, sweep_dir = self._open_parent
        self._open_parent = None
        try:
            from sweep.record.tracking import Tracker

            Tracker(settings).end_parent(sweep_dir, "KILLED")
        except Exception:  # noqa: BLE001 - best effort at exit
            pass

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        red = _secrets_of(config)
        hc = config.hydra
        files = []
        if hc.output_subdir is not None:
            files += [Path(hc.runtime.output_dir) / str(hc.output_subdir) / f for f in HYDRA_FILES]
        if hc.mode is not None and str(hc.mode).endswith("MULTIRUN"):
            files.append(Path(hc.sweep.dir) / "multirun.yaml")
        for path in files:
            if path.is_file():
                mask_file(path, red)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        settings = _settings(config)
        red = _secrets_of(config)
        if not settings.enabled or config.get("dry_run"):
            return
        sweep_dir = Path(config.hydra.sweep.dir)
        self._open_parent = (settings, sweep_dir)
        import atexit

        atexit.register(self._end_killed)
        try:
            from sweep.record.tracking import Tracker

            overrides = [red.text(o) for o in config.hydra.overrides.task]
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
            from sweep import app

            app.note_sweep_dir(sweep_dir)  # the exit status counts its trials (pool workers' too)
            if (sweep_dir / "multirun.yaml").is_file():
                mask_file(sweep_dir / "multirun.yaml", _secrets_of(config))
            if not config.get("dry_run"):
                try:
                    from sweep.report.sweep_summary import print_sweep

                    print_sweep(sweep_dir)
                except Exception as exc:  # noqa: BLE001
                    log.warning("could not print the sweep summary: %s", exc)
            settings = _settings(config)
            self._open_parent = None
            if settings.enabled and not config.get("dry_run"):
                try:
                    from sweep.record.tracking import Tracker

                    Tracker(settings).end_parent(sweep_dir)
                except Exception as exc:  # noqa: BLE001
                    log.warning("MLflow parent run not closed: %s", exc)
