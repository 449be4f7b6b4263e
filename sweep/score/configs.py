"""What counts as one config: its identity, its one name, and its copies pooled as repeats.

Why: configs were told apart by name, and names showed only budget/topk/window and the
keys one sweep varied. Three n-gram configs at budget 4 with different lookup windows,
each run as its own sweep, shared a name, and the schedule kept one of them; the same
config run twice (``workload=smoke`` and ``workload=smoke workload.max_tokens=64``, its
default) became two rows ranked against each other by noise. Here, once:

* :func:`identity` -- **what runs** (the rendered launch: the engine and its version, every
  flag and environment variable, with plumbing dropped -- the port, the host, the API key,
  the simulator's noise seed and load time (``server.plumbing``) -- and file paths compared
  by their last two parts, so the same weights in another directory are the same model;
  the model; the box and its layout; simulated or not) and **what is measured** (the
  workload matrix: contexts, loads, new tokens, prompts, sampling, arrivals, the
  max-load search; what the prefix cache is asked to hold; the SLO). Its hash, :attr:`Identity.id`, is
  the config id every part of the project groups, ranks, deduplicates and pools by. How
  many requests, which seed's prompts, how many repeats and whether the coding eval ran
  are not part of it: they say how much was measured, not what.
* :func:`name_of` -- the one name: the box, the algorithm, budget/topk/window, then every
  knob that differs from its group's defaults (``spec``, ``server``, ``hardware``,
  ``model``), the workload's name and every measured key that differs from the
  workload group's defaults, then the SLO. Computed from the config alone, however the
  trial was launched. :func:`names` makes two different configs never share one
  (a short id suffix where the knobs do not tell them apart, e.g. another engine build).
* :func:`pool` -- copies of one config (across runs, sweep dirs, grids, searches, SLURM
  jobs, landscape rounds) become one document whose cells hold every copy's runs: the
  spread of the copies is the config's interval. Cells pool only with cells measured
  the same way (same context and load, the same cache state).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePath
from typing import Any, Iterable, Mapping, Sequence

from sweep.record.result import Cell, Coding, Metrics, TrialResult
from sweep.stats import interval

# Launch arguments that say where a server listens or how it is reached, not what it is
# (besides each server group's own ``server.plumbing``).
PLUMBING_ARGS = ("--host", "--port", "--api-key")
# What a workload measures (the rest -- requests per cell, seed, repeats, timeouts, the coding
# eval, the greedy-identity pass -- says how much or what else, not what these cells are).
MEASURED = ("contexts", "concurrency", "max_tokens", "prompt_source", "dataset_path", "request_rate",
            "temperature", "ignore_eos", "endpoint", "flush_cache")
MAX_LOAD = ("enabled", "over", "start", "max", "context")
GROUPS = ("hardware", "spec", "model", "server", "workload")


def _section(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = config.get(name)
    return value if isinstance(value, Mapping) else {}


def _path_tail(value: str) -> str:
    """An absolute file path by its last two parts (the same weights elsewhere are the same model)."""
    if value.startswith("/") and len(value) > 1 and "\n" not in value:
        parts = PurePath(value).parts
        return "/".join(parts[-2:])
    return value


def _launch_args(argv: Sequence[str], skip: int, plumbing: Iterable[str]) -> list[str]:
    """The arguments after the executable, plumbing flags (and their values) dropped, paths by their tail."""
    drop = set(plumbing)
    args = list(argv[skip:])
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = str(args[i])
        flag, eq, _ = arg.partition("=")
        if arg.startswith("-") and flag in drop:
            if not eq and i + 1 < len(args) and not str(args[i + 1]).startswith("--"):
                i += 1
            i += 1
            continue
        out.append(_path_tail(arg))
        i += 1
    return out


def _hashable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _hashable(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_hashable(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        return _path_tail(value)
    return value


def cache_policy(config: Mapping[str, Any]) -> str:
    """What the config asks the prefix cache to hold when a cell opens: ``off`` (the server keeps
    none), ``cold`` (emptied or avoided: workload.flush_cache) or ``warm``. Each cell records what it
    got (``cache``: flushed | off | fresh | warm); copies pool only cells that got the same."""
    server, wl = _section(config, "server"), _section(config, "workload")
    kept = _section(server, "prefix_cache").get("kept", True)
    if kept is False:
        return "off"
    return "cold" if wl.get("flush_cache", True) else "warm"


@dataclass(frozen=True)
class Identity:
    """What runs and what is measured; ``id`` is its hash (12 hex digits)."""

    launch: Mapping[str, Any]
    measured: Mapping[str, Any]

    @property
    def id(self) -> str:
        blob = json.dumps({"launch": self.launch, "measured": self.measured}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


def launch_identity(doc: TrialResult) -> dict[str, Any]:
    """What runs: engine and version, the launch without plumbing, the model, the box."""
    cfg = doc.config
    server, hw, model = (_section(cfg, k) for k in ("server", "hardware", "model"))
    install: Mapping[str, Any] = server["install"] if isinstance(server.get("install"), Mapping) else {}
    executable = server.get("executable")
    skip = len(executable) if isinstance(executable, (list, tuple)) else 1
    plumbing = [*PLUMBING_ARGS, *[str(a) for a in (_section(server, "plumbing").get("args") or [])]]
    env_plumbing = {str(e) for e in (_section(server, "plumbing").get("env") or [])}
    env = {k: _path_tail(str(v)) for k, v in sorted((doc.env or {}).items()) if k not in env_plumbing}
    return {
        "engine": server.get("name"), "version": install.get("version"), "simulated": bool(doc.simulated),
        "args": _launch_args(doc.argv or [], skip, plumbing) if doc.argv else _hashable(cfg.get("spec")),
        "env": env,
        "model": model.get("name"),
        "box": {k: hw.get(k) for k in ("name", "num_gpus", "tp", "ep", "dp")},
    }


def measured_identity(doc: TrialResult) -> dict[str, Any]:
    """What is measured: the workload's matrix and load, the cache state, the SLO."""
    cfg = doc.config
    wl = _section(cfg, "workload")
    out: dict[str, Any] = {k: _hashable(wl.get(k)) for k in MEASURED}
    ml = _section(wl, "max_load")
    if ml.get("enabled"):
        out["max_load"] = {k: _hashable(ml.get(k)) for k in MAX_LOAD}
    out["cache"] = cache_policy(cfg)
    slo = _section(_section(cfg, "objective"), "slo")
    limits = {k: v for k, v in slo.items() if k != "percentile" and v is not None}
    out["slo"] = {**limits, "percentile": slo.get("percentile")} if limits else None
    return out


