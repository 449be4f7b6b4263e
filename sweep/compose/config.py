"""Typed trial configuration, built from the composed Hydra config.

Hydra composes YAML; this module turns the result into frozen dataclasses
and checks every value a server or the benchmark depends on. Each problem
raises :class:`~sweep.errors.ConfigError` naming the full key and the
allowed values, so the user sees one line and nothing has started.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from sweep.compose.checks import (  # value checks, one ConfigError each
    bool_ as _bool,
    float_ as _float,
    get as _get,
    int_ as _int,
    int_list as _int_list,
    no_control_chars as _no_control_chars,
    str_tuple as _str_tuple,
)
from sweep.compose import bench_checks as _bench_checks
from sweep.compose.acceptance_checks import checked_declaration
from sweep.compose.constraints import check_spec_constraints, quirk_rules
from sweep.compose.hosts import PoolHost, pool_hosts
from sweep.compose.settings import Mlflow, Objective, Results, launcher_settings, mlflow, objective, results
from sweep.compose.synthetic import check_synthetic
from sweep.errors import ConfigError
from sweep.launch import LauncherSettings

CODING_EVALS = ("five", "humaneval", "off")
# Figures of hardware.perf the simulator's performance model cannot do without.
SIM_PERF_KEYS = ("mem_bw_tbs", "link_bw_gbs", "link_latency_us")
SANDBOX_MECHANISMS = ("auto", "bwrap", "fallback")   # workload.sandbox.mechanism, docs/sandbox.md


@dataclass(frozen=True, slots=True)
class Hardware:
    name: str
    gpu: str
    num_gpus: int
    arch: str
    memory_gb: float
    interconnect: str
    tp: int
    ep: int
    dp: int
    perf: Mapping[str, Any]
    quirks: Mapping[str, Any]
    cost_per_hour: float | None = None


@dataclass(frozen=True, slots=True)
class Spec:
    algorithm: str
    budget: int | None
    topk: int | None
    window: int | None
    block: int | None
    num_steps: int | None
    draft_family: str | None
    render: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Model:
    name: str
    path: str | None
    served_name: str
    context_length: int
    trust_remote_code: bool
    draft_paths: Mapping[str, str | None]
    arch: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Server:
    name: str
    flavor: str
    simulated: bool
    executable: tuple[str, ...]
    host: str
    port: int
    disable_cuda_graph: bool
    skip_server_warmup: bool
    enable_metrics: bool
    health_path: str
    api_key: str | None
    extra_args: tuple[str, ...]
    extra_env: Mapping[str, str]
    secret_flags: tuple[str, ...]
    args: Mapping[str, Any]
    env: Mapping[str, Any]
    sim_args: Mapping[str, Any] = field(default_factory=dict)
    request_extras: Mapping[str, Any] = field(default_factory=dict)
    endpoint: str = "completions"                  # matrix endpoint: completions | chat
    tokenize: Mapping[str, Any] | None = None      # the server's tokenize route (None: probe usage)
    continuous_usage: bool = False                 # running usage per chunk (tokens per chunk)
    # where the server reports speculative acceptance (sweep/bench/acceptance.py)
    acceptance: Mapping[str, Any] = field(default_factory=dict)
    # server info endpoints the launcher records (SGLang: /get_server_info, llama.cpp: /props)
    info_paths: tuple[str, ...] = ("/get_server_info", "/server_info")
    # how `python -m sweep.engines` installs the server (None: installed by the user)
    install: Mapping[str, Any] | None = None

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    contexts: tuple[int, ...]
    concurrency: tuple[int, ...]
    max_tokens: int
    requests_per_cell: int | None
    min_requests: int
    warmup_requests: int
    request_rate: float | None
    temperature: float
    ignore_eos: bool
    flush_cache: bool
    request_timeout_s: float
    coding: str
    coding_max_tokens: int
    humaneval_limit: int
    sandbox_timeout_s: float
    sandbox_memory_mb: int
    sandbox_mechanism: str = "auto"          # auto | bwrap | fallback (docs/sandbox.md)
    prompt_source: str = "text"       # text | random_ids | dataset
    dataset_path: str | None = None   # JSONL of prompts for prompt_source=dataset
    seed: int = 0                     # prompts (and Poisson arrivals) are deterministic per seed
    repeats: int = 1                         # each cell measured this many times (mean + 95% CI)

    def requests_for(self, concurrency: int) -> int:
        if self.requests_per_cell is not None:
            return self.requests_per_cell
        return max(2 * concurrency, self.min_requests)


@dataclass(frozen=True, slots=True)
class TrialConfig:
    hardware: Hardware
    spec: Spec
    model: Model
    server: Server
    launcher: LauncherSettings
    workload: Workload
    dry_run: bool
    raw: Mapping[str, Any]  # the resolved composed config, for records
    objective: Objective
    mlflow: Mlflow
    results: Results
    pool: tuple[PoolHost, ...] = ()  # launcher.hosts, one entry per box (docs/parallel.md)
    secret_names: tuple[str, ...] = ()  # name patterns besides sweep.secrets.NAME_PATTERNS

    @property
    def simulated(self) -> bool:
        return self.server.simulated


# --------------------------------------------------------------------------- builders


def _hardware(node: Mapping[str, Any]) -> Hardware:
    p = "hardware"
    num = _int(node, p, "num_gpus", lo=0)  # 0: a CPU box (llama.cpp)
    assert num is not None
    tp = _int(node, p, "tp", lo=1, hi=max(num, 1), what="GPUs in the box")
    ep = _int(node, p, "ep", lo=1, hi=max(num, 1), what="GPUs in the box")
    dp = _int(node, p, "dp", lo=1, hi=max(num, 1), what="GPUs in the box")
    assert num is not None and tp is not None and ep is not None and dp is not None
    if tp % ep != 0:
        raise ConfigError(f"{p}.ep", f"must divide hardware.tp={tp} (allowed: "
                          f"{', '.join(str(d) for d in range(1, tp + 1) if tp % d == 0)}), got {ep}")
    perf = node.get("perf") or {}
    for key in SIM_PERF_KEYS:  # required by server=sim only (_check_server_needs)
        _float(perf, f"{p}.perf", key, lo=0, optional=True)
    cost = _float(node, p, "cost_per_hour", lo=0, optional=True)
    return Hardware(
        name=str(_get(node, p, "name")), gpu=str(node.get("gpu", "")), num_gpus=num,
        arch=str(_get(node, p, "arch")), memory_gb=float(_get(node, p, "memory_gb")),
        interconnect=str(node.get("interconnect", "")), tp=tp, ep=ep, dp=dp,
        perf=dict(perf), quirks=dict(node.get("quirks") or {}), cost_per_hour=cost,
    )


def _spec(node: Mapping[str, Any]) -> Spec:
    p = "spec"
    algorithm = str(_get(node, p, "algorithm"))
    budget = _int(node, p, "budget", lo=1, optional=True)
    topk = _int(node, p, "topk", lo=1, optional=True)
    block = _int(node, p, "block", lo=1, optional=True)
    window = _int(node, p, "window", lo=1, optional=True)
    # Rules between knobs (topk <= budget, ...) are the spec's declared `constraints`,
    # checked by build() once every value is typed (sweep/compose/constraints.py).
    num_steps = _int(node, p, "num_steps", lo=1, optional=True)
    check_synthetic(node, p, budget)
    render = node.get("render") or {}
    if not isinstance(render, Mapping):
        raise ConfigError(f"{p}.render", "must be a mapping of server flavor -> {args, env}")
    return Spec(algorithm=algorithm, budget=budget, topk=topk, window=window, block=block,
                num_steps=num_steps, draft_family=node.get("draft_family"), render=dict(render))


def _model(node: Mapping[str, Any]) -> Model:
    p = "model"
    ctx = _int(node, p, "context_length", lo=1)
    assert ctx is not None
    path = node.get("path")
    return Model(
        name=str(_get(node, p, "name")), path=None if path in (None, "") else str(path),
        served_name=str(_get(node, p, "served_name")), context_length=ctx,
        trust_remote_code=bool(node.get("trust_remote_code", False)),
        draft_paths=dict(node.get("draft_paths") or {}), arch=dict(node.get("arch") or {}),
    )


def _server(node: Mapping[str, Any]) -> Server:
    p = "server"
    port = _int(node, p, "port", lo=1, hi=65535)
    assert port is not None
    env = node.get("extra_env") or {}
    if not isinstance(env, Mapping):
        raise ConfigError(f"{p}.extra_env", f"must be a mapping NAME: value, got {env!r}")
    for k, v in env.items():
        if not str(k).replace("_", "").isalnum() or str(k)[:1].isdigit():
            raise ConfigError(f"{p}.extra_env.{k}", "is not a valid environment variable name")
        _no_control_chars(f"{p}.extra_env.{k}", str(v))
    extra = _str_tuple(node.get("extra_args"), f"{p}.extra_args")
    for i, a in enumerate(extra):
        _no_control_chars(f"{p}.extra_args[{i}]", a)
    exe = _str_tuple(node.get("executable"), f"{p}.executable")
    if not exe:
        raise ConfigError(f"{p}.executable", "must name the program to start")
    return Server(
        name=str(_get(node, p, "name")), flavor=str(_get(node, p, "flavor")),
        simulated=bool(node.get("simulated", False)), executable=exe,
        host=str(_get(node, p, "host")), port=port,
        disable_cuda_graph=_bool(node, p, "disable_cuda_graph"),
        skip_server_warmup=_bool(node, p, "skip_server_warmup"),
        enable_metrics=_bool(node, p, "enable_metrics"),
        health_path=str(node.get("health_path") or "/health"),
        api_key=node.get("api_key"), extra_args=extra,
        extra_env={str(k): str(v) for k, v in env.items()},
        secret_flags=_str_tuple(node.get("secret_flags"), f"{p}.secret_flags"),
        args=dict(node.get("args") or {}), env=dict(node.get("env") or {}),
        sim_args=dict(node.get("sim_args") or {}),
        request_extras=dict(node.get("request_extras") or {}),
        endpoint=_bench_checks.endpoint(node), tokenize=_bench_checks.tokenize(node),
        continuous_usage=_bool(node, p, "continuous_usage"),
        acceptance=checked_declaration(node.get("acceptance"), f"{p}.acceptance"),
        info_paths=_str_tuple(node.get("info_paths"), f"{p}.info_paths") or ("/get_server_info", "/server_info"),
        install=dict(node["install"]) if isinstance(node.get("install"), Mapping) else None,
    )


def _workload(node: Mapping[str, Any], model_ctx: int, endpoint: str = "completions") -> Workload:
    p = "workload"
    prompt_source, dataset_path, seed = _bench_checks.prompt_source(node, endpoint)
    contexts = _int_list(node, p, "contexts", lo=1, hi=model_ctx, what="model.context_length")
    conc = _int_list(node, p, "concurrency", lo=1)
    max_tokens = _int(node, p, "max_tokens", lo=1)
    assert max_tokens is not None
    for c in contexts:
        if c + max_tokens > model_ctx:
            raise ConfigError(f"{p}.contexts", f"context {c} + workload.max_tokens {max_tokens} "
                              f"exceeds model.context_length={model_ctx}")
    coding = node.get("coding", "five")
    if coding is False or coding is None:
        coding = "off"
    if coding not in CODING_EVALS:
        raise ConfigError(f"{p}.coding", f"must be one of {', '.join(CODING_EVALS)}, got {coding!r}")
    rate = _float(node, p, "request_rate", lo=0, optional=True)
    if rate is not None and rate <= 0:
        raise ConfigError(f"{p}.request_rate", f"must be > 0 (requests/s) or null for closed loop, got {rate}")
    sandbox = node.get("sandbox") or {}
    return Workload(
        name=str(node.get("name", "custom")), contexts=contexts, concurrency=conc,
        max_tokens=max_tokens,
        requests_per_cell=_int(node, p, "requests_per_cell", lo=1, optional=True),
        min_requests=_int(node, p, "min_requests", lo=1, optional=True) or 2,
        warmup_requests=_int(node, p, "warmup_requests", lo=0, optional=True) or 0,
        request_rate=rate, temperature=_float(node, p, "temperature", lo=0, optional=True) or 0.0,
        ignore_eos=bool(node.get("ignore_eos", True)), flush_cache=bool(node.get("flush_cache", True)),
        request_timeout_s=_float(node, p, "request_timeout_s", lo=1, optional=True) or 600.0,
        coding=str(coding),
        coding_max_tokens=_int(node, p, "coding_max_tokens", lo=1, optional=True) or 1024,
        humaneval_limit=_int(node, p, "humaneval_limit", lo=1, optional=True) or 20,
        sandbox_timeout_s=_float(sandbox, f"{p}.sandbox", "timeout_s", lo=0.1, optional=True) or 10.0,
        sandbox_memory_mb=_int(sandbox, f"{p}.sandbox", "memory_mb", lo=16, optional=True) or 512,
        sandbox_mechanism=_sandbox_mechanism(sandbox, f"{p}.sandbox.mechanism"),
        prompt_source=prompt_source, dataset_path=dataset_path, seed=seed,
        repeats=_int(node, p, "repeats", lo=1, hi=100, optional=True) or 1,
    )


def _sandbox_mechanism(node: Any, key: str) -> str:
    value = node.get("mechanism", "auto")
    if value not in SANDBOX_MECHANISMS:
        raise ConfigError(key, f"must be one of {', '.join(SANDBOX_MECHANISMS)}, got {value!r}")
    return str(value)


def _check_server_needs(server: Server, spec: Spec, model: Model, hardware: Hardware) -> None:
    if server.flavor not in spec.render:
        allowed = "none" if not spec.render else ", ".join(sorted(spec.render))
        raise ConfigError("spec", f"spec={spec.algorithm} has no rendering for server={server.name} "
                          f"(flavor {server.flavor}); spec.render has: {allowed}")
    if server.simulated:
        for key in SIM_PERF_KEYS:
            if hardware.perf.get(key) is None:
                raise ConfigError(f"hardware.perf.{key}", f"is required for server={server.name} (the "
                                  f"simulator models it); hardware={hardware.name} leaves it unknown")
        return
    if not model.path:
        raise ConfigError("model.path", f"is required for server={server.name} "
                          "(a local folder or a Hugging Face repo id)")
    if spec.draft_family and not model.draft_paths.get(spec.draft_family):
        raise ConfigError(f"model.draft_paths.{spec.draft_family}",
                          f"is required for spec={spec.algorithm} on server={server.name} "
                          "(path of the draft model)")


def build(cfg: Mapping[str, Any]) -> TrialConfig:
    """Turn a resolved composed config (plain dict) into a :class:`TrialConfig`."""
    for group in ("hardware", "spec", "model", "server", "launcher", "workload"):
        if not isinstance(cfg.get(group), Mapping):
            raise ConfigError(group, "group is missing from the composed config")
    hardware = _hardware(cfg["hardware"])
    spec = _spec(cfg["spec"])
    check_spec_constraints(cfg)   # the same declaration the sweeper's valid-only space reads
    quirk_rules(cfg["hardware"])  # declarations parse (the sweeper applies them)
    model = _model(cfg["model"])
    server = _server(cfg["server"])
    launcher = launcher_settings(cfg["launcher"])
    workload = _workload(cfg["workload"], model.context_length, server.endpoint)
    _check_server_needs(server, spec, model, hardware)
    for group in ("objective", "mlflow"):
        if not isinstance(cfg.get(group), Mapping):
            raise ConfigError(group, "group is missing from the composed config")
    return TrialConfig(hardware=hardware, spec=spec, model=model, server=server,
                       launcher=launcher, workload=workload,
                       dry_run=bool(cfg.get("dry_run", False)), raw=dict(cfg),
                       objective=objective(cfg["objective"]), mlflow=mlflow(cfg["mlflow"]),
                       results=results(cfg), pool=tuple(pool_hosts(cfg["launcher"].get("hosts"))),
                       secret_names=_str_tuple(cfg.get("secret_names"), "secret_names"))


def from_omegaconf(cfg: Any) -> TrialConfig:
    """Resolve a Hydra/OmegaConf config and build the typed view.

    Interpolation errors (e.g. a key that does not exist) become a
    ConfigError naming the key.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    import sweep.compose.resolvers  # noqa: F401  (registers ${sweep.*})

    try:
        container = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or "config"
        msg = str(exc).splitlines()[0]
        raise ConfigError(str(key), msg) from None
    assert isinstance(container, dict)
    container.pop("hydra", None)
    return build({str(k): v for k, v in container.items()})


def replace(cfg: TrialConfig, **changes: Any) -> TrialConfig:
    return dataclasses.replace(cfg, **changes)
