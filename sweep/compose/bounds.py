"""Every config key's type and bounds, in one table (:data:`RULES`).

Why one table: a key checked in one place and not another is how a
``launcher.keep_server=maybe`` became ``True``, ``model.trust_remote_code=no``
reached the command line as ``--trust-remote-code no`` and
``workload.concurrency=[100000000]`` was accepted. Here each key has exactly
one rule -- its kind (integer, number, boolean, enum, host, path, systemd unit
name ...), its range and what the number means -- and the same rule checks a
composed config (:func:`check_config`), a value the typed config reads
(:func:`get`), a ``launcher.hosts`` entry and every value of an Optuna search
space before the study starts (:func:`check`). Rules across keys (``spec.topk``
<= ``spec.budget``, ``hardware.tp`` <= ``hardware.num_gpus``) stay with the
builders in :mod:`sweep.compose.config`.

Upper bounds are far beyond any real box and small enough to catch a typo
(a zero too many) before a server starts; ``docs/config-keys.md`` is generated
from this table (:func:`markdown`). A key ending in ``.*`` gives the rule of
every child of that mapping; a ``mapping`` rule leaves its subtree free-form
(the server's flag mapping, a spec's render blocks): those are rendered by
:mod:`sweep.compose.render` into argv words, never into a shell.
"""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from sweep.compose.checks import no_control_chars
from sweep.errors import ConfigError

# ---------------------------------------------------------------------------- maxima
MAX_GPUS = 1024            # GPUs in one box
MAX_CONTEXT = 10_485_760   # tokens: the longest context any served model has (10M)
MAX_SPEC = 1024            # draft tokens / tree nodes / steps per verify: real values are <= 64
MAX_CONCURRENCY = 100_000  # in-flight requests of one cell (the harness caps at its file limit)
MAX_REQUESTS = 1_000_000   # requests of one cell: hours of load at any real rate
MAX_SECONDS = 86_400       # one day
MAX_PORT = 65_535
MAX_SEED = 2**32 - 1

SIM_FAULTS = ("cuda_graph", "oom", "hang", "missing_module", "python_headers")  # sweep/sim/flags.yaml
CODING_EVALS = ("five", "humaneval", "off")
SANDBOX_MECHANISMS = ("auto", "bwrap", "fallback")   # docs/sandbox.md
OBJECTIVE_METRICS = ("tok_s_lowc", "tok_s_peak", "cell", "weighted_mean", "tok_s_c1")  # tok_s_c1: old name
LAUNCHERS = ("local", "ssh")
LAUNCH_MODES = ("systemd", "process")
HOST_KEY_POLICIES = ("reject", "accept-new")
ENDPOINTS = ("completions", "chat")                  # server.endpoint (docs/ARCHITECTURE.md)
PROMPT_SOURCES = ("text", "random_ids", "dataset")  # workload.prompt_source


@dataclass(frozen=True, slots=True)
class Rule:
    """One key: its kind, its range (numbers, list items), its choices (enums)."""

    kind: str
    lo: float | None = None
    hi: float | None = None
    choices: tuple[Any, ...] = ()
    required: bool = False
    what: str = ""  # what a number counts, shown in messages and docs/config-keys.md


def _int(lo: float, hi: float, what: str = "", required: bool = False) -> Rule:
    return Rule("int", lo, hi, required=required, what=what)


def _num(lo: float, hi: float, what: str = "", required: bool = False) -> Rule:
    return Rule("float", lo, hi, required=required, what=what)


def _enum(*choices: Any, required: bool = False) -> Rule:
    return Rule("enum", choices=choices, required=required)


BOOL = Rule("bool")
NAME = Rule("name")
REQUIRED_NAME = Rule("name", required=True)
PATH = Rule("path")
MAPPING = Rule("mapping")
TEXT = Rule("str")

