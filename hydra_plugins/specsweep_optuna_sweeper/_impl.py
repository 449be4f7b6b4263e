"""Hydra glue: settings from ``hydra.sweeper``, the study, each job through Hydra's launcher.

Every trial is one Hydra job launched with ``initial_job_idx = trial number``,
so ``<sweep_dir>/<trial number>/`` is that trial's output dir on every rerun
(a resumed study never overwrites an earlier job's dir). Each job gets
``++optuna.trial_number=N`` and ``++optuna.study_name=NAME`` (keys
configurable) so the app can tag its MLflow run; the app's returned
``mlflow_run_id`` is stored in the trial's user attrs.

Three roles, one code path:

* plain: this process asks, runs and tells every trial (one box);
* pool controller (the app's ``launcher.hosts`` is a list, see ``_pool``):
  creates the study, queues the seeds, starts one worker process per host
  and reports at the end; it runs no job itself;
* pool worker (``hydra.sweeper.pool.worker=<host label>``, set by the
  controller): a plain loop on the shared study that never reports;
* cluster controller (the launcher's backend runs trials as jobs, launcher=slurm,
  see ``_jobs``): the plain loop with ``hydra.sweeper.n_jobs`` trials out at
  once, each one job; the job itself (``hydra.sweeper.pool.job=...``, set by the
  controller) runs that one trial's Hydra job and touches no storage.

Every role serializes trial creation through the study lock, so plain
controllers on several machines can share one study too.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import optuna
from hydra.core.plugins import Plugins
from hydra.core.utils import JobStatus
from hydra.errors import HydraException
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from sweep import errors
from sweep.errors import ConfigError

from . import _per_load, _prescreen, _prune, _quiet, _report, _result, _rules, _sampler, _space, _storage
from ._dispatch import Interrupted
from ._loop import SearchLoop
from .config import DETERMINISTIC_FAILURES

log = logging.getLogger(__name__)


def _plain(value: Any) -> Any:
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def _reasons(value: Any) -> list[str]:
    """``hydra.sweeper.deterministic_failures``, each a failure reason a result can carry (a typo
    would never match, and the config it names would be started again every trial)."""
    from sweep.compose.bounds import check_rule
    from sweep.compose.keys import RULES

    return list(check_rule("hydra.sweeper.deterministic_failures", list(value),
                           RULES["resume.deterministic_failures"]))


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


@dataclass
class Settings:
    """``hydra.sweeper.*`` as plain, checked Python values."""

    sampler: dict[str, Any]
    directions: list[str]
    metrics: list[str] | None
    n_trials: int
    n_jobs: int
    seed: int | None
    study_name: str | None
    storage: str | None
    params: dict[str, Any]
    enqueue: list[dict[str, Any]]
    deterministic: list[str]
    reuse_completed: bool
    requeue_interrupted: bool
    trial_number_key: str
    study_name_key: str | None
    heartbeat_interval: float
    stale_after: float
    plots: dict[str, Any]
    pool: dict[str, Any]
    quirks: str = "avoid"
    prescreen: dict[str, Any] | None = None
    pruner: Any = None  # an Optuna pruner (Hydra instantiates hydra.sweeper.pruner) or its config
    verify_rounds: int = 0  # a per-load study's verification rounds at its end (_per_load.py)

    @classmethod
    def from_kwargs(cls, kw: Mapping[str, Any]) -> "Settings":
        from sweep.compose import bounds

        g = {k: _plain(v) for k, v in kw.items()}
        # the key table's rules (sweep/compose/keys.py, hydra.sweeper.*): the same ones
        # `python -m sweep` checked up front, here for any app that uses this sweeper
        directions = list(bounds.check("hydra.sweeper.direction", g.get("direction") or "maximize"))
        bounds.check("hydra.sweeper.n_trials", g.get("n_trials", 20))
        metrics = g.get("metrics")
        if metrics is not None and len(metrics) != len(directions):
            if len(directions) == 1:
                directions = directions * len(metrics)
            else:
                raise ConfigError("hydra.sweeper.metrics", f"has {len(metrics)} entries but "
                                 f"direction has {len(directions)}: give one direction per metric")
        if metrics is None and len(directions) > 1:
            raise ConfigError("hydra.sweeper.metrics", "a multi-objective study needs one metric "
                             "per direction (keys of the job's return['values'])")
        n_jobs = int(g.get("n_jobs") or 1)
        if n_jobs < 1:
            raise ConfigError("hydra.sweeper.n_jobs", f"{n_jobs}; allowed: 1, or more with a "
                              "launcher whose trials run as jobs (launcher=slurm)")
        return cls(
            sampler=dict(g.get("sampler") or {"name": "tpe"}), directions=directions,
            metrics=[str(m) for m in metrics] if metrics else None,
            n_trials=int(g.get("n_trials", 20)), n_jobs=n_jobs, seed=g.get("seed"),
            study_name=g.get("study_name"), storage=g.get("storage"),
            params=dict(g.get("params") or {}),
            enqueue=[_flatten(e) for e in (g.get("enqueue") or [])],
            deterministic=_reasons(g.get("deterministic_failures") or DETERMINISTIC_FAILURES),
            reuse_completed=bool(g.get("reuse_completed", True)),
            requeue_interrupted=bool(g.get("requeue_interrupted", True)),
            trial_number_key=str(g.get("trial_number_key") or "optuna.trial_number"),
            study_name_key=g.get("study_name_key"),
            heartbeat_interval=float(g.get("heartbeat_interval") or 30.0),
            stale_after=float(g.get("stale_after") or 600.0),
            plots=dict(g.get("plots") or {}),
            pool=dict(g.get("pool") or {}),
            quirks=_choice("quirks", g.get("quirks") or "avoid", _rules.QUIRK_MODES),
            prescreen=_prescreen_settings(g.get("prescreen"), metrics),
            pruner=g.get("pruner"),
            verify_rounds=int(bounds.check("hydra.sweeper.verify_rounds", g.get("verify_rounds")) or 0),
        )


def _choice(key: str, value: Any, allowed: tuple[str, ...]) -> str:
    if str(value) not in allowed:
        raise ConfigError(f"hydra.sweeper.{key}", f"{value!r}; allowed: {', '.join(allowed)}")
    return str(value)


def _prescreen_settings(node: Any, metrics: Any) -> dict[str, Any] | None:
    node = dict(node or {})
    top_k = node.get("top_k") or 0
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise ConfigError("hydra.sweeper.prescreen.top_k", f"{top_k!r}; allowed: an integer >= 0 "
                         "(0 = no pre-screen)")
    if not top_k:
        return None
    if metrics:
        raise ConfigError("hydra.sweeper.prescreen", "the twin ranks by the app's objective "
                         "(objective.metric); it cannot rank hydra.sweeper.metrics")
    cal = node.get("calibration")
    if cal not in (None, "", "none"):
        path = Path(str(cal)).expanduser().absolute()
        if not path.is_file():
            raise ConfigError("hydra.sweeper.prescreen.calibration", f"{cal!r} is not a file "
                             "(null: the box's own calibration; none: the priors)")
        cal = str(path)
    return {"top_k": int(top_k), "calibration": cal or None}


def sampler_seed(settings: Settings, existing: int, salt: str | None = None) -> int | None:
    """The sampler seed: offset on resume, and per worker, so no two draws replay each other.

    The grid sampler is the exception: its seed fixes the grid's shuffled order, and
    grid ids are stored in the study, so every run and every worker must share it.
    """
    base = settings.sampler.get("seed")
    base = settings.seed if base is None else base
    if base is None:
        return None
    if str(settings.sampler.get("name") or "tpe").lower() == "grid":
        return int(base)
    seed = int(base) + existing
    if salt:
        seed += int.from_bytes(hashlib.sha256(salt.encode()).digest()[:3], "big")
    return seed


def open_study(settings: Settings, space: _space.SearchSpace, sweep_dir: Path,
               study_name: str, *, lock: Any = None, salt: str | None = None,
               rules: _rules.Rules | None = None,
               objective_name: str | None = None) -> tuple[optuna.Study, str]:
    """Create or load the study, fail stale trials, install the (resume-offset) sampler.

    ``lock``: the study lock (creation and the stale check are serialized with the
    other workers); ``salt``: a worker's label, mixed into its sampler seed;
    ``rules``: the sampler proposes only their valid points.
    """
    wanted = [optuna.study.StudyDirection[d.upper()] for d in settings.directions]
    pruner = _prune.build(settings.pruner, len(wanted)) or optuna.pruners.NopPruner()
    with lock if lock is not None else contextlib.nullcontext():
        # Under the lock: a storage object creates Optuna's tables on a fresh database, and
        # two controllers starting at once would both try (DuplicateTable).
        storage, shown = _storage.open_storage(settings.storage, sweep_dir,
                                               heartbeat_interval=settings.heartbeat_interval,
                                               grace_period=settings.stale_after)
        try:
            study = optuna.create_study(study_name=study_name, storage=storage,
                                        directions=wanted, load_if_exists=True,
                                        sampler=optuna.samplers.RandomSampler(seed=settings.seed),
                                        # None would be Optuna's default, a MedianPruner
                                        pruner=pruner)
        except errors.SweepError:
            raise
        except Exception as exc:  # a store Optuna cannot open: one line naming it, before any trial
            raise errors.StorageError(shown, f"cannot open the study {study_name!r} "
                                      f"({type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]})") from exc
        if study.directions != wanted:
            raise errors.StorageError(shown, f"study {study_name!r} has directions "
                                      f"{[d.name.lower() for d in study.directions]}, not "
                                      f"{settings.directions}: choose another hydra.sweeper.study_name "
                                      "or storage")
        # A worker joins a study whose other workers are busy: their trials are no news.
        _storage.fail_stale_trials(study, settings.stale_after, quiet=salt is not None)
        existing = len(study.get_trials(deepcopy=False))
    # A resumed study must not replay the first run's random draws (each would be a repeat).
    study.sampler = _sampler.build(settings.sampler, seed=sampler_seed(settings, existing, salt),
                                   n_objectives=len(settings.directions), space=space,
                                   deterministic=settings.deterministic, rules=rules)
    names = settings.metrics or ([objective_name] if objective_name else None)
    if names and study.metric_names != names:
        study.set_metric_names(names)  # optuna-dashboard shows them, not "Objective 0"
    return study, shown


def _objective_name(config: DictConfig) -> str | None:
    """What the app's ``objective`` measures (``tok_s_lowc`` ...), for the study's metric name."""
    node = OmegaConf.select(config, "objective")
    if node is None:
        return None
    from sweep.compose.settings import Objective
    from sweep.errors import ConfigError
    from sweep.score.objective import metric_name

    try:
        return metric_name(Objective.from_mapping(OmegaConf.to_container(node, resolve=True)))  # type: ignore[arg-type]
    except (ConfigError, OmegaConfBaseException):
        return None


class OptunaSweeperImpl:
    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.settings = Settings.from_kwargs(settings)
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.launcher: Any = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction,
              config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            config=config, hydra_context=hydra_context, task_function=task_function)

    # -- one job ----------------------------------------------------------------------------
    def _execute(self, number: int, overrides: list[str]) -> _result.Outcome:
        try:
            returns = self.launcher.launch([overrides], initial_job_idx=number)
        except KeyboardInterrupt:
            ended = self._ended(number)
            if ended is None:
                raise
            raise Interrupted(number, ended) from None  # its result stands: told, not run again
        except (HydraException, OmegaConfBaseException) as exc:
            log.error("trial %d: the job's config does not compose: %s", number, exc)
            return _result.failed("compose_error", str(exc))
        except Exception as exc:
            log.exception("trial %d: launching the job failed", number)
            return _result.from_exception(exc)
        ret = returns[0]
        if ret.status == JobStatus.COMPLETED:
            outcome = _result.from_return(ret.return_value, self.settings.metrics,
                                          len(self.settings.directions))
        else:
            raised = ret._return_value
            log.error("trial %d: the job raised %s: %s", number, type(raised).__name__, raised,
                      exc_info=raised if isinstance(raised, BaseException) else None)
            outcome = _result.from_exception(raised)
        job_dir = OmegaConf.select(ret.hydra_cfg, "hydra.runtime.output_dir") \
            if ret.hydra_cfg is not None else None
        if job_dir or ret.working_dir:
            outcome.user_attrs.setdefault("job_dir", str(job_dir or ret.working_dir))
        return outcome

    def _ended(self, number: int) -> _result.Outcome | None:
        """The outcome trial ``number``'s result.json holds when it ended (ok, failed, pruned), else None.

        Ctrl-C may come after the trial's result is final, while it draws its plots or
        writes its MLflow run: that trial is measured, and a resumed study must not run it
        again."""
        from ._jobs import outcome_from_result

        assert self.config is not None
        job_dir = Path(str(self.config.hydra.sweep.dir)).absolute() / str(number)
        try:
            outcome, doc = outcome_from_result(job_dir, self.settings.metrics, len(self.settings.directions))
        except Exception:  # noqa: BLE001 - no result to keep: the trial is interrupted
            return None
        mine = doc is not None and f"++{self.settings.trial_number_key}={number}" in (doc.trial.overrides or [])
        if outcome is None or outcome.interrupted or not mine:
            return None
        outcome.user_attrs.setdefault("job_dir", str(job_dir))
        return outcome

    def _extra(self, number: int, study_name: str, params: Mapping[str, Any] | None = None,
               prescreen: _prescreen.Prescreen | None = None) -> list[str]:
        s = self.settings
        out = [f"++{s.trial_number_key}={number}"]
        if s.study_name_key:
            quoted = study_name.replace("\\", "\\\\").replace("'", "\\'")
            out.append(f"++{s.study_name_key}='{quoted}'")
        if prescreen is not None and params:
            out.extend(prescreen.overrides(params))
        return out

    def _check_composes(self, space: _space.SearchSpace) -> None:
        """Compose one job up front: a typo in a param key fails now, not after a restart."""
        assert self.config is not None and self.hydra_context is not None
        first = {}
        for name, dist in space.distributions.items():
            values = _space.discrete_values(dist)
            first[name] = values[0] if values else getattr(dist, "low", None)
        lines = space.overrides(first) + self._extra(0, "check")
        try:
            self.hydra_context.config_loader.load_sweep_config(
                master_config=self.config, sweep_overrides=lines)
        except (HydraException, OmegaConfBaseException) as exc:
            raise ConfigError("hydra.sweeper.params", f"a job with {' '.join(lines)} does not "
                             f"compose: {str(exc).splitlines()[0]}") from None

    # -- the sweep --------------------------------------------------------------------------
    def sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None
        s = self.settings
        if s.pool.get("job"):  # one trial's job of a cluster controller (launcher=slurm)
            return self._one_job(s.pool["job"])
        space = _space.parse(s.params, arguments)
        if not space.distributions:
            raise ConfigError("hydra.sweeper.params", "nothing to search: set it or give sweep overrides "
                             "such as spec.budget=choice(4,8,16)")
        _refuse_bad_values(space)  # before the study starts
        self._check_composes(space)
        rules = self._declared_rules(space)
        if rules.valid_points() == []:  # a discrete space none of whose points exists or runs
            raise ConfigError("hydra.sweeper.params", "no point of the search space can run "
                              f"({rules.summary()}): widen the space or change the rules "
                              "(spec.constraints, hydra.sweeper.quirks)")
        sweep_dir = Path(str(self.config.hydra.sweep.dir)).absolute()
        sweep_dir.mkdir(parents=True, exist_ok=True)
        with _quiet.library_warnings_logged(sweep_dir):  # Optuna's notes to its users: the log
            return self._search(space, rules, sweep_dir, arguments)

    def _search(self, space: _space.SearchSpace, rules: _rules.Rules, sweep_dir: Path,
                arguments: list[str]) -> Any:
        """The study on ``sweep_dir``: this process's role in it, then the report (``arguments``: the
        command line's overrides, what a per-load study's verification runs with too)."""
        assert self.config is not None
        s = self.settings
        name = s.study_name or str(self.config.hydra.job.name)
        worker = s.pool.get("worker")
        if worker:
            return self._work(space, sweep_dir, name, str(worker), rules)
        from . import _pool

        runner = self._jobs_runner(sweep_dir, name)  # before the study: bad input submits nothing
        hosts = _pool.hosts_of(self.config, s.pool)
        if hosts and s.storage is None:
            s.storage = _pool.default_storage(sweep_dir)
        if hosts and s.storage in ("memory", ":memory:"):
            raise ConfigError("hydra.sweeper.storage", "memory: a host pool needs a storage every "
                             "worker process shares (null: a journal file in the sweep dir)")
        lock = _storage.study_lock(s.storage, sweep_dir, name)
        study, shown = open_study(s, space, sweep_dir, name, lock=lock, rules=rules,
                                  objective_name=_objective_name(self.config))
        log.info("study %r in %s: sampler %s, directions %s, n_trials %d (whole study), space %s; %s",
                 name, shown, s.sampler.get("name"), s.directions, s.n_trials,
                 ", ".join(f"{k} {_space.describe(d)}" for k, d in space.distributions.items()),
                 rules.summary())
        loop = self._loop(study, space, name, lock, rules=rules)
        with lock:
            loop.requeue()
            loop.enqueue(s.enqueue)
            if s.prescreen:
                pre = _prescreen.prescreen(study, loop, rules, top_k=s.prescreen["top_k"],
                                           calibration=s.prescreen["calibration"],
                                           direction=s.directions[0], sweep_dir=sweep_dir)
                _prescreen.log_to_mlflow(self.config, sweep_dir, pre, len(rules.points() or []))
        interrupted: Interrupted | None = None
        pool_run: Any = None
        try:
            if hosts:
                pool_run = _pool.Pool(self.config, s, hosts, sweep_dir=sweep_dir, study=study,
                                      study_name=name, loop=loop, lock=lock)
                pool_run.run()
            else:
                loop.run(runner)
        except Interrupted as exc:
            interrupted = exc
        best = _report.report(
            study, space, sweep_dir, storage_shown=shown,
            metric_names=s.metrics or [_objective_name(self.config) or "objective"],
            groups=dict(self.config.hydra.runtime.choices or {}),
            config_name=str(self.config.hydra.job.config_name or "config"),
            contour=s.plots.get("contour"), make_plots=bool(s.plots.get("enabled", True)),
            executed=pool_run.executed() if pool_run is not None else loop.executed,
            spread=_spread(self.config))
        if interrupted is None and _per_load.is_per_load(s.metrics):
            _per_load.finish(sweep_dir, s.verify_rounds, str(OmegaConf.select(self.config, "server.name") or ""),
                             arguments)
        resume = "the same command"
        if s.storage is None or (hosts and s.storage == _pool.default_storage(sweep_dir)):
            resume += f" hydra.sweep.dir={sweep_dir}"
        if interrupted is not None:
            raise errors.Interrupted(f"resume with {resume} (n_trials counts the whole study)")
        if pool_run is not None and pool_run.failed_all():
            raise errors.Failed("no worker of the pool could run: see the worker logs above")
        print(f"to extend: {resume} hydra.sweeper.n_trials=<more than {s.n_trials}>")
        return best

    # -- trials as jobs elsewhere (launcher=slurm) --------------------------------------------
    def _one_job(self, job: Any) -> None:
        """Inside a cluster job: run the one Hydra job the controller asked for (its trial
        number and override lines), exactly as the controller's own process would."""
        import json

        job = json.loads(str(job))
        number, overrides = int(job["trial"]), [str(o) for o in job["overrides"]]
        if job.get("port_key"):  # a port free on this node: jobs may share it (launcher.free_port)
            import socket

            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                overrides.append(f"{job['port_key']}={sock.getsockname()[1]}")
        try:
            outcome = self._execute(number, overrides)
        except (KeyboardInterrupt, Interrupted):
            raise errors.Interrupted(f"trial {number} (its result.json says so)") from None
        print(f"trial {number}: {outcome.state.name} {outcome.failure_reason or ''}".rstrip())

    def _jobs_runner(self, sweep_dir: Path, name: str) -> Any:
        """The runner of a launcher whose trials run as jobs elsewhere (``_jobs``), or None."""
        from ._jobs import jobs_runner

        assert self.config is not None
        return jobs_runner(self.config, self.settings, sweep_dir, name,
                           probe_overrides=self._extra(0, name))

    def _declared_rules(self, space: _space.SearchSpace) -> _rules.Rules:
        """The declared rules over this space, each point composed the way its job is."""
        assert self.config is not None and self.hydra_context is not None
        loader, master = self.hydra_context.config_loader, self.config

        def compose(lines: list[str]) -> DictConfig:
            return loader.load_sweep_config(master_config=master, sweep_overrides=lines)

        source = _rules.ConfigSource(compose, space, (self.config.hydra.runtime.choices or {}).keys())
        return _rules.Rules(source, self.settings.quirks)

    def _loop(self, study: optuna.Study, space: _space.SearchSpace, name: str, lock: Any,
              label: str | None = None, rules: _rules.Rules | None = None) -> SearchLoop:
        s = self.settings
        pre: dict[str, Any] = {}

        def extra(number: int, params: Mapping[str, Any]) -> list[str]:
            if "loaded" not in pre:  # the controller stored it before any job (pool: workers read it)
                pre["loaded"] = _prescreen.Prescreen.load(study) if s.prescreen else None
            return self._extra(number, name, params, pre["loaded"])

        pruner = study.pruner if not isinstance(study.pruner, optuna.pruners.NopPruner) else None
        return SearchLoop(study, space, self._execute, n_trials=s.n_trials,
                          deterministic=s.deterministic, reuse_completed=s.reuse_completed,
                          requeue_interrupted=s.requeue_interrupted, extra_overrides=extra,
                          heartbeat_interval=s.heartbeat_interval, lock=lock,
                          stale_after=s.stale_after, label=label, rules=rules,
                          around_job=(lambda t: _prune.reporting(t, pruner)) if pruner else None,
                          identify=_identify(rules) if rules is not None else None)

    def _work(self, space: _space.SearchSpace, sweep_dir: Path, name: str, label: str,
              rules: _rules.Rules) -> None:
        """One worker of a pool: the loop on the shared study; the controller reports."""
        s = self.settings
        lock = _storage.study_lock(s.storage, sweep_dir, name)
        study, shown = open_study(s, space, sweep_dir, name, lock=lock, salt=label, rules=rules)
        log.info("worker %s on study %r in %s", label, name, shown)
        loop = self._loop(study, space, name, lock, label=label, rules=rules)
        try:
            loop.run()
        except Interrupted:
            raise errors.Interrupted(f"worker {label}, after {loop.executed} job(s)") from None
        finally:
            lock.close()
        print(f"worker {label}: done, {loop.executed} job(s) run")
        return None


