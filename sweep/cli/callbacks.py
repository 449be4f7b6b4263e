"""Hydra callback: what happens around a whole multirun, and around each job's files.

At the start of a multirun the MLflow parent run is opened (children find
it through ``<sweep dir>/mlflow_parent.json``); at the end every server this
process started is stopped (jobs of one multirun reuse a server whose
fingerprint did not change, so nothing stops it between jobs), a summary of
all trials is printed and the parent run is closed with its cross-trial
plots.

Hydra writes the job's config, its own settings and the overrides to
``<job dir>/.hydra/`` (and the sweep's to ``<sweep dir>/multirun.yaml``)
before a job starts, secrets included; :class:`SecretsCallback` runs right
after and rewrites those files with every secret masked (:mod:`sweep.secrets`)
-- a callback of its own, so a host pool's workers (which drop the sweep
callback) mask theirs too. A multirun holds its sweep dir
(:mod:`sweep.io.dirlock`): a second one on the same dir is refused in one line.
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


def _grid_size(config: DictConfig) -> int | None:
    """How many jobs Hydra's basic sweeper runs for this multirun (None: another sweeper)."""
    target = str(OmegaConf.select(config, "hydra.sweeper._target_") or "")
    if not target.endswith("BasicSweeper"):
        return None
    from sweep.compose.cmdline import expand

    try:
        return len(expand(list(config.hydra.overrides.task), multirun=True))
    except Exception:  # noqa: BLE001 - a count is a nicety; Hydra reports bad overrides itself
        return None


def _n_trials(config: DictConfig) -> int | None:
    """A search's trials in all (its study's n_trials), None when it has none."""
    try:
        n = OmegaConf.select(config, "hydra.sweeper.n_trials")
    except Exception:  # noqa: BLE001 - a count is a nicety
        return None
    return int(n) if isinstance(n, int) else None


def _sweep_name(config: DictConfig, red: secrets.Redactor) -> str:
    """The parent run's name: what the sweep sweeps (grid overrides or study name) and when."""
    from sweep.record.naming import sweep_name

    study = None
    if not str(OmegaConf.select(config, "hydra.sweeper._target_") or "").endswith("BasicSweeper"):
        try:
            study = OmegaConf.select(config, "hydra.sweeper.study_name")
        except Exception:  # noqa: BLE001 - an unresolvable name: the overrides name the sweep
            study = None
    overrides = [red.text(o) for o in config.hydra.overrides.task]
    return sweep_name(overrides, str(study) if study else None)


def _drop_dry_run_dirs(job_dir: Path) -> None:
    """A dry run leaves nothing behind: Hydra's job dir held only its own record."""
    import shutil

    hydra_dir = job_dir / ".hydra"
    if hydra_dir.is_dir() and {p.name for p in hydra_dir.iterdir()} <= set(HYDRA_FILES):
        shutil.rmtree(hydra_dir, ignore_errors=True)
    for log in job_dir.glob("*.log"):
        if log.is_file() and log.stat().st_size == 0:
            log.unlink()
    stop = Path.cwd().resolve()
    for d in (job_dir, job_dir.parent, job_dir.parent.parent):  # time, date, outputs/ if empty
        d = d.resolve()
        if d == stop or d in stop.parents:
            break
        try:
            d.rmdir()
        except OSError:
            break


def mask_job_files(config: DictConfig) -> None:
    """Rewrite the files Hydra saved for this job (and the sweep's multirun.yaml) with secrets masked."""
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


class SecretsCallback(Callback):
    """Masks each job's ``.hydra/`` files as it starts -- in every process that runs jobs.

    A callback of its own, apart from :class:`SweepCallback`: a host pool's
    workers run without the sweep callback (their controller owns the sweep)
    but write job dirs too, and theirs used to keep the secrets in clear.
    """

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        mask_job_files(config)