RULES: dict[str, Rule] = {
    # -- top level
    "dry_run": BOOL,
    "baseline.auto_run": BOOL,
    "results.search_dirs": Rule("paths"),
    "resume.rerun_failed": BOOL,
    "resume.deterministic_failures": Rule("strs"),
    "secret_names": Rule("strs"),
    # -- hardware
    "hardware.name": REQUIRED_NAME,
    "hardware.gpu": TEXT,
    "hardware.arch": Rule("name", required=True),
    "hardware.interconnect": TEXT,
    "hardware.num_gpus": _int(0, MAX_GPUS, "GPUs; 0: a CPU box", required=True),
    "hardware.memory_gb": _num(0, 100_000, "GB per GPU", required=True),
    "hardware.tp": _int(1, MAX_GPUS, "GPUs", required=True),
    "hardware.ep": _int(1, MAX_GPUS, "GPUs", required=True),
    "hardware.dp": _int(1, MAX_GPUS, "GPUs", required=True),
    "hardware.cost_per_hour": _num(0, 1_000_000, "USD per hour"),
    "hardware.perf": MAPPING,
    "hardware.perf.mem_bw_tbs": _num(0, 1_000, "TB/s per GPU"),
    "hardware.perf.fp8_tflops": _num(0, 1_000_000, "TFLOP/s per GPU"),
    "hardware.perf.link_bw_gbs": _num(0, 100_000, "GB/s per direction"),
    "hardware.perf.link_latency_us": _num(0, 1_000_000, "microseconds"),
    "hardware.perf.nvlink": BOOL,
    "hardware.perf.calibration": PATH,
    "hardware.quirks": MAPPING,
    "hardware.quirks.cuda_graph_max_budget": _int(0, MAX_SPEC, "draft tokens"),
    "hardware.quirks.rules": Rule("list"),  # its entries: sweep/compose/constraints.py
    # -- spec
    "spec.algorithm": REQUIRED_NAME,
    "spec.budget": _int(1, MAX_SPEC, "draft tokens per step"),
    "spec.topk": _int(1, MAX_SPEC, "branches per node"),
    "spec.window": _int(1, MAX_CONTEXT, "tokens"),
    "spec.block": _int(1, MAX_SPEC, "tokens per draft block"),
    "spec.num_steps": _int(1, MAX_SPEC, "draft steps"),
    "spec.draft_family": NAME,
    "spec.draft_n_min": _int(0, MAX_SPEC, "draft tokens"),
    "spec.draft_p_min": _num(0, 1, "probability"),
    "spec.ngram_type": NAME,
    "spec.ngram_n_min": _int(1, MAX_SPEC, "tokens"),
    "spec.ngram_n_match": _int(1, MAX_SPEC, "tokens"),
    "spec.synth_len": _num(1, MAX_SPEC + 1, "tokens per step"),
    "spec.synth_rates": Rule("floats", 0, 1, what="probabilities"),
    "spec.render": MAPPING,
    "spec.constraints": Rule("list"),  # expressions: sweep/compose/constraints.py
    # -- model
    "model.name": REQUIRED_NAME,
    "model.path": PATH,
    "model.served_name": Rule("str", required=True),
    "model.context_length": _int(1, MAX_CONTEXT, "tokens", required=True),
    "model.trust_remote_code": BOOL,
    "model.draft_paths": MAPPING,
    "model.draft_paths.*": PATH,
    "model.arch": MAPPING,
    "model.arch.*": Rule("figure"),
    "model.install": MAPPING,
    # -- server
    "server.name": REQUIRED_NAME,
    "server.flavor": REQUIRED_NAME,
    "server.simulated": BOOL,
    "server.executable": Rule("strs", required=True),
    "server.host": Rule("host", required=True),
    "server.port": _int(1, MAX_PORT, "TCP port", required=True),
    "server.disable_cuda_graph": BOOL,
    "server.skip_server_warmup": BOOL,
    "server.enable_metrics": BOOL,
    "server.kv_unified": BOOL,
    "server.health_path": Rule("url_path"),
    "server.info_paths": Rule("url_paths"),
    "server.api_key": TEXT,
    "server.extra_args": Rule("strs"),
    "server.extra_env": MAPPING,
    "server.secret_flags": Rule("strs"),
    "server.args": MAPPING,
    "server.env": MAPPING,
    "server.sim_args": MAPPING,
    "server.request_extras": MAPPING,
    "server.endpoint": _enum(*ENDPOINTS),
    "server.tokenize": MAPPING,  # its fields: sweep/compose/bench_checks.py
    "server.continuous_usage": BOOL,
    "server.acceptance": MAPPING,
    "server.install": MAPPING,
    "server.group_defaults": MAPPING,
    "server.decode_log_interval": _int(1, MAX_REQUESTS, "decode steps"),
    "server.mem_fraction_static": _num(0, 1, "fraction of GPU memory"),
    "server.max_running_requests": _int(1, MAX_CONCURRENCY, "requests"),
    "server.threads": _int(1, 4096, "CPU threads"),
    "server.parallel": _int(1, 4096, "slots"),
    "server.seed": _int(0, MAX_SEED, "seed"),
    "server.sim": MAPPING,
    "server.sim.load_seconds": _num(0, 3600, "seconds"),
    "server.sim.seed": _int(0, MAX_SEED, "seed"),
    "server.sim.time_scale": _num(0, 1000, "x real time"),
    "server.sim.tokenizer": PATH,
    "server.sim.noise": _num(0, 1, "fraction of step time"),
    "server.sim.faults": MAPPING,
    "server.sim.faults.startup": _enum(None, *SIM_FAULTS),
    "server.sim.faults.crash_after_requests": _int(1, MAX_REQUESTS, "requests"),
    "server.sim.faults.wrong_answer_rate": _num(0, 1, "fraction"),
    "server.sim.faults.slow_start_seconds": _num(0, 3600, "seconds"),
    # -- launcher (both)
    "launcher.name": _enum(*LAUNCHERS, required=True),
    "launcher.ready_timeout_s": _num(0, MAX_SECONDS, "seconds", required=True),
    "launcher.poll_interval_s": _num(0.01, 3600, "seconds", required=True),
    "launcher.poll_max_s": _num(0.01, 3600, "seconds", required=True),
    "launcher.stop_grace_s": _num(0, 3600, "seconds", required=True),
    "launcher.keep_server": Rule("bool", required=True),
    "launcher.log_tail_lines": _int(1, 100_000, "lines", required=True),
    "launcher.reap_grace_s": _num(0, 60, "seconds"),
    "launcher.hosts": Rule("list"),
    # -- launcher=local
    "launcher.state_dir": PATH,
    # -- launcher=ssh
    "launcher.host": Rule("ssh_host"),
    "launcher.port": _int(1, MAX_PORT, "TCP port"),
    "launcher.user": Rule("user"),
    "launcher.key_filename": Rule("paths"),
    "launcher.gateway": Rule("gateway"),
    "launcher.connect_timeout": _num(0.1, 3600, "seconds"),
    "launcher.known_hosts": PATH,
    "launcher.host_key_policy": _enum(*HOST_KEY_POLICIES),
    "launcher.allow_agent": BOOL,
    "launcher.mode": _enum(*LAUNCH_MODES),
    "launcher.unit": Rule("unit"),
    "launcher.unit_dir": Rule("abspath"),
    "launcher.dropin": BOOL,
    "launcher.sudo": BOOL,
    "launcher.workdir": Rule("remote_dir"),
    "launcher.port_forward": BOOL,
    "launcher.preflight": BOOL,
    "launcher.min_free_gb": _num(0, 1_000_000, "GB"),
    "launcher.remote_lease_s": _num(0, 3600, "seconds"),
    # -- workload
    "workload.name": NAME,
    "workload.contexts": Rule("ints", 1, MAX_CONTEXT, required=True, what="prompt tokens"),
    "workload.concurrency": Rule("ints", 1, MAX_CONCURRENCY, required=True, what="in-flight requests"),
    "workload.max_tokens": _int(1, MAX_CONTEXT, "new tokens per request", required=True),
    "workload.requests_per_cell": _int(1, MAX_REQUESTS, "requests"),
    "workload.min_requests": _int(1, MAX_REQUESTS, "requests"),
    "workload.warmup_requests": _int(0, MAX_REQUESTS, "requests"),
    "workload.request_rate": _num(0, 1_000_000, "requests/s; null: closed loop"),
    "workload.temperature": _num(0, 2, "sampling temperature"),
    "workload.ignore_eos": BOOL,
    "workload.flush_cache": BOOL,
    "workload.request_timeout_s": _num(1, MAX_SECONDS, "seconds"),
    "workload.max_error_rate": _num(0, 1, "failed / sent requests"),
    "workload.prompt_source": _enum(*PROMPT_SOURCES),
    "workload.dataset_path": PATH,
    "workload.seed": _int(0, MAX_SEED, "seed"),
    "workload.repeats": _int(1, 100, "measurements per cell"),
    "workload.coding": _enum(*CODING_EVALS, False, None),
    "workload.coding_max_tokens": _int(1, MAX_CONTEXT, "new tokens"),
    "workload.humaneval_limit": _int(1, 164, "problems (HumanEval has 164)"),
    "workload.sandbox": MAPPING,
    "workload.sandbox.timeout_s": _num(0.1, 3600, "seconds"),
    "workload.sandbox.memory_mb": _int(16, 1_048_576, "MB"),
    "workload.sandbox.mechanism": _enum(*SANDBOX_MECHANISMS),
    # -- mlflow
    "mlflow.enabled": Rule("bool", required=True),
    "mlflow.tracking_uri": Rule("uri"),
    "mlflow.experiment": Rule("str", required=True),
    "mlflow.timeout_s": _num(0.5, 600, "seconds"),
    # -- objective
    "objective.metric": _enum(*OBJECTIVE_METRICS, required=True),
    "objective.context": _int(1, MAX_CONTEXT, "prompt tokens"),
    "objective.concurrency": _int(1, MAX_CONCURRENCY, "in-flight requests"),
    "objective.weights": MAPPING,
    "objective.weights.*": _num(0, 1_000_000, "weight"),
    "objective.constraints": MAPPING,
    "objective.constraints.coding_pass_rate_min": _num(0, 1, "fraction"),
    "objective.constraints.max_errors": _num(0, MAX_REQUESTS, "failed requests"),
    "objective.constraints.ttft_ms_p99_max": _num(0, MAX_SECONDS * 1000, "ms"),
}

