"""Typed settings of the launcher, objective, mlflow and results groups.

Every value comes from the YAML (``conf/launcher/<name>.yaml``,
``conf/config.yaml``); nothing here restates a default. A record written
before a key existed (a result file, an MLflow run) is read against the
shipped ``conf/config.yaml`` (:func:`shipped`), so the YAML stays the one
place a default lives.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping

from sweep.compose.checks import bool_, float_, get, int_, no_control_chars, str_tuple
from sweep.compose.hosts import LAUNCH_MODES, check_hosts
from sweep.errors import ConfigError
from sweep.launch import LauncherSettings, SSHSettings

OBJECTIVE_METRICS = ("tok_s_c1", "tok_s_peak", "cell", "weighted_mean")
HOST_KEY_POLICIES = ("reject", "accept-new")
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


@dataclass(frozen=True, slots=True)
class Objective:
    metric: str  # one of OBJECTIVE_METRICS
    context: int | None
    concurrency: int | None
    weights: Mapping[str, float]
    constraints: Constraints

    @classmethod
    def from_mapping(cls, node: Mapping[str, Any] | None) -> Objective:
        """An ``objective`` block as recorded (keys it lacks: the shipped config's)."""
        return objective({**shipped()["objective"], **dict(node or {})})


def objective(node: Mapping[str, Any]) -> Objective:
    p = "objective"
    metric = str(get(node, p, "metric"))
    if metric not in OBJECTIVE_METRICS:
        raise ConfigError(f"{p}.metric", f"must be one of {', '.join(OBJECTIVE_METRICS)}, got {metric!r}")
    weights = node.get("weights") or {}
    if not isinstance(weights, Mapping):
        raise ConfigError(f"{p}.weights", f"must be a mapping ctx<C>_c<N>: weight, got {weights!r}")
    cons = node.get("constraints") or {}
    if not isinstance(cons, Mapping):
        raise ConfigError(f"{p}.constraints", f"must be a mapping, got {cons!r}")
    c = f"{p}.constraints"
    return Objective(
        metric=metric, context=int_(node, p, "context", lo=1, optional=True),
        concurrency=int_(node, p, "concurrency", lo=1, optional=True),
        weights={str(k): float(float_(weights, f"{p}.weights", str(k)) or 0.0) for k in weights},
        constraints=Constraints(
            coding_pass_rate_min=float_(cons, c, "coding_pass_rate_min", lo=0, optional=True),
            max_errors=float_(cons, c, "max_errors", lo=0, optional=True),
            ttft_ms_p99_max=float_(cons, c, "ttft_ms_p99_max", lo=0, optional=True)))


# --------------------------------------------------------------------------- mlflow, results


@dataclass(frozen=True, slots=True)
class Mlflow:
    enabled: bool
    tracking_uri: str | None  # None: MLflow's own default, pinned to the launch dir
    experiment: str

    @classmethod
    def from_mapping(cls, node: Mapping[str, Any] | None) -> Mlflow:
        """An ``mlflow`` block (keys it lacks: the shipped config's)."""
        return mlflow({**shipped()["mlflow"], **{k: v for k, v in dict(node or {}).items()
                                                 if v is not None or k == "tracking_uri"}})


def mlflow(node: Mapping[str, Any]) -> Mlflow:
    uri = node.get("tracking_uri")
    return Mlflow(enabled=bool_(node, "mlflow", "enabled"),
                  tracking_uri=None if uri in (None, "") else str(uri),
                  experiment=str(get(node, "mlflow", "experiment")))


@dataclass(frozen=True, slots=True)
class Results:
    search_dirs: tuple[str, ...] = field(default_factory=tuple)  # where baselines are looked up
    baseline_auto_run: bool = False  # run the spec=none baseline first when none exists


def results(cfg: Mapping[str, Any]) -> Results:
    return Results(search_dirs=str_tuple((cfg.get("results") or {}).get("search_dirs"),
                                         "results.search_dirs"),
                   baseline_auto_run=bool_(cfg.get("baseline") or {}, "baseline", "auto_run"))


# --------------------------------------------------------------------------- launcher


def launcher_settings(node: Mapping[str, Any]) -> LauncherSettings:
    """``launcher.*`` checked and typed; secrets in it are refused (they would be recorded)."""
    p = "launcher"
    name = str(get(node, p, "name"))
    for secret, env in SECRET_ENV.items():
        if node.get(secret) is not None:
            raise ConfigError(f"{p}.{secret}", "secrets never go in the config: set "
                              f"{env} in the environment instead")
    check_hosts(node, name)
    ssh = _ssh(node) if name == "ssh" else None
    if ssh is not None and not ssh.host and not node.get("hosts"):
        raise ConfigError(f"{p}.host", "is required: a host name, address or ~/.ssh/config "
                          "alias (or a pool: launcher.hosts=[{host: a}, {host: b}])")
    state_dir = node.get("state_dir")
    return LauncherSettings(
        name=name, ready_timeout_s=_seconds(node, "ready_timeout_s"),
        poll_interval_s=_seconds(node, "poll_interval_s"), poll_max_s=_seconds(node, "poll_max_s"),
        stop_grace_s=_seconds(node, "stop_grace_s"), keep_server=bool_(node, p, "keep_server"),
        log_tail_lines=int(int_(node, p, "log_tail_lines", lo=1) or 0),
        state_dir=None if state_dir in (None, "") else str(state_dir), ssh=ssh,
        reap_grace_s=_optional_seconds(node, "reap_grace_s", 3.0, hi=60.0))


def _seconds(node: Mapping[str, Any], key: str) -> float:
    return float(float_(node, "launcher", key, lo=0) or 0.0)


def _optional_seconds(node: Mapping[str, Any], key: str, default: float, *, hi: float) -> float:
    """A bounded duration with a default (the no-orphan bound depends on it)."""
    value = float_(node, "launcher", key, lo=0, optional=True)
    if value is not None and value > hi:
        raise ConfigError(f"launcher.{key}", f"must be <= {hi:g} (seconds), got {value:g}")
    return default if value is None else value


def _ssh(node: Mapping[str, Any]) -> SSHSettings:
    p = "launcher"
    mode = node.get("mode")
    if mode not in LAUNCH_MODES:
        raise ConfigError(f"{p}.mode", f"must be one of {', '.join(LAUNCH_MODES)}, got {mode!r}")
    policy = str(get(node, p, "host_key_policy"))
    if policy not in HOST_KEY_POLICIES:
        raise ConfigError(f"{p}.host_key_policy",
                          f"must be one of {', '.join(HOST_KEY_POLICIES)}, got {policy!r}")
    keys = node.get("key_filename")
    keys = () if keys in (None, "") else str_tuple([keys] if isinstance(keys, str) else keys,
                                                  f"{p}.key_filename")
    for key in ("host", "user", "unit", "workdir", "gateway", "known_hosts", "unit_dir"):
        if node.get(key) is not None:
            no_control_chars(f"{p}.{key}", str(node[key]))
    for i, k in enumerate(keys):
        no_control_chars(f"{p}.key_filename[{i}]", k)
    text = {k: (None if node.get(k) in (None, "") else str(node[k]))
            for k in ("host", "user", "gateway", "known_hosts")}
    return SSHSettings(
        host=text["host"] or "", port=int(int_(node, p, "port", lo=1, hi=65535) or 0),
        user=text["user"], key_filename=tuple(os.path.expanduser(k) for k in keys),
        gateway=text["gateway"], connect_timeout=_seconds(node, "connect_timeout"),
        known_hosts=None if text["known_hosts"] is None else os.path.expanduser(text["known_hosts"]),
        host_key_policy=policy, allow_agent=bool_(node, p, "allow_agent"), mode=str(mode),
        unit=str(get(node, p, "unit")), unit_dir=str(get(node, p, "unit_dir")).rstrip("/"),
        dropin=bool_(node, p, "dropin"), sudo=bool_(node, p, "sudo"),
        workdir=str(get(node, p, "workdir")), port_forward=bool_(node, p, "port_forward"),
        preflight=bool_(node, p, "preflight"),
        min_free_gb=float(float_(node, p, "min_free_gb", lo=0) or 0.0),
        remote_lease_s=_optional_seconds(node, "remote_lease_s", 15.0, hi=3600.0))