class SweepCallback(Callback):
    def __init__(self) -> None:
        self._open_parent: tuple[Any, Path] | None = None
        self._progress: Any = None  # "[trial i/N] ... ETA" for a grid (Hydra's basic sweeper)
        self._varying: set[str] = set()
        self._name: str | None = None
        self._lock: Any = None  # the sweep dir's lock (sweep/io/dirlock.py), held until the multirun ends

    def _end_killed(self) -> None:
        """atexit: a multirun stopped by Ctrl-C never reaches on_multirun_end."""
        if self._open_parent is None:
            return
        settings, sweep_dir = self._open_parent
        self._open_parent = None
        try:
            from sweep.record.tracking import Tracker
            from sweep.report.mlflow_artifacts import sweep_artifacts

            Tracker(settings).end_parent(sweep_dir, "KILLED", artifacts=sweep_artifacts)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if self._progress is not None:
            red = _secrets_of(config)
            hc = config.hydra
            num = OmegaConf.select(config, "hydra.job.num")
            self._progress.start(int(num or 0) + 1, self._what(list(hc.overrides.task), red))

    def _what(self, overrides: list[str], red: secrets.Redactor) -> str:
        """A job's overrides of the keys its grid varies (all of them if it varies none)."""
        shown = [o for o in overrides if o.partition("=")[0].lstrip("+~") in self._varying] or overrides
        return " ".join(red.text(o) for o in shown)

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        if self._progress is not None:
            ret = getattr(job_return, "_return_value", None)
            self._progress.done(ran=not (isinstance(ret, dict) and ret.get("skipped")))
        if config.get("dry_run"):
            _drop_dry_run_dirs(Path(config.hydra.runtime.output_dir))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        settings = _settings(config)
        red = _secrets_of(config)
        if config.get("dry_run"):
            return
        from sweep import errors
        from sweep.io import dirlock

        try:  # one sweep per sweep dir at a time
            self._lock = dirlock.acquire(Path(config.hydra.sweep.dir))
        except errors.StorageError as err:  # Hydra turns a callback's exception into a warning
            raise errors.StopRun() from err  # the boundary prints it: one line, exit 2
        self._name = _sweep_name(config, red)  # what it sweeps and when it started
        total = _grid_size(config)
        from sweep.trial import rerun

        # the same command again resumes here until it finishes (sweep/trial/rerun.py)
        rerun.started(Path(config.hydra.sweep.dir), total if total is not None else _n_trials(config))
        if total is not None:
            from sweep.record.naming import sweep_overrides
            from sweep.report.progress import SweepProgress

            self._progress = SweepProgress(total)
            self._varying = set(sweep_overrides(list(config.hydra.overrides.task)))
        if not settings.enabled:
            return
        sweep_dir = Path(config.hydra.sweep.dir)
        self._open_parent = (settings, sweep_dir)
        import atexit

        atexit.register(self._end_killed)
        try:
            from sweep.record.tracking import Tracker

            overrides = [red.text(o) for o in config.hydra.overrides.task]
            Tracker(settings).start_parent(sweep_dir, name=self._name,
                                           params={"overrides": " ".join(overrides)[:5000]})
        except Exception as exc:  # noqa: BLE001 - tracking never stops a sweep
            log.warning("MLflow parent run not started: %s", exc)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            import launchers

            launchers.stop_all()
        finally:
            sweep_dir = Path(config.hydra.sweep.dir)
            self._progress = None
            from sweep.cli import app

            app.note_sweep_dir(sweep_dir)  # the exit status counts its trials (pool workers' too)
            if (sweep_dir / "multirun.yaml").is_file():
                mask_file(sweep_dir / "multirun.yaml", _secrets_of(config))
            if config.get("dry_run"):
                (sweep_dir / "multirun.yaml").unlink(missing_ok=True)
                _drop_dry_run_dirs(sweep_dir)
            else:
                self._report(sweep_dir, config)
                from sweep.trial import rerun

                rerun.finished(sweep_dir)  # the same command again now measures again, in a new dir
            settings = _settings(config)
            self._open_parent = None
            if settings.enabled and not config.get("dry_run"):
                try:
                    from sweep.record.tracking import Tracker
                    from sweep.report.mlflow_artifacts import sweep_artifacts

                    # the report makes the parent run's plots, table and metrics; the record uploads them
                    Tracker(settings).end_parent(sweep_dir, artifacts=sweep_artifacts)
                except Exception as exc:  # noqa: BLE001
                    log.warning("MLflow parent run not closed: %s", exc)
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def _report(self, sweep_dir: Path, config: DictConfig) -> None:
        """The sweep's table on the terminal and its HTML report in the sweep dir."""
        from sweep.record.parent import read_parent_file

        title = read_parent_file(sweep_dir).get("name") or self._name or str(sweep_dir)
        try:
            from sweep.report.sweep_summary import print_sweep

            print_sweep(sweep_dir, str(title))
        except Exception as exc:  # noqa: BLE001
            log.warning("could not print the sweep summary: %s", exc)
        try:
            from sweep.record.result import iter_results
            from sweep.report import html, outputs

            found = sorted(iter_results(sweep_dir), key=lambda p: str(p[0]))
            if found:
                docs = [d for _, d in found]
                path = html.write_report(docs, sweep_dir / html.FILENAME, title=str(title),
                                         sources=[str(p) for p, _ in found])
                drawn = outputs.sweep_plots(docs, sweep_dir)
                outputs.say(outputs.where_lines(path, drawn, self._mlflow_line(sweep_dir, config)))
        except Exception as exc:  # noqa: BLE001 - a report bug never fails the sweep
            log.warning("could not write the HTML report: %s", exc)

    @staticmethod
    def _mlflow_line(sweep_dir: Path, config: DictConfig) -> str | None:
        """Where the sweep's parent run is (None when MLflow is off or was unreachable)."""
        from sweep.record.tracking import sweep_line

        return sweep_line(sweep_dir) if _settings(config).enabled else None