def identity(doc: TrialResult) -> Identity:
    return Identity(launch_identity(doc), measured_identity(doc))


def config_id(doc: TrialResult) -> str:
    """The config id: the same for every copy of one config, different for any other."""
    return identity(doc).id


def config_id_of(node: Any) -> str:
    """The config id of a composed config before it runs (a search's proposal): rendered and masked
    exactly as the trial will record it, so the id is the one its result.json will carry."""
    from sweep import secrets
    from sweep.compose.config import from_omegaconf
    from sweep.compose.render import render

    cfg = from_omegaconf(node)
    launch = render(cfg)
    red = secrets.redactor(launch.secrets)
    doc = TrialResult(simulated=cfg.simulated,
                      argv=secrets.mask_argv(launch.argv, cfg.server.secret_flags, launch.secrets),
                      env=secrets.mask_env(launch.env, launch.secrets),
                      config=secrets.mask_tree(dict(cfg.raw), red))
    return config_id(doc)


# ------------------------------------------------------------------------------------------ names

# Short forms of knobs in names (others: the key's last part, ``=``, the value).
SHORT = {
    "spec.budget": "b", "spec.topk": "t", "spec.window": "w", "spec.block": "blk",
    "spec.num_steps": "steps", "spec.ngram_n_max": "max", "spec.ngram_n_min": "min",
    "spec.draft_n_min": "dmin", "spec.suffix_max_spec_factor": "f", "spec.suffix_min_token_prob": "p",
    "workload.max_tokens": "mt", "workload.contexts": "ctx", "workload.concurrency": "c",
    "workload.request_rate": "rate", "workload.temperature": "temp", "workload.prompt_source": "prompts",
    "hardware.cpu.threads_bind": "bind", "hardware.cpu.dtype": "", "server.disable_cuda_graph": "nocg",
    "server.prefix_caching": "apc", "workload.flush_cache": "flush", "workload.ignore_eos": "eos",
    "spec.per_load": "dyn",
}
# Keys whose differences never name a config (where things are, how they are reached or
# described, what renders the knobs rather than the knobs themselves).
_NOT_KNOBS = {
    "spec": {"algorithm", "budget", "topk", "window", "render", "constraints", "requires"},
    "server": {"name", "flavor", "executable", "args", "env", "sim_args", "install", "plumbing"},
    "hardware": {"name"},
    "model": {"paths", "draft_paths", "drafts", "install"},
}


