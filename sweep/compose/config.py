"""Typed trial configuration, built from the composed Hydra config.

Hydra composes YAML; this module turns the result into frozen dataclasses
and checks every value a server or the benchmark depends on. Each problem
raises :class:`~sweep.errors.ConfigError` naming the full key and the
allowed values, so the user sees one line and nothing has started.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from sweep.compose import bench_checks as _bench_checks
from sweep.compose import bounds
from sweep.compose.acceptance_checks import checked_declaration
from sweep.compose.keys import CODING_EVALS, SANDBOX_MECHANISMS
from sweep.compose.bounds import get as _v  # a key's value, typed and bounded by its rule
from sweep.compose.checks import no_control_chars as _no_control_chars
from sweep.compose.constraints import check_spec_constraints, quirk_rules
from sweep.compose.hosts import PoolHost, pool_hosts
from sweep.compose.settings import Mlflow, Objective, Results, launcher_settings, mlflow, objective, results
from sweep.compose.synthetic import check_synthetic
from sweep.errors import ConfigError
from sweep.launch import LauncherSettings

__all__ = ["CODING_EVALS", "SANDBOX_MECHANISMS", "TrialConfig", "build", "from_omegaconf"]

# Figures of hardware.perf the simulator's performance model cannot do without.
SIM_PERF_KEYS = ("mem_bw_tbs", "link_bw_gbs", "link_latency_us")


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
    # optional packages of the engine install the spec needs (spec=suffix: arctic-inference)
    requires: tuple[str, ...] = ()
    # per-load speculation: (from, to, budget) bands of batch sizes (None: one budget at every load)
    per_load: tuple[tuple[int, int, int], ...] | None = None


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
    # the prefix cache across requests: whether the server keeps one, and the route that empties
    # it (None: none); how a cell starts cold (sweep/bench/matrix.py, `cache` per cell)
    cache_kept: bool = True
    flush_path: str | None = "/flush_cache"
    # why this server cannot run spec.per_load (None: the spec's render carries it)
    per_load_refusal: str | None = None
    # server.port as configured, when the port was in use and the launch moved to the next
    # free one (server.port unset by the user; sweep/trial/port.py); None otherwise
    configured_port: int | None = None

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
    # a trial with more failed requests than this fraction (or none answered) is failed: bench_errors
    max_error_rate: float = 0.0
    prompt_source: str = "text"       # text | random_ids | dataset
    dataset_path: str | None = None   # JSONL of prompts for prompt_source=dataset
    seed: int = 0                     # prompts (and Poisson arrivals) are deterministic per seed
    repeats: int = 1                         # each cell measured this many times (mean + 95% CI)
    # the max-load search in place of the matrix (workload=max_load; sweep/bench/maxload.py)
    max_load: _bench_checks.MaxLoadSearch = field(default_factory=_bench_checks.MaxLoadSearch)
    # the greedy-identity pass: {prompts, max_tokens, context} (sweep/bench/identity.py); prompts 0: off
    identity: Mapping[str, Any] = field(default_factory=dict)
    endpoint: str | None = None              # completions | chat; None: the server's (server.endpoint)
    # only these (context, concurrency) cells of the matrix run (None: all; sweep/decide.py)
    cells: tuple[tuple[int, int], ...] | None = None
    # a busy box (sweep/bench/boxstate.py): mark | wait (up to busy_wait_s, then mark) | refuse (after waiting)
    busy_box: str = "mark"
    busy_wait_s: float = 0.0
    busy_load: float = 0.5                   # cores' worth of other work on the engine's cores that is busy

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
    num = _v(node, p, "num_gpus")  # 0: a CPU box (llama.cpp)
    tp, ep, dp = (_v(node, p, k) for k in ("tp", "ep", "dp"))
    for key, value in (("tp", tp), ("ep", ep), ("dp", dp)):
        if value > max(num, 1):
            raise ConfigError(f"{p}.{key}", f"must be in [1, {max(num, 1)}] (GPUs in the box), got {value}")
    if tp % ep != 0:
        raise ConfigError(f"{p}.ep", f"must divide hardware.tp={tp} (allowed: "
                          f"{', '.join(str(d) for d in range(1, tp + 1) if tp % d == 0)}), got {ep}")
    perf = _v(node, p, "perf", {})
    return Hardware(
        name=_v(node, p, "name"), gpu=_v(node, p, "gpu", ""), num_gpus=num,
        arch=_v(node, p, "arch"), memory_gb=_v(node, p, "memory_gb"),
        interconnect=_v(node, p, "interconnect", ""), tp=tp, ep=ep, dp=dp,
        perf=dict(perf), quirks=dict(_v(node, p, "quirks", {})), cost_per_hour=_v(node, p, "cost_per_hour"),
    )


def _spec(node: Mapping[str, Any]) -> Spec:
    p = "spec"
    budget, topk = _v(node, p, "budget"), _v(node, p, "topk")
    block, window = _v(node, p, "block"), _v(node, p, "window")
    # Rules between knobs (topk <= budget, ...) are the spec's declared `constraints`,
    # checked by build() once every value is typed (sweep/compose/constraints.py).
    check_synthetic(node, p, budget)
    algorithm = _v(node, p, "algorithm")
    per_load = _v(node, p, "per_load")
    if per_load is not None:
        top = max(k for _, _, k in per_load)
        if algorithm == "none":
            raise ConfigError(f"{p}.per_load", "spec=none drafts nothing: per-load budgets need a speculative spec")
        if budget != top:
            raise ConfigError(f"{p}.budget", f"must be the largest budget of spec.per_load ({top}): the engine "
                              f"drafts at most spec.budget tokens a step, got {budget} (set spec.budget={top})")
    return Spec(algorithm=algorithm, budget=budget, topk=topk, window=window, block=block,
                num_steps=_v(node, p, "num_steps"), draft_family=_v(node, p, "draft_family"),
                render=dict(_v(node, p, "render", {})), requires=tuple(_v(node, p, "requires", ()) or ()),
                per_load=per_load)


def _model(node: Mapping[str, Any]) -> Model:
    p = "model"
    return Model(
        name=_v(node, p, "name"), path=_v(node, p, "path") or None,
        served_name=_v(node, p, "served_name"), context_length=_v(node, p, "context_length"),
        trust_remote_code=_v(node, p, "trust_remote_code", False),
        draft_paths=dict(_v(node, p, "draft_paths", {})), arch=dict(_v(node, p, "arch", {})),
    )


def _server(node: Mapping[str, Any]) -> Server:
    p = "server"
    env = _v(node, p, "extra_env", {})
    for k, v in env.items():
        if not str(k).replace("_", "").isalnum() or str(k)[:1].isdigit():
            raise ConfigError(f"{p}.extra_env.{k}", "is not a valid environment variable name")
        _no_control_chars(f"{p}.extra_env.{k}", str(v))
    exe = _v(node, p, "executable")
    if not exe:
        raise ConfigError(f"{p}.executable", "must name the program to start")
    api_key = _v(node, p, "api_key")
    cache: Mapping[str, Any] = node["prefix_cache"] if isinstance(node.get("prefix_cache"), Mapping) else {}
    return Server(
        name=_v(node, p, "name"), flavor=_v(node, p, "flavor"),
        simulated=_v(node, p, "simulated", False), executable=exe,
        host=_v(node, p, "host"), port=_v(node, p, "port"),
        disable_cuda_graph=_v(node, p, "disable_cuda_graph", False),
        skip_server_warmup=_v(node, p, "skip_server_warmup", False),
        enable_metrics=_v(node, p, "enable_metrics", False),
        health_path=_v(node, p, "health_path") or "/health",
        api_key=api_key or None, extra_args=_v(node, p, "extra_args", ()),
        extra_env={str(k): str(v) for k, v in env.items()},
        secret_flags=_v(node, p, "secret_flags", ()),
        args=dict(_v(node, p, "args", {})), env=dict(_v(node, p, "env", {})),
        sim_args=dict(_v(node, p, "sim_args", {})),
        request_extras=dict(_v(node, p, "request_extras", {})),
        endpoint=_bench_checks.endpoint(node), tokenize=_bench_checks.tokenize(node),
        continuous_usage=_v(node, p, "continuous_usage", False),
        acceptance=checked_declaration(node.get("acceptance"), f"{p}.acceptance"),
        info_paths=_v(node, p, "info_paths") or ("/get_server_info", "/server_info"),
        install=dict(node["install"]) if isinstance(node.get("install"), Mapping) else None,
        per_load_refusal=_v(node, p, "per_load_refusal") or None,
        cache_kept=bool(_v(cache, f"{p}.prefix_cache", "kept", True)),
        flush_path=_v(cache, f"{p}.prefix_cache", "flush_path", None),
    )


def _workload(node: Mapping[str, Any], model_ctx: int, endpoint: str = "completions") -> Workload:
    p = "workload"
    own = _v(node, p, "endpoint")  # the workload's endpoint beats the server's (prose is what chat serves)
    prompt_source, dataset_path, seed = _bench_checks.prompt_source(node, own or endpoint)
    contexts = _v(node, p, "contexts")
    conc = _v(node, p, "concurrency")
    max_tokens = _v(node, p, "max_tokens")
    for c in contexts:
        if c > model_ctx:
            raise ConfigError(f"{p}.contexts", f"must be in [1, {model_ctx}] (model.context_length), got {c}")
        if c + max_tokens > model_ctx:
            raise ConfigError(f"{p}.contexts", f"context {c} + workload.max_tokens {max_tokens} "
                              f"exceeds model.context_length={model_ctx}")
    coding = _v(node, p, "coding", "five")
    rate = _v(node, p, "request_rate")
    if rate is not None and rate <= 0:
        raise ConfigError(f"{p}.request_rate", f"must be > 0 (requests/s) or null for closed loop, got {rate}")
    sandbox = _v(node, p, "sandbox", {})
    sp = f"{p}.sandbox"
    return Workload(
        name=_v(node, p, "name", "custom"), contexts=contexts, concurrency=conc,
        max_tokens=max_tokens, requests_per_cell=_v(node, p, "requests_per_cell"),
        min_requests=_v(node, p, "min_requests") or 2, warmup_requests=_v(node, p, "warmup_requests", 0),
        request_rate=rate, temperature=_v(node, p, "temperature", 0.0),
        ignore_eos=_v(node, p, "ignore_eos", True), flush_cache=_v(node, p, "flush_cache", True),
        request_timeout_s=_v(node, p, "request_timeout_s", 600.0),
        max_error_rate=_v(node, p, "max_error_rate", 0.0),
        coding="off" if coding in (False, None) else str(coding),
        coding_max_tokens=_v(node, p, "coding_max_tokens", 1024),
        humaneval_limit=_v(node, p, "humaneval_limit", 20),
        sandbox_timeout_s=_v(sandbox, sp, "timeout_s", 10.0),
        sandbox_memory_mb=_v(sandbox, sp, "memory_mb", 512),
        sandbox_mechanism=_v(sandbox, sp, "mechanism", "auto"),
        prompt_source=prompt_source, dataset_path=dataset_path, seed=seed,
        repeats=_v(node, p, "repeats", 1), max_load=_bench_checks.max_load(node, contexts),
        identity=_identity(node, contexts, model_ctx), endpoint=own,
        cells=_cells(node, contexts, conc),
        busy_box=str(_v(node, p, "busy_box", "mark")), busy_wait_s=float(_v(node, p, "busy_wait_s", 0.0)),
        busy_load=float(_v(node, p, "busy_load", 0.5)),
    )


def _cells(node: Mapping[str, Any], contexts: Sequence[int], concurrency: Sequence[int]
           ) -> tuple[tuple[int, int], ...] | None:
    """``workload.cells``: [context, concurrency] pairs of the matrix (a pair outside it: one line)."""
    raw = _v(node, "workload", "cells")
    if raw is None:
        return None
    if not raw:
        raise ConfigError("workload.cells", "must name at least one [context, concurrency] cell (null: all)")
    out = []
    for i, pair in enumerate(raw):
        if pair[0] not in contexts or pair[1] not in concurrency:
            raise ConfigError(f"workload.cells[{i}]", f"{list(pair)} is not a cell of the matrix "
                              f"(contexts {list(contexts)} x concurrency {list(concurrency)})")
        out.append((int(pair[0]), int(pair[1])))
    return tuple(out)


def _identity(node: Mapping[str, Any], contexts: tuple[int, ...], model_ctx: int) -> dict[str, Any]:
    p = "workload.identity"
    spec = _v(node, "workload", "identity", {}) or {}
    out = {"prompts": _v(spec, p, "prompts", 0) or 0, "max_tokens": _v(spec, p, "max_tokens"),
           "context": _v(spec, p, "context")}
    if out["prompts"] and (out["context"] or contexts[0]) + (out["max_tokens"] or 0) > model_ctx:
        raise ConfigError(f"{p}.context", f"context {out['context'] or contexts[0]} + max_tokens "
                          f"{out['max_tokens']} exceeds model.context_length={model_ctx}")
    return out


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


def _check_per_load(spec: Spec, server: Server) -> None:
    """spec.per_load on a server that cannot switch the draft length by load: refused in one line
    with the server's own reason (``server.per_load_refusal``), before anything starts."""
    if spec.per_load is not None and server.per_load_refusal:
        raise ConfigError("spec.per_load", f"server={server.name} cannot run per-load budgets: "
                          f"{server.per_load_refusal}")
    # A spec whose form for this engine does not render the table would launch at spec.budget on
    # every load, silently: refused (the simulator takes it as its own --sim-per-load flag).
    table = [list(row) for row in spec.per_load or ()]
    form = spec.render.get(server.flavor)
    if form is None:
        return  # no form for this engine at all: the render says so in its own line
    if table and not server.simulated and not _renders(form, table):
        raise ConfigError("spec.per_load", f"spec={spec.algorithm}'s {server.flavor} form renders no "
                          "per-load table (spec.render." f"{server.flavor} has no ${{spec.per_load}})")


