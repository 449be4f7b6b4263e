"""Typed settings of the launcher, objective, mlflow and results groups.

Every value comes from the YAML (``conf/launcher/<name>.yaml``,
``conf/config.yaml``); nothing here restates a default. A record written
before a key existed (a result file, an MLflow run) is read against the
shipped ``conf/config.yaml`` (:func:`shipped`), so the YAML stays the one
place a default lives.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping

from sweep.compose.bounds import check
from sweep.compose.keys import OBJECTIVE_METRICS, STUDY_METRICS
from sweep.compose.bounds import get as _v  # a key's value, typed and bounded by its rule
from sweep.compose.hosts import check_hosts
from sweep.errors import ConfigError
from sweep.launch import BACKENDS, LauncherSettings, SlurmSettings, SSHSettings, slurm_seconds
from sweep.stats.slo import LIMITS, Slo

# Old metric names a config (objective.metric, hydra.sweeper.metrics) may still use, and
# what they stand for: tok_s_c1 was the lowest measured concurrency's tok/s, c=1 or not.
METRIC_ALIASES = {"tok_s_c1": "tok_s_lowc"}
__all__ = ["METRIC_ALIASES", "OBJECTIVE_METRICS", "Mlflow", "Objective", "Results", "launcher_settings",
           "mlflow", "objective", "results", "shipped"]
SECRET_ENV = {"password": "SPECSWEEP_SSH_PASSWORD", "passphrase": "SPECSWEEP_SSH_PASSPHRASE",
              "connect_kwargs": "SPECSWEEP_SSH_PASSWORD"}


@lru_cache(maxsize=1)
def shipped() -> dict[str, Any]:
    """The shipped ``conf/config.yaml`` (its plain keys: objective, mlflow, results)."""
    from importlib import resources

    import yaml

    return dict(yaml.safe_load((resources.files("sweep.conf") / "config.yaml").read_text()))


# --------------------------------------------------------------------------- objective


@dataclass(frozen=True, slots=True)
class Constraints:
    """Optuna's convention downstream: each one is feasible at <= 0 (sweep.score.objective)."""

    coding_pass_rate_min: float | None
    max_errors: float | None
    ttft_ms_p99_max: float | None
    # greedy answers identical to the autoregressive baseline's (sweep/score/identity.py)
    greedy_identical_min: float | None = None


@dataclass(frozen=True, slots=True)
class Objective:
    metric: str  # one of OBJECTIVE_METRICS, as the config says it
    context: int | None
    concurrency: int | None
    weights: Mapping[str, float]
    constraints: Constraints
    # objective.slo: latency limits the cells are judged against (sweep/stats/slo.py); no limit by default
    slo: Slo = field(default_factory=Slo)
    # objective.metrics: the values of a multi-objective study (the sweeper's metrics), null: one
    metrics: tuple[str, ...] | None = None

    @property
    def measure(self) -> str:
        """The metric, old names (``tok_s_c1``) resolved (METRIC_ALIASES)."""
        return METRIC_ALIASES.get(self.metric, self.metric)

    @classmethod
    def from_mapping(cls, node: Mapping[str, Any] | None) -> Objective:
        """An ``objective`` block as recorded (keys it lacks: the shipped config's)."""
        return objective({**shipped()["objective"], **dict(node or {})})


def objective(node: Mapping[str, Any]) -> Objective:
    p = "objective"
    weights = _v(node, p, "weights", {})
    cons = _v(node, p, "constraints", {})
    c = f"{p}.constraints"
    metric = _v(node, p, "metric")
    slo = _slo(node)
    if metric in ("goodput", "max_load") and not slo.active:
        raise ConfigError(f"{p}.slo", f"objective.metric={metric} is judged under a latency SLO: set at least "
                          f"one of {', '.join(f'{p}.slo.{k}' for k in LIMITS)} (e.g. {p}.slo.tpot_ms=50)")
    return Objective(
        metric=metric, context=_v(node, p, "context"),
        concurrency=_v(node, p, "concurrency"),
        weights={str(k): float(check(f"{p}.weights.{k}", v) or 0.0) for k, v in weights.items()},
        constraints=Constraints(
            coding_pass_rate_min=_v(cons, c, "coding_pass_rate_min"),
            max_errors=_v(cons, c, "max_errors"),
            ttft_ms_p99_max=_v(cons, c, "ttft_ms_p99_max"),
            greedy_identical_min=_v(cons, c, "greedy_identical_min")),
        slo=slo, metrics=_metrics(node))