def _flat(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, Mapping):
        out: dict[str, Any] = {}
        for k, v in node.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: node}


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ".".join(_fmt(v) for v in value)
    return str(value)


def _bands(value: Any) -> str | None:
    """``spec.per_load`` in a name: ``1:8,2-4:4,5-256:0`` (batch sizes : budget), None if not bands."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(b, (list, tuple)) and len(b) == 3 for b in value):
        return None
    return ",".join(f"{_fmt(lo)}{'' if lo == hi else f'-{_fmt(hi)}'}:{_fmt(k)}" for lo, hi, k in value)


def _part(key: str, value: Any) -> str:
    short = SHORT.get(key)
    if key == "spec.per_load" and _bands(value) is not None:
        return f"{short}{_bands(value)}"
    if isinstance(value, bool) and short is not None:
        return short if value else f"no{short}"
    if short is not None:
        return f"{short}{_fmt(value)}"
    leaf = key.rsplit(".", 1)[-1]
    if isinstance(value, bool):
        return leaf if value else f"no_{leaf}"
    return f"{leaf}={_fmt(value)}"


def choices_of(doc: TrialResult) -> dict[str, str]:
    """The config group options the trial was composed from (recorded since names were
    computed from them; inferred for older files)."""
    recorded = doc.trial.get("choices")
    if isinstance(recorded, Mapping) and recorded:
        return {k: str(v) for k, v in recorded.items() if k in GROUPS and v is not None}
    cfg = doc.config
    out = {"hardware": str(_section(cfg, "hardware").get("name") or doc.trial.hardware),
           "server": str(_section(cfg, "server").get("name") or "sim"),
           "workload": str(_section(cfg, "workload").get("name") or "seed")}
    spec = doc.trial.spec if doc.trial.spec not in (None, "?") else _section(cfg, "spec").get("algorithm")
    if spec:
        out["spec"] = str(spec)
    return out


def _refs(node: Any) -> set[str]:
    """Config keys an unresolved template mentions (``${spec.budget}``, ``${oc.select:hardware.cpu.dtype,x}``,
    ``${sweep.gt:${hardware.ep},1}``)."""
    out: set[str] = set()
    if isinstance(node, Mapping):
        for v in node.values():
            out |= _refs(v)
    elif isinstance(node, (list, tuple)):
        for v in node:
            out |= _refs(v)
    elif isinstance(node, str) and "${" in node:
        for m in re.finditer(r"[A-Za-z_][\w]*(?:\.[\w]+)+", node):
            if m.group(0).split(".", 1)[0] in GROUPS:
                out.add(m.group(0))
    return out


def _lookup(raw: Mapping[str, Any], key: str) -> Any:
    node: Any = raw
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


@dataclass(frozen=True)
class _Defaults:
    resolved: Mapping[str, Any]
    rendered: frozenset[str]  # config keys whose value reaches the launch (besides plumbing flags)


@lru_cache(maxsize=64)
def _defaults(choices: tuple[tuple[str, str], ...]) -> _Defaults | None:
    """The groups' defaults (these options, no other override) and which keys reach the launch:
    those the server's and the spec's render templates mention, followed through the templates of
    the keys they name (vLLM's --enforce-eager names server.disable_cuda_graph, which names
    hardware.cpu.eager). None: the options do not compose here."""
    from omegaconf import OmegaConf

    from sweep.compose import resolvers
    from sweep.compose.cmdline import compose

    resolvers.register()
    try:
        cfg = compose([f"{g}={c}" for g, c in choices])
        resolved_any = OmegaConf.to_container(cfg, resolve=True)
        raw_any = OmegaConf.to_container(cfg, resolve=False)
    except Exception:  # noqa: BLE001 - an option this checkout lacks (a user's own group): no defaults
        return None
    if not isinstance(resolved_any, dict) or not isinstance(raw_any, dict):
        return None
    resolved: dict[str, Any] = {str(k): v for k, v in resolved_any.items()}
    raw: dict[str, Any] = {str(k): v for k, v in raw_any.items()}
    server: Mapping[str, Any] = _section(raw, "server")
    flavor = _section(resolved, "server").get("flavor")
    plumbing = {*PLUMBING_ARGS, *(_section(server, "plumbing").get("args") or [])}
    seeds: list[Any] = [_lookup(raw, f"spec.render.{flavor}"), server.get("executable"),
                        server.get("request_extras")]
    for part in ("args", "sim_args", "env"):
        node = server.get(part)
        if isinstance(node, dict):
            seeds.append({k: v for k, v in node.items() if k not in plumbing})
    todo = _refs(seeds) | {"server.extra_args", "server.extra_env"}  # appended by the renderer itself
    seen: set[str] = set()
    while todo:
        key = todo.pop()
        if key in seen:
            continue
        seen.add(key)
        todo |= _refs(_lookup(raw, key)) - seen
    return _Defaults(resolved, frozenset(seen))


def _rendered(key: str, rendered: frozenset[str]) -> bool:
    """Whether the full key ``group.a.b`` reaches the launch (itself, or a node above it, is rendered)."""
    parts = key.split(".")
    return any(".".join(parts[:i]) in rendered for i in range(2, len(parts) + 1))


def _diffs(doc: TrialResult, defaults: _Defaults | None) -> tuple[list[str], list[str]]:
    """(knob parts, measured parts) that differ from the groups' defaults, in a stable order: a knob
    only where its value reaches the launch (so copies of one config have one name)."""
    cfg = doc.config
    knobs: list[str] = []
    measured: list[str] = []
    if defaults is None:
        return knobs, measured
    base = defaults.resolved
    for group in ("spec", "server", "hardware", "model"):
        if group == "spec" and _section(cfg, "spec").get("algorithm") == "none":
            continue  # a baseline renders no drafting knob
        mine, theirs = _flat(_section(cfg, group)), _flat(_section(base, group))
        for key in sorted(set(mine) | set(theirs)):
            top = key.split(".", 1)[0]
            full = f"{group}.{key}"
            if key in _NOT_KNOBS.get(group, ()) or top in _NOT_KNOBS.get(group, ()) \
                    or not _rendered(full, defaults.rendered):
                continue
            a, b = mine.get(key), theirs.get(key)
            if a is None or _hashable(a) == _hashable(b) or (a in ([], {}) and b in (None, [], {})):
                continue  # equal, or not recorded (a partial config of an older file)
            knobs.append(_fmt(a) if SHORT.get(full) == "" else _part(full, a))
    wl, wl_default = _section(cfg, "workload"), _section(base, "workload")
    for key in MEASURED:
        if _hashable(wl.get(key)) != _hashable(wl_default.get(key)):
            measured.append(_part(f"workload.{key}", wl.get(key)))
    ml, ml_default = _section(wl, "max_load"), _section(wl_default, "max_load")
    if ml.get("enabled") and not ml_default.get("enabled"):
        measured.append(f"maxload-{ml.get('over')}")
    return knobs, measured


def _slo_part(cfg: Mapping[str, Any]) -> str | None:
    slo = _section(_section(cfg, "objective"), "slo")
    limits = [f"{k.split('_')[0]}{_fmt(v)}" for k, v in slo.items() if k != "percentile" and v is not None]
    if not limits:
        return None
    pct = slo.get("percentile")
    return "slo-" + "-".join(limits) + (f"-p{_fmt(pct)}" if pct not in (None, 90) else "")


def name_of(doc: TrialResult) -> str:
    """``b300-ddtree-b8-t4-w2048-blk2-smoke-mt32``: the box, the algorithm and its main knobs, every
    other knob off its group's default, the workload and every measured difference, the SLO."""
    cfg = doc.config
    spec = _section(cfg, "spec")
    algo = str(spec.get("algorithm") or doc.trial.spec or "?")
    parts: list[str] = [str(_section(cfg, "hardware").get("name") or doc.trial.hardware or "?"), algo]
    if algo != "none":
        for key in ("budget", "topk", "window"):
            if spec.get(key) is not None:
                parts.append(f"{SHORT['spec.' + key]}{_fmt(spec[key])}")
    choices = choices_of(doc)
    knobs, measured = _diffs(doc, _defaults(tuple(sorted(choices.items()))))
    parts += knobs
    parts.append(str(_section(cfg, "workload").get("name") or "?"))
    parts += measured
    slo = _slo_part(cfg)
    if slo:
        parts.append(slo)
    return re.sub(r"[^\w.=,+@%:-]+", "_", "-".join(p for p in parts if p))[:200]