def _renders(node: Any, table: list[list[int]]) -> bool:
    """Whether the resolved render mapping carries the per-load table somewhere."""
    if isinstance(node, Mapping):
        return any(_renders(v, table) for v in node.values())
    if isinstance(node, (list, tuple)) and node and all(isinstance(r, (list, tuple)) for r in node):
        return [list(r) for r in node] == table
    return False


def _check_requires(spec: Spec, server: Server, launcher: LauncherSettings) -> None:
    """A spec whose engine dependency did not build here is refused in one line (spec.requires)."""
    if not spec.requires or not server.install or launcher.name != "local":
        return
    from sweep.compose.engine_paths import optional_status

    status = optional_status(str(server.install.get("dir")))
    if status is None:  # not installed: the launch says so (model_missing / crashed with the hint)
        return
    for name in spec.requires:
        state = status.get(name)
        if state != "ok":
            why = f"did not build ({state})" if state else f"was not tried: run python -m sweep.engines {server.name}"
            raise ConfigError("spec", f"spec={spec.algorithm} is unavailable on this {server.name} install: "
                              f"it needs {name}, which {why}")


def _objective_measured(goal: Any, workload: Workload) -> None:
    """The cells the objective reads are cells the workload measures: ``objective.metric=cell`` at
    ``objective.context`` x ``objective.concurrency``, the ``ctx<C>_c<N>`` weights of
    ``weighted_mean``. One the matrix never measures would leave every trial without an objective."""
    if workload.max_load.enabled:  # the search probes its own loads at its one context
        if goal.context is not None and goal.context not in workload.contexts:
            raise ConfigError("objective.context", f"{goal.context}: workload.max_load searches context "
                              f"{workload.contexts[0]} only")
        return
    for key, value, measured in (("context", goal.context, workload.contexts),
                                 ("concurrency", goal.concurrency, workload.concurrency)):
        if value is None and goal.measure == "cell":
            raise ConfigError(f"objective.{key}", "objective.metric=cell reads one cell: set it "
                              f"(the workload measures {', '.join(map(str, measured))})")
        if value is not None and value not in measured:
            plural = "contexts" if key == "context" else "concurrencies"
            raise ConfigError(f"objective.{key}", f"{value} is never measured: the workload's {plural} are "
                              f"{', '.join(map(str, measured))} (objective.metric=cell reads the cell it names)")
    if goal.measure == "weighted_mean":
        cells = {f"ctx{c}_c{n}" for c in workload.contexts for n in workload.concurrency}
        for name in goal.weights:
            if name not in cells:
                raise ConfigError(f"objective.weights.{name}", "names no cell the workload measures "
                                  f"(ctx<context>_c<concurrency>: {', '.join(sorted(cells)[:12])}"
                                  f"{' ...' if len(cells) > 12 else ''})")