def _slo(node: Mapping[str, Any]) -> Slo:
    slo = _v(node, "objective", "slo", {}) or {}
    p = "objective.slo"
    for key in slo:
        if key not in (*LIMITS, "percentile"):
            raise ConfigError(f"{p}.{key}", f"is not an SLO setting; allowed: {', '.join((*LIMITS, 'percentile'))}")
    values = {k: float(v) for k in LIMITS if (v := _v(slo, p, k)) is not None}
    pct = _v(slo, p, "percentile")
    return Slo(**values, **({"percentile": float(pct)} if pct is not None else {}))


def _metrics(node: Mapping[str, Any]) -> tuple[str, ...] | None:
    names = _v(node, "objective", "metrics")
    if not names:
        return None
    for name in names:
        if name not in STUDY_METRICS and not re.match(r"^tok_s_at_c[1-9]\d*$", str(name)):
            raise ConfigError("objective.metrics", f"must name the trial's metrics ({', '.join(STUDY_METRICS)}, "
                              f"or tok_s_at_c<N>: tok/s at concurrency N), got {name!r}")
    if len(names) < 2:
        raise ConfigError("objective.metrics", f"lists the values of a multi-objective study: two or more, "
                          f"got {list(names)} (one metric: objective.metric)")
    return tuple(names)


# --------------------------------------------------------------------------- mlflow, results


@dataclass(frozen=True, slots=True)
class Mlflow:
    enabled: bool
    tracking_uri: str | None  # None: MLflow's own default, pinned to the launch dir
    experiment: str
    # a tracking server that does not answer within this is off for the rest of the sweep
    timeout_s: float = 5.0

    @classmethod
    def from_mapping(cls, node: Mapping[str, Any] | None) -> Mlflow:
        """An ``mlflow`` block (keys it lacks: the shipped config's)."""
        return mlflow({**shipped()["mlflow"], **{k: v for k, v in dict(node or {}).items()
                                                 if v is not None or k == "tracking_uri"}})


def mlflow(node: Mapping[str, Any]) -> Mlflow:
    p = "mlflow"
    return Mlflow(enabled=_v(node, p, "enabled"), tracking_uri=_v(node, p, "tracking_uri"),
                  experiment=_v(node, p, "experiment"), timeout_s=_v(node, p, "timeout_s", 5.0))


@dataclass(frozen=True, slots=True)
class Results:
    search_dirs: tuple[str, ...] = field(default_factory=tuple)  # where baselines are looked up
    # run the spec=none baseline first when none exists: true, false, or "auto" (real engines,
    # unless the grid has a spec=none job of its own; sweep/trial/autobaseline.py)
    baseline_auto_run: bool | str = "auto"
    # A rerun grid (same hydra.sweep.dir): failed jobs run again too (interrupted ones always do)
    rerun_failed: bool = False
    # ... except, without rerun_failed, those that failed for these reasons (they would again)
    deterministic_failures: tuple[str, ...] = ()


def results(cfg: Mapping[str, Any]) -> Results:
    resume = cfg.get("resume") or {}
    return Results(search_dirs=_v(cfg.get("results") or {}, "results", "search_dirs", ()),
                   baseline_auto_run=_v(cfg.get("baseline") or {}, "baseline", "auto_run", "auto"),
                   rerun_failed=_v(resume, "resume", "rerun_failed", False),
                   deterministic_failures=_v(resume, "resume", "deterministic_failures", ()))


# --------------------------------------------------------------------------- launcher


def launcher_settings(node: Mapping[str, Any]) -> LauncherSettings:
    """``launcher.*`` checked and typed; secrets in it are refused (they would be recorded)."""
    p = "launcher"
    name = _v(node, p, "name")
    for secret, env in SECRET_ENV.items():
        if node.get(secret) is not None:
            raise ConfigError(f"{p}.{secret}", "secrets never go in the config: set "
                              f"{env} in the environment instead")
    entry = BACKENDS[name]
    if node.get("hosts") and not entry.pool:
        raise ConfigError(f"{p}.hosts", f"not with launcher={name}: the scheduler places each "
                          "trial's job; hydra.sweeper.n_jobs sets how many run at a time")
    check_hosts(node, name)
    own = _BUILDERS[entry.settings](node) if entry.settings else None
    ssh = own if isinstance(own, SSHSettings) else None
    if ssh is not None and not ssh.host and not node.get("hosts"):
        raise ConfigError(f"{p}.host", "is required: a host name, address or ~/.ssh/config "
                          "alias (or a pool: launcher.hosts=[{host: a}, {host: b}])")
    return LauncherSettings(
        name=name, ready_timeout_s=_v(node, p, "ready_timeout_s"),
        poll_interval_s=_v(node, p, "poll_interval_s"), poll_max_s=_v(node, p, "poll_max_s"),
        stop_grace_s=_v(node, p, "stop_grace_s"), keep_server=_v(node, p, "keep_server"),
        log_tail_lines=_v(node, p, "log_tail_lines"), state_dir=_v(node, p, "state_dir"), ssh=ssh,
        slurm=own if isinstance(own, SlurmSettings) else None,
        reap_grace_s=_v(node, p, "reap_grace_s", 3.0))