# ---------------------------------------------------------------------------- kinds

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")
_ALIAS = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}$")
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\$?$")
# systemd.unit(5): letters, digits, ":-_.\", one "@" for templates; at most 255 characters.
_UNIT = re.compile(r"^[A-Za-z0-9:_\\][A-Za-z0-9:_.\\-]*(@[A-Za-z0-9:_.\\-]*)?$")
_URL_PATH = re.compile(r"^/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$")


def is_host(text: str) -> bool:
    """An IP address (v4, v6) or an RFC 1123 host name."""
    try:
        ipaddress.ip_address(text[1:-1] if text.startswith("[") and text.endswith("]") else text)
        return True
    except ValueError:
        pass
    name = text[:-1] if text.endswith(".") else text
    return 0 < len(name) <= 253 and all(_LABEL.match(label) for label in name.split("."))


def _type_name(value: Any) -> str:
    """The value as a message shows it: its repr (cut at 80 characters), or the container type."""
    if isinstance(value, (Mapping, list, tuple)):
        return "a mapping" if isinstance(value, Mapping) else "a list"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _fmt(x: float) -> str:
    """1000000, not 1e+06; 0.5 stays 0.5."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e18 else f"{x:g}"


def _range(key: str, value: float, rule: Rule) -> None:
    lo, hi = rule.lo, rule.hi
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        if hi is None:
            rng = f">= {_fmt(lo or 0)}"
        else:
            rng = f"in [{_fmt(lo)}, {_fmt(hi)}]" if lo is not None else f"<= {_fmt(hi)}"
        suffix = f" ({rule.what})" if rule.what else ""
        raise ConfigError(key, f"must be {rng}{suffix}, got {_fmt(value)}")


def _as_int(key: str, value: Any, rule: Rule) -> int:
    if isinstance(value, bool):
        raise ConfigError(key, f"must be an integer, got {_type_name(value)}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d{1,30}\s*", value):
        value = int(value)
    if not isinstance(value, int):
        raise ConfigError(key, f"must be an integer, got {_type_name(value)}")
    _range(key, value, rule)
    return value


def _as_float(key: str, value: Any, rule: Rule) -> float:
    if isinstance(value, bool) or isinstance(value, (Mapping, list, tuple)):
        raise ConfigError(key, f"must be a number, got {_type_name(value)}")
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise ConfigError(key, f"must be a number, got {_type_name(value)}") from None
    if not math.isfinite(f):
        raise ConfigError(key, f"must be a finite number, got {_type_name(value)}")
    _range(key, f, rule)
    return f


def _as_bool(key: str, value: Any, rule: Rule) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(key, f"must be true or false, got {_type_name(value)}")
    return value


def _as_enum(key: str, value: Any, rule: Rule) -> Any:
    if any(value is c or (type(value) is type(c) and value == c) for c in rule.choices):
        return value
    shown = ", ".join("null" if c is None else str(c).lower() if isinstance(c, bool) else str(c)
                      for c in rule.choices)
    raise ConfigError(key, f"must be one of {shown}, got {_type_name(value)}")


def _as_text(key: str, value: Any, rule: Rule) -> str:
    if isinstance(value, (Mapping, list, tuple)) or isinstance(value, bool):
        raise ConfigError(key, f"must be a string, got {_type_name(value)}")
    text = str(value)
    no_control_chars(key, text)
    if len(text) > 4096:
        raise ConfigError(key, f"must be at most 4096 characters, got {len(text)}")
    return text


def _matching(pattern: re.Pattern[str], allowed: str) -> Callable[[str, Any, Rule], str]:
    def check(key: str, value: Any, rule: Rule) -> str:
        text = _as_text(key, value, rule)
        if not pattern.match(text):
            raise ConfigError(key, f"must be {allowed}, got {_type_name(text)}")
        return text
    return check


def _as_host(key: str, value: Any, rule: Rule) -> str:
    text = _as_text(key, value, rule)
    if not is_host(text):
        raise ConfigError(key, f"must be an IP address or a host name (letters, digits, '-' and "
                          f"'.', RFC 1123), got {_type_name(text)}")
    return text


def _as_ssh_host(key: str, value: Any, rule: Rule) -> str:
    text = _as_text(key, value, rule)
    if not (is_host(text) or _ALIAS.match(text)):
        raise ConfigError(key, "must be a host name, an IP address or a ~/.ssh/config alias "
                          f"(letters, digits, '_', '-', '.'), got {_type_name(text)}")
    return text


def _as_gateway(key: str, value: Any, rule: Rule) -> str:
    text = _as_text(key, value, rule)
    for hop in [h.strip() for h in text.split(",")]:
        user, _, rest = hop.rpartition("@")
        host, port = rest, ""
        if rest.count(":") == 1:
            host, port = rest.split(":")
        ok = (not user or _USER.match(user)) and (is_host(host) or _ALIAS.match(host)) \
            and (not port or (port.isdigit() and 0 < int(port) <= MAX_PORT))
        if not ok:
            raise ConfigError(key, "must be [user@]host[:port] hops separated by commas, "
                              f"got {hop!r}")
    return text


def _as_unit(key: str, value: Any, rule: Rule) -> str:
    text = _as_text(key, value, rule)
    full = text if text.endswith(".service") else text + ".service"
    stem = full[:-len(".service")]
    if not stem or len(full) > 255 or not _UNIT.match(stem):
        raise ConfigError(key, "must be a systemd unit name: letters, digits, ':', '_', '.', '\\', "
                          "'-' and one '@', not starting with '-' or '.' (systemd.unit(5)), "
                          f"got {_type_name(text)}")
    return text


def _as_path(key: str, value: Any, rule: Rule) -> str:
    text = _as_text(key, value, rule)
    if not text.strip():
        raise ConfigError(key, "must be a path, got an empty string")
    return text


def _as_abspath(key: str, value: Any, rule: Rule) -> str:
    text = _as_path(key, value, rule)
    if not text.startswith("/") or ".." in text.split("/"):
        raise ConfigError(key, f"must be an absolute path without '..', got {_type_name(text)}")
    return text


def _as_remote_dir(key: str, value: Any, rule: Rule) -> str:
    text = _as_path(key, value, rule)
    if not (text.startswith("/") or text == "~" or text.startswith("~/")):
        raise ConfigError(key, f"must be an absolute path or ~/<dir> on the box, got {_type_name(text)}")
    return text


def _as_uri(key: str, value: Any, rule: Rule) -> str:
    text = _as_text(key, value, rule)
    if any(c.isspace() for c in text):
        raise ConfigError(key, f"must be a URI or path without spaces, got {_type_name(text)}")
    return text


def _list_of(item: Callable[[str, Any, Rule], Any], what: str,
             scalar_ok: bool = True) -> Callable[[str, Any, Rule], tuple[Any, ...]]:
    def check(key: str, value: Any, rule: Rule) -> tuple[Any, ...]:
        if scalar_ok and not isinstance(value, (list, tuple, Mapping)):
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(key, f"must be a list of {what}, got {_type_name(value)}")
        if rule.required and not value:
            raise ConfigError(key, f"must be a non-empty list of {what}")
        if len(value) > 10_000:
            raise ConfigError(key, f"must have at most 10000 items, got {len(value)}")
        return tuple(item(f"{key}[{i}]", v, rule) for i, v in enumerate(value))
    return check


def _as_words(key: str, value: Any, rule: Rule) -> tuple[str, ...]:
    """A list of strings; one string is split on whitespace (``server.extra_args='--a --b'``)."""
    return _list_of(_as_text, "strings")(key, value.split() if isinstance(value, str) else value, rule)


def _as_ints(key: str, value: Any, rule: Rule) -> tuple[int, ...]:
    items = _list_of(_as_int, "integers")(key, value, rule)
    if not items:
        raise ConfigError(key, "must be a non-empty list of integers")
    return items


def _as_mapping(key: str, value: Any, rule: Rule) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(key, f"must be a mapping, got {_type_name(value)}")
    return value


def _as_list(key: str, value: Any, rule: Rule) -> Any:
    if not isinstance(value, (list, tuple)):
        raise ConfigError(key, f"must be a list, got {_type_name(value)}")
    return value


def _as_figure(key: str, value: Any, rule: Rule) -> Any:
    """A figure of the simulator's model: a non-negative number, a flag, a word, or a group of them."""
    if isinstance(value, Mapping):
        return {k: _as_figure(f"{key}.{k}", v, rule) for k, v in value.items()}
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return _as_float(key, value, Rule("float", 0, 1e15))
    return _matching(_NAME, "a number, true/false or a word")(key, value, rule)