def short_name(doc: TrialResult) -> str:
    """The name without the box and the workload's name, which a view grouped by
    :func:`group_label` already shows (MLflow's run-name column: ``ddtree-b8-t4-w2048-blk2-mt32``);
    a file written before names came from the config keeps its own."""
    full = stored_name(doc)
    if not doc.trial.config_id:
        return full
    box = str(_section(doc.config, "hardware").get("name") or doc.trial.hardware or "")
    wl = str(_section(doc.config, "workload").get("name") or "")
    parts = full.split("-")
    if box and parts and parts[0] == box:
        parts = parts[1:]
    if wl and wl in parts:
        parts.remove(wl)
    return "-".join(parts) or full


def group_label(doc: TrialResult) -> str:
    """What makes configs comparable, in words (the report's groups, MLflow's grouping): the box and
    its layout, the model, the workload and its matrix, simulated or not, the objective."""
    from sweep.score import objective as score_objective

    cfg = doc.config
    hw, wl = _section(cfg, "hardware"), _section(cfg, "workload")
    layout = " ".join(f"{k}{hw[k]}" for k in ("tp", "ep", "dp") if hw.get(k) not in (None, 1))
    def listed(v: Any) -> str:
        return ",".join(_fmt(x) for x in v) if isinstance(v, (list, tuple)) else _fmt(v)

    matrix = f"ctx {listed(wl.get('contexts'))} x c {listed(wl.get('concurrency'))}, {wl.get('max_tokens')} tok"
    parts = [f"{hw.get('name') or doc.trial.hardware}" + (f" ({layout})" if layout else ""),
             str(_section(cfg, "model").get("name") or "?"), f"{wl.get('name') or '?'} {matrix}",
             score_objective.metric_name(score_objective.objective_of(doc))]
    return " · ".join(parts) + (" · simulated" if doc.simulated else "")