SBATCH_KEYS = ("partition", "account", "qos", "reservation", "time", "gres", "gpus_per_node",
               "exclusive", "cpus_per_task", "mem", "constraint")


def _slurm(node: Mapping[str, Any]) -> SlurmSettings:
    """``launcher=slurm``: every sbatch option by its rule, unknown ones refused (a typo such as
    ``partiton`` would otherwise submit to the default partition)."""
    p = "launcher"
    sbatch = node.get("sbatch") or {}
    if not isinstance(sbatch, Mapping):
        raise ConfigError(f"{p}.sbatch", f"must be a mapping of sbatch options, got {sbatch!r}")
    for k in sbatch:
        if k not in SBATCH_KEYS:
            raise ConfigError(f"{p}.sbatch.{k}", "is not a supported sbatch option; allowed: "
                              f"{', '.join(SBATCH_KEYS)} (others: launcher.sbatch_extra)")
    options = {k: _v(sbatch, f"{p}.sbatch", k) for k in SBATCH_KEYS}
    signal_s = _required(node, "signal_s")
    limit = slurm_seconds(str(options["time"])) if options["time"] is not None else None
    if limit is not None and signal_s >= limit:
        raise ConfigError(f"{p}.signal_s", f"must be shorter than the time limit "
                          f"(launcher.sbatch.time={options['time']}, {limit} s), got {signal_s}")
    command = _v(node, p, "command")
    _no_secret_in_script(_v(node, p, "setup", ()), "setup")
    _no_secret_in_script(command or (), "command")
    return SlurmSettings(
        sbatch={k: v for k, v in options.items() if v is not None and v is not False},
        extra=_v(node, p, "sbatch_extra", ()), setup=_v(node, p, "setup", ()),
        command=tuple(command) if command else None, signal_s=signal_s,
        poll_s=_required(node, "poll_s"), max_requeue=_required(node, "max_requeue"),
        job_name=_required(node, "job_name"), free_port=_v(node, p, "free_port", True))


def _no_secret_in_script(lines: Any, key: str) -> None:
    """``launcher.setup`` and ``launcher.command`` are written verbatim into every job's script (a
    file beside the trial, and SLURM keeps a copy): a secret in them is refused, as it is on the
    command line, whether it came from the command line, a config file or the environment."""
    from sweep import secrets

    for i, line in enumerate(lines or ()):
        if secrets.found_in([str(line)]):
            raise ConfigError(f"launcher.{key}[{i}]", "holds a secret, and launcher=slurm writes this line into "
                              "each job's script (SLURM keeps a copy): pass it through the environment instead "
                              "(export it before starting the controller: the jobs get the controller's "
                              "environment)")


def _ssh(node: Mapping[str, Any]) -> SSHSettings:
    p = "launcher"
    mode, policy = check(f"{p}.mode", node.get("mode")), check(f"{p}.host_key_policy", node.get("host_key_policy"))
    keys = _v(node, p, "key_filename", ())
    known = _v(node, p, "known_hosts")
    return SSHSettings(
        host=_v(node, p, "host", ""), port=_required(node, "port"),
        user=_v(node, p, "user"), key_filename=tuple(os.path.expanduser(k) for k in keys),
        gateway=_v(node, p, "gateway"), connect_timeout=_required(node, "connect_timeout"),
        known_hosts=None if known is None else os.path.expanduser(known),
        host_key_policy=policy, allow_agent=_v(node, p, "allow_agent", False), mode=mode,
        unit=_required(node, "unit"), unit_dir=_required(node, "unit_dir").rstrip("/") or "/",
        dropin=_v(node, p, "dropin", False), sudo=_v(node, p, "sudo", False),
        workdir=_required(node, "workdir"), port_forward=_v(node, p, "port_forward", False),
        preflight=_v(node, p, "preflight", False), min_free_gb=_required(node, "min_free_gb"),
        remote_lease_s=_v(node, p, "remote_lease_s", 15.0))


def _required(node: Mapping[str, Any], key: str) -> Any:
    """A launcher=ssh key that must be set (its rule applies)."""
    value = _v(node, "launcher", key)
    if value is None:
        raise ConfigError(f"launcher.{key}", "is missing")
    return value


# LauncherSettings field (sweep.launch.Backend.settings) -> the builder of that backend's settings
_BUILDERS: dict[str, Any] = {"ssh": _ssh, "slurm": _slurm}