KINDS: dict[str, Callable[[str, Any, Rule], Any]] = {
    "int": _as_int, "float": _as_float, "bool": _as_bool, "enum": _as_enum, "str": _as_text,
    "name": _matching(_NAME, "a name (letters, digits, '.', '_', '+', '-')"),
    "user": _matching(_USER, "a user name (letters, digits, '_', '.', '-')"),
    "url_path": _matching(_URL_PATH, "a URL path starting with '/'"),
    "url_paths": _list_of(_matching(_URL_PATH, "a URL path starting with '/'"), "URL paths"),
    "host": _as_host, "ssh_host": _as_ssh_host, "gateway": _as_gateway, "unit": _as_unit,
    "path": _as_path, "abspath": _as_abspath, "remote_dir": _as_remote_dir, "uri": _as_uri,
    "paths": _list_of(_as_path, "paths"), "strs": _as_words,
    "ints": _as_ints, "floats": _list_of(_as_float, "numbers", scalar_ok=False),
    "mapping": _as_mapping, "list": _as_list, "figure": _as_figure,
}


# ---------------------------------------------------------------------------- API


# An empty string for a path or a URI means "not set" (``launcher.state_dir=``).
_EMPTY_IS_UNSET = ("path", "paths", "uri")


def rule_for(key: str) -> Rule | None:
    """The rule of ``key`` (``model.draft_paths.dflash`` falls back to ``model.draft_paths.*``)."""
    if key in RULES:
        return RULES[key]
    parent = key.rsplit(".", 1)[0] if "." in key else ""
    return RULES.get(parent + ".*") if parent else None