def group_id(doc: TrialResult) -> str:
    """A hash of the group key (:func:`sweep.score.speedup.baseline_key` and the objective)."""
    from sweep.score import objective as score_objective
    from sweep.score.speedup import baseline_key

    key = (baseline_key(doc.config, doc.simulated), score_objective.metric_name(score_objective.objective_of(doc)))
    return hashlib.sha256(json.dumps(key, default=str).encode()).hexdigest()[:12]


def names(docs: Sequence[TrialResult]) -> dict[str, str]:
    """Config id -> its one name, with a short id suffix where two configs' knobs read the same."""
    by_id: dict[str, str] = {}
    for doc in docs:
        cid = config_id(doc)
        if cid not in by_id:
            by_id[cid] = stored_name(doc)
    taken: dict[str, list[str]] = {}
    for cid, name in by_id.items():
        taken.setdefault(name, []).append(cid)
    out = {}
    for name, cids in taken.items():
        for cid in cids:
            out[cid] = name if len(cids) == 1 else f"{name}#{cid[:4]}"
    return out


def stored_name(doc: TrialResult) -> str:
    """The name a trial recorded (since names came from :func:`name_of`, or an older file's own), else
    computed. Two configs an older naming gave one name are told apart by :func:`names`."""
    name = doc.trial.name
    return name if name and name != "?" else name_of(doc)


