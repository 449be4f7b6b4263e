"""Structured config of the ``hydra/sweeper=optuna`` plugin (registered in Hydra's ConfigStore).

Hydra instantiates the sweeper from ``hydra.sweeper``; these dataclasses give
every key a type and a default so a typo on the command line is a Hydra error
before any server starts. Importing this module must stay cheap: Hydra imports
it during plugin discovery (``--help``, ``--info``), so Optuna is not imported here.

Layout (``hydra.sweeper.*``)::

    sampler:          group hydra/sweeper/sampler: tpe (default) | gp | random | grid | nsgaii
    direction:        maximize | minimize | [maximize, maximize, ...] (one per objective)
    metrics:          null -> the job's return["objective"]; [m1, m2] -> return["values"][m]
    n_trials:         trials in the WHOLE study (a rerun resumes up to this total)
    n_jobs:           1 (one server per box; others are refused)
    seed:             sampler seed (offset by the number of existing trials on resume)
    study_name:       null -> the Hydra job name
    storage:          null -> sqlite:///<sweep_dir>/optuna.db; any Optuna RDB URL;
                      journal:<path> (or a path ending in .log/.journal) for Optuna's journal file
    params:           the search space, Hydra override syntax (choice, range, interval, tag(log, ...))
    enqueue:          configs tried first (dicts param -> value)
    deterministic_failures: failure reasons that are never run again
    reuse_completed:  a repeated suggestion of a completed config reuses its result
    requeue_interrupted: an interrupted/stale trial's config is queued again
    trial_number_key / study_name_key: overrides passed to each job (``++key=value``)
    heartbeat_interval / stale_after: seconds; RUNNING trials of dead processes become FAIL
    plots:            enabled, contour: [param_x, param_y]
    pool:             several hosts at once (docs/parallel.md): one worker process per entry
                      of the app's ``launcher.hosts`` on the shared study
    quirks:           avoid | workaround | ignore: what the box's declared quirks
                      (hardware.quirks.rules) do to the space (_rules.py)
    prescreen:        top_k: run the K best points of the twin's ranking first (0 = off);
                      calibration: the twin (null: the box's own; a path; none: priors)
    pruner:           group hydra/sweeper/pruner: none (default) | median | percentile |
                      successive_halving | hyperband | wilcoxon (Optuna's, ``_target_``)

No ``from __future__ import annotations`` here, on purpose: Hydra's plugin
scanner executes this module before registering it in ``sys.modules``, and
both ``dataclasses`` and OmegaConf resolve string annotations through
``sys.modules`` -- postponed annotations crash the scan.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

# The reasons a config fails every time it is run: never worth a second server start.
DETERMINISTIC_FAILURES = [
    "cuda_graph", "oom", "bad_flag", "missing_module", "python_headers",
    "config_error", "compose_error",
]


@dataclass
class SamplerConf:
    """One Optuna sampler; ``options`` are passed to its constructor unchanged."""

    name: str = MISSING
    # null: use hydra.sweeper.seed
    seed: Optional[int] = None
    # Random trials before the model is used (tpe, gp); enqueued seeds count as such trials.
    n_startup_trials: Optional[int] = None
    options: Dict[str, Any] = field(default_factory=dict)


@dataclass
class TPESamplerConf(SamplerConf):
    name: str = "tpe"
    # 4: the best median in benchmarks/search_efficiency.py (2..10 tried); more random
    # startup trials mostly buy crashes on b300 (4 of 7 budgets fail there).
    n_startup_trials: Optional[int] = 4
    # Joint model of budget x topk x window: they interact (topk <= budget, tree width).
    options: Dict[str, Any] = field(default_factory=lambda: {"multivariate": True})


@dataclass
class GPSamplerConf(SamplerConf):
    name: str = "gp"
    n_startup_trials: Optional[int] = 4


@dataclass
class RandomSamplerConf(SamplerConf):
    name: str = "random"


@dataclass
class GridSamplerConf(SamplerConf):
    name: str = "grid"


@dataclass
class NSGAIISamplerConf(SamplerConf):
    name: str = "nsgaii"
    # Optuna's default (50) is more trials than a server-restart budget allows.
    options: Dict[str, Any] = field(default_factory=lambda: {"population_size": 8})


# Pruners are instantiated from _target_ + arguments, as Hydra's Optuna sweeper does its
# samplers (_prune.py). n_startup_trials=4: completed trials before any pruning, the
# same count as the samplers' random startup (Optuna's 5 assumes studies of hundreds).
@dataclass
class PrunerConf:
    _target_: str = "optuna.pruners.NopPruner"


@dataclass
class MedianPrunerConf(PrunerConf):
    _target_: str = "optuna.pruners.MedianPruner"
    n_startup_trials: int = 4
    n_warmup_steps: int = 0
    interval_steps: int = 1
    n_min_trials: int = 1


@dataclass
class PercentilePrunerConf(MedianPrunerConf):
    _target_: str = "optuna.pruners.PercentilePruner"
    percentile: float = 25.0


@dataclass
class SuccessiveHalvingPrunerConf(PrunerConf):
    _target_: str = "optuna.pruners.SuccessiveHalvingPruner"
    min_resource: Any = "auto"
    reduction_factor: int = 4
    min_early_stopping_rate: int = 0
    bootstrap_count: int = 0


@dataclass
class HyperbandPrunerConf(PrunerConf):
    _target_: str = "optuna.pruners.HyperbandPruner"
    min_resource: int = 1
    max_resource: Any = "auto"
    reduction_factor: int = 3
    bootstrap_count: int = 0


@dataclass
class WilcoxonPrunerConf(PrunerConf):
    _target_: str = "optuna.pruners.WilcoxonPruner"
    p_threshold: float = 0.1
    n_startup_steps: int = 2


@dataclass
class PrescreenConf:
    """Rank the whole valid space on the calibrated twin first (_prescreen.py)."""

    # Run the K best predicted points first (after hydra.sweeper.enqueue); 0 = no pre-screen.
    top_k: int = 0
    # The twin: null = the box's own calibration (sweep/sim/calibrations/), a calibration
    # file's path, or "none" (uncalibrated priors).
    calibration: Optional[str] = None


@dataclass
class PlotsConf:
    enabled: bool = True
    # Two param names for the contour plot; null -> the first two params of the space.
    contour: Optional[List[str]] = None


@dataclass
class PoolConf:
    """A host pool: one worker process per host, all on one study (see ``_pool``)."""

    # Where the app config lists the hosts (a list of mappings; null/empty: no pool).
    hosts_key: Optional[str] = "launcher.hosts"
    # Entry keys that set another config key; every other key K of an entry (except
    # label and overrides) sets <parent of hosts_key>.K, e.g. launcher.host.
    key_map: Dict[str, str] = field(default_factory=lambda: {"server_port": "server.port"})
    # Overrides given to every worker (the project drops its multirun callback there:
    # the controller owns the sweep's MLflow parent run).
    worker_overrides: List[str] = field(default_factory=list)
    # How to start a worker; null: the way this process was started (python -m sweep ...).
    command: Optional[List[str]] = None
    # A worker that dies (killed) is started again this many times per host.
    max_restarts: int = 1
    # Before a restart, wait up to this long for the dead worker's servers to exit.
    restart_wait_s: float = 30.0
    # Internal: set on a worker's command line to its host's label.
    worker: Optional[str] = None
    # Internal: set on a cluster job's command line (launcher=slurm): JSON
    # {"trial": N, "overrides": [...]} (a string: OmegaConf cannot merge a mapping into a null one).
    job: Optional[str] = None


@dataclass
class SpecsweepOptunaSweeperConf:
    _target_: str = "hydra_plugins.specsweep_optuna_sweeper.optuna_sweeper.SpecsweepOptunaSweeper"
    # _self_ first: the app's search space (group hydra/sweeper/space, option "default",
    # e.g. conf/hydra/sweeper/space/default.yaml with "# @package hydra.sweeper") and the
    # command line override these dataclass defaults. "optional": apps without one still work.
    # "optional pool": the app's pool settings (conf/hydra/sweeper/pool/default.yaml).
    defaults: List[Any] = field(default_factory=lambda: [
        "_self_", {"sampler": "tpe"}, {"pruner": "none"}, {"optional space": "default"},
        {"optional pool": "default"}])

    sampler: SamplerConf = MISSING
    pruner: Any = MISSING
    direction: Any = "maximize"
    metrics: Optional[List[str]] = None
    n_trials: int = 20
    n_jobs: int = 1
    seed: Optional[int] = 0
    study_name: Optional[str] = None
    storage: Optional[str] = None
    params: Optional[Dict[str, Any]] = None
    enqueue: List[Dict[str, Any]] = field(default_factory=list)
    deterministic_failures: List[str] = field(default_factory=lambda: list(DETERMINISTIC_FAILURES))
    reuse_completed: bool = True
    requeue_interrupted: bool = True
    trial_number_key: str = "optuna.trial_number"
    study_name_key: Optional[str] = "optuna.study_name"
    heartbeat_interval: float = 30.0
    stale_after: float = 600.0
    plots: PlotsConf = field(default_factory=PlotsConf)
    pool: PoolConf = field(default_factory=PoolConf)
    quirks: str = "avoid"
    prescreen: PrescreenConf = field(default_factory=PrescreenConf)
    # A per-load study (every metric tok_s_at_c<N>, hydra/sweeper/space=per_load) ends by deriving
    # the family's per-load table (dynamic-<engine>.yaml); this many rounds then verify it
    # (python -m sweep.verify_dynamic); 0: the verify command is printed, not run.
    verify_rounds: int = 0


_cs = ConfigStore.instance()
_cs.store(group="hydra/sweeper", name="optuna", node=SpecsweepOptunaSweeperConf,
          provider="specsweep_optuna_sweeper")
for _name, _node in (("tpe", TPESamplerConf), ("gp", GPSamplerConf), ("random", RandomSamplerConf),
                     ("grid", GridSamplerConf), ("nsgaii", NSGAIISamplerConf)):
    _cs.store(group="hydra/sweeper/sampler", name=_name, node=_node,
              provider="specsweep_optuna_sweeper")
for _name, _pnode in (("none", PrunerConf), ("median", MedianPrunerConf),
                      ("percentile", PercentilePrunerConf),
                      ("successive_halving", SuccessiveHalvingPrunerConf),
                      ("hyperband", HyperbandPrunerConf), ("wilcoxon", WilcoxonPrunerConf)):
    _cs.store(group="hydra/sweeper/pruner", name=_name, node=_pnode,
              provider="specsweep_optuna_sweeper")