def check(key: str, value: Any, *, rule_key: str | None = None) -> Any:
    """``value`` checked and typed by the rule of ``rule_key`` (default ``key``); messages name ``key``.

    A key without a rule is returned unchanged; ``None`` is "not set" (an
    error only for a required key).
    """
    rule = rule_for(rule_key or key)
    if rule is None:
        return value
    if value == "" and rule.kind in _EMPTY_IS_UNSET:
        value = None
    if value is None and rule.kind != "enum":
        if rule.required:
            raise ConfigError(key, "is required" + (f" ({rule.what})" if rule.what else ""))
        return None
    return KINDS[rule.kind](key, value, rule)


def get(node: Mapping[str, Any], path: str, name: str, default: Any = None) -> Any:
    """``node[name]`` (the group ``path``) checked by its rule; ``default`` when not set."""
    key = f"{path}.{name}"
    value = node.get(name) if isinstance(node, Mapping) else None
    if value is None and key in RULES and not RULES[key].required and RULES[key].kind != "enum":
        return default
    out = check(key, value)
    return default if out is None else out


def _present(cfg: Mapping[str, Any], key: str) -> Iterator[tuple[str, Any]]:
    """(full key, value) of ``key`` in ``cfg``: one pair, the children of a ``.*`` key, or none."""
    parts = key.split(".")
    node: Any = cfg
    for i, part in enumerate(parts):
        if part == "*":
            if isinstance(node, Mapping):
                prefix = ".".join(parts[:i])
                yield from ((f"{prefix}.{k}", v) for k, v in node.items())
            return
        if not isinstance(node, Mapping) or part not in node:
            return
        node = node[part]
    yield key, node