# ------------------------------------------------------------------------------------------ pooling

_RUN_FIGURES = ("output_tok_s", "per_stream_tok_s", "goodput_tok_s")
_MEAN_FIGURES = ("ttft_ms_mean", "accept_len", "accept_rate", "slo_attainment", "goodput_req_s",
                 "prompt_tokens_mean")
_PCT_FIGURES = tuple(f"{m}_ms_p{q}" for m in ("ttft", "itl", "step", "tpot", "e2e") for q in (50, 90, 99))
_SUMS = ("requests", "errors", "completion_tokens", "duration_s")
MAX_LATENCIES = 256


def cell_key(cell: Cell) -> tuple[Any, ...]:
    """Cells of copies pool when they measured the same point the same way."""
    return (cell.context, cell.concurrency, cell.request_rate, cell.load_search, cell.cache or "unknown")


def _runs(cell: Cell, name: str) -> list[float]:
    """Each measurement of ``name`` in a cell: its repeats' values where kept, else its one value."""
    runs = cell.get(f"{name}_runs")
    if isinstance(runs, list) and runs and all(isinstance(v, (int, float)) for v in runs):
        return [float(v) for v in runs]
    value = cell.get(name)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value)):
        return [float(value)]
    return []


def _weighted(cells: Sequence[Cell], name: str) -> float | None:
    num = den = 0.0
    for c in cells:
        v = c.get(name)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v)):
            w = float(c.repeats or 1)
            num += w * float(v)
            den += w
    return num / den if den else None


def pool_cells(cells: Sequence[Cell]) -> Cell:
    """One cell from the same cell of several copies: every run kept, the mean and its interval over them."""
    if len(cells) == 1:
        return cells[0]
    out = Cell.from_dict(cells[-1].to_dict())
    runs: dict[str, list[float]] = {}
    for name in _RUN_FIGURES:
        values = [v for c in cells for v in _runs(c, name)]
        runs[name] = values
        if values:
            setattr(out, name, statistics.fmean(values))
            ci = interval(values)
            setattr(out, f"{name}_ci", [ci[0], ci[1]] if ci else None)
    out.output_tok_s_runs = runs["output_tok_s"] or None
    out.repeats = len(runs["output_tok_s"]) or sum(int(c.repeats or 1) for c in cells)
    for name in _MEAN_FIGURES + _PCT_FIGURES:
        if name in {f.name for f in Cell._fields()}:
            setattr(out, name, _weighted(cells, name))
    for name in _SUMS:
        values = [c.get(name) for c in cells if isinstance(c.get(name), (int, float))]
        if values:
            setattr(out, name, type(values[0])(sum(values)) if name != "duration_s" else float(sum(values)))
    kinds: dict[str, int] = {}
    for c in cells:
        for k, n in (c.error_kinds or {}).items():
            kinds[k] = kinds.get(k, 0) + int(n)
    out.error_kinds = kinds
    rows = [r for c in cells for r in (c.latencies or [])]
    if rows:
        step = max(1, math.ceil(len(rows) / MAX_LATENCIES))
        out.latencies = rows[::step][:MAX_LATENCIES]
    loads = [float(c.load_avg) for c in cells if isinstance(c.load_avg, (int, float))]
    out.load_avg = max(loads) if loads else None
    accept = [v for c in cells for v in ([c.accept_len] if c.accept_len is not None else [])]
    if len(accept) > 1:
        ci = interval(accept)
        out.accept_len_ci = [ci[0], ci[1]] if ci else None
    return out


@dataclass
class Pooled:
    """One config: its id, its name, its copies (newest last) and the document that stands for them."""

    config_id: str
    name: str
    copies: list[TrialResult] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    doc: TrialResult | None = None
    failed_copies: int = 0

    @property
    def n(self) -> int:
        return len(self.copies)