def _spread(config: Any) -> float | None:
    """The box's run-to-run spread for the verdict on configs measured once (sweep/score/noise.py).

    The keys it needs are selected one by one: resolving the whole config here failed on Hydra's
    own interpolations, so a search said "noise unknown" above a table judged with the box's spread."""
    from sweep.record.result import TrialResult
    from sweep.score.noise import spread_of

    def value(key: str) -> Any:
        try:
            return OmegaConf.select(config, key, default=None, throw_on_missing=False)
        except Exception:  # noqa: BLE001 - an unresolvable key: that part of the spread is unknown
            return None

    noise, spread = value("server.sim.noise"), value("hardware.spread")
    return spread_of(TrialResult(simulated=bool(value("server.simulated")),
                                 config={"server": {"sim": {"noise": noise}}, "hardware": {"spread": spread}}))


def _identify(rules: _rules.Rules) -> Any:
    """params -> the config id their trial will record (the composed view of the point, rendered)."""
    from sweep.score.configs import config_id_of

    return lambda params: config_id_of(rules.source.view(params))


# -- harden2 (issue 11, section 5): every value of the space through the config's own rules --------


def _refuse_bad_values(space: _space.SearchSpace) -> None:
    """Each value the space can give (every choice, both ends of a range), checked by its key's
    rule in ``sweep/compose/bounds.py``: a ConfigError (one line and exit status 2 at the boundary)
    before the study starts, never a failed trial. (``python -m sweep`` checks the same before Hydra runs.)"""
    from sweep.compose.search_space import check_values

    values: dict[str, list[Any]] = {}
    for name, dist in space.distributions.items():
        found = _space.discrete_values(dist)
        if found is None or len(found) > 10_000:  # continuous or long: its ends
            found = [getattr(dist, "low", None), getattr(dist, "high", None)]
        values[name] = [_space.decode(name, v) for v in found if v is not None]
    check_values(values)