def check_config(cfg: Mapping[str, Any]) -> None:
    """Every key of a resolved composed config that has a rule, checked (the first error raises).

    Required keys are checked by the builders that read them (a key of
    launcher=ssh is not missing from launcher=local).
    """
    for key, rule in RULES.items():
        for full, value in _present(cfg, key):
            if value is None and rule.kind != "enum":
                continue
            check(full, value, rule_key=key)


def markdown() -> str:
    """docs/config-keys.md: the table, generated (a test keeps the committed file in step)."""
    lines = ["# Config keys: types and bounds", "",
             "Generated from `sweep/compose/bounds.py` (`RULES`); regenerate with",
             "`python -c 'from sweep.compose.bounds import markdown; print(markdown(), end=\"\")' "
             "> docs/config-keys.md`.", "",
             "Every value is checked before anything starts: a wrong one is one line",
             "`error: <key>: <what is allowed>`, exit status 2. Keys across groups",
             "(`spec.topk` <= `spec.budget`, `hardware.tp` <= `hardware.num_gpus`, contexts +",
             "`max_tokens` <= `model.context_length`) are checked by `sweep/compose/config.py`.", "",
             "| key | kind | allowed | what |", "|---|---|---|---|"]
    for key, rule in RULES.items():
        if rule.kind in ("int", "float", "ints", "floats"):
            allowed = f"{_fmt(rule.lo)} .. {_fmt(rule.hi)}" if rule.lo is not None and rule.hi is not None else ""
        elif rule.kind == "enum":
            allowed = ", ".join("null" if c is None else str(c).lower() if isinstance(c, bool) else str(c)
                                for c in rule.choices)
        else:
            allowed = ""
        kind = rule.kind + (", required" if rule.required else "")
        lines.append(f"| `{key}` | {kind} | {allowed} | {rule.what} |")
    return "\n".join(lines) + "\n"