def _pooled_doc(copies: Sequence[TrialResult], name: str, cid: str) -> TrialResult:
    ok = [d for d in copies if d.ok]
    if not ok:
        newest = copies[-1]
        doc = TrialResult.from_dict(newest.to_dict())
        doc.trial.name = name
        return doc
    # the copy that stands for the config: the newest of those that measured the most cells (a copy
    # that measured fewer -- sweep.decide's, with workload.cells -- pools into those cells only and
    # never becomes the config's overrides, headline speedup or "run the best again")
    def whole(d: TrialResult) -> tuple[bool, int]:
        partial = any(str(o).lstrip("+~").startswith("workload.cells=") for o in d.trial.overrides or [])
        return (not partial, len(d.cells))

    most = max(whole(d) for d in ok)
    newest = [d for d in ok if whole(d) == most][-1]
    if len(ok) == 1:
        doc = TrialResult.from_dict(newest.to_dict())
        doc.trial.name = name
        return doc
    from sweep.score import metrics as score

    doc = TrialResult.from_dict(newest.to_dict())
    doc.trial.name = name
    grouped: dict[tuple[Any, ...], list[Cell]] = {}
    order: list[tuple[Any, ...]] = []
    for d in ok:
        for c in d.cells:
            key = cell_key(c)
            if key not in grouped:
                order.append(key)
            grouped.setdefault(key, []).append(c)
    # one cache state per point: the newest copy's (repeats that met another cache are not its repeats)
    newest_state = {cell_key(c)[:-1]: cell_key(c)[-1] for d in ok for c in d.cells}
    kept_keys = [k for k in order if newest_state.get(k[:-1]) == k[-1]]
    dropped = sum(len(grouped[k]) for k in order if k not in kept_keys)
    doc.cells = [pool_cells(grouped[k]) for k in kept_keys]
    if dropped:
        doc.trial.extra["cells_not_pooled"] = dropped
    coding = [d.coding for d in ok if d.coding is not None and d.coding.total]
    if coding:
        passed, total = sum(int(c.passed or 0) for c in coding), sum(int(c.total or 0) for c in coding)
        doc.coding = Coding.from_dict({**coding[-1].to_dict(), "passed": passed, "total": total,
                                       "pass_rate": passed / total if total else None})
    fresh = score.metrics(doc)
    kept = doc.metrics
    doc.metrics = Metrics.from_dict({**kept.to_dict(), **{k: v for k, v in fresh.to_dict().items()
                                                          if k not in ("speedup_vs_baseline", "greedy_identical",
                                                                       "startup_s")}})
    starts = [d.metrics.startup_s for d in ok if d.metrics.startup_s is not None]
    doc.metrics.startup_s = statistics.fmean(starts) if starts else kept.startup_s
    identical = [d.identity.greedy_identical for d in ok
                 if d.identity is not None and d.identity.greedy_identical is not None]
    if identical:
        doc.metrics.greedy_identical = min(identical)  # one copy that changed an answer is enough
    doc.trial.extra["copies"] = len(ok)
    return doc


def pool(docs: Sequence[TrialResult], sources: Sequence[str] | None = None) -> list[Pooled]:
    """Documents grouped by config id (first appearance order), each group's copies pooled."""
    groups: dict[str, Pooled] = {}
    named = names(docs)
    order = sorted(range(len(docs)), key=lambda i: (docs[i].trial.finished or docs[i].trial.started or ""))
    for i in order:
        doc = docs[i]
        cid = config_id(doc)
        entry = groups.setdefault(cid, Pooled(cid, named[cid]))
        entry.copies.append(doc)
        entry.sources.append(sources[i] if sources else "")
    first = {config_id(d): i for i, d in reversed(list(enumerate(docs)))}
    out = sorted(groups.values(), key=lambda p: first[p.config_id])
    for p in out:
        p.failed_copies = sum(1 for d in p.copies if not d.ok)
        p.doc = _pooled_doc(p.copies, p.name, p.config_id)
    return out