def build(cfg: Mapping[str, Any]) -> TrialConfig:
    """Turn a resolved composed config (plain dict) into a :class:`TrialConfig`."""
    for group in ("hardware", "spec", "model", "server", "launcher", "workload"):
        if not isinstance(cfg.get(group), Mapping):
            raise ConfigError(group, "group is missing from the composed config")
    bounds.check_config(cfg)  # every key with a rule: typed and bounded (sweep/compose/bounds.py)
    hardware = _hardware(cfg["hardware"])
    spec = _spec(cfg["spec"])
    check_spec_constraints(cfg)   # the same declaration the sweeper's valid-only space reads
    quirk_rules(cfg["hardware"])  # declarations parse (the sweeper applies them)
    model = _model(cfg["model"])
    server = _server(cfg["server"])
    launcher = launcher_settings(cfg["launcher"])
    workload = _workload(cfg["workload"], model.context_length, server.endpoint)
    _check_per_load(spec, server)
    _check_server_needs(server, spec, model, hardware)
    _check_requires(spec, server, launcher)
    for group in ("objective", "mlflow"):
        if not isinstance(cfg.get(group), Mapping):
            raise ConfigError(group, "group is missing from the composed config")
    goal = objective(cfg["objective"])
    _objective_measured(goal, workload)
    for name in goal.metrics or ():  # a per-load study's values name measured loads
        if (m := re.match(r"^tok_s_at_c(\d+)$", name)) and int(m.group(1)) not in workload.concurrency:
            raise ConfigError("objective.metrics", f"{name}: concurrency {m.group(1)} is not measured "
                              f"(workload.concurrency {list(workload.concurrency)})")
    if workload.max_load.enabled and not goal.slo.active:
        raise ConfigError("objective.slo", "workload.max_load searches the highest load meeting a latency "
                          "SLO: set at least one limit, e.g. objective.slo.tpot_ms=50 (ttft_ms, tpot_ms, "
                          "itl_ms, e2e_ms)")
    return TrialConfig(hardware=hardware, spec=spec, model=model, server=server,
                       launcher=launcher, workload=workload,
                       dry_run=bounds.check("dry_run", cfg.get("dry_run")) or False, raw=dict(cfg),
                       objective=goal, mlflow=mlflow(cfg["mlflow"]),
                       results=results(cfg), pool=tuple(pool_hosts(cfg["launcher"].get("hosts"))),
                       secret_names=bounds.check("secret_names", cfg.get("secret_names")) or ())


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
        # ${model.draft_paths.dflash} with model.draft_paths=5: the key at fault is the one set wrong
        if m := re.search(r"node `([^`]+)` is not a container", msg):
            key, msg = m.group(1), f"must be a mapping (its keys are used: {msg})"
        raise ConfigError(str(key), msg) from None
    assert isinstance(container, dict)
    container.pop("hydra", None)
    return build({str(k): v for k, v in container.items()})


def replace(cfg: TrialConfig, **changes: Any) -> TrialConfig:
    return dataclasses.replace(cfg, **changes)
