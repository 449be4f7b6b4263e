"""``launcher.hosts``: a pool of boxes, interpreted once (docs/parallel.md).

Each entry is a mapping that overrides keys of the launcher group for one box
(``{host: gpu-b, user: ops}``, ``{server_port: 31002}``), plus ``label`` (the
box's name in logs; derived when absent) and ``overrides`` (extra overrides
for that box only). :func:`pool_hosts` checks the entries and turns each into
the overrides a worker process for that box is started with; the config
check (:mod:`sweep.compose.config`) and the Optuna sweeper's pool both call it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from sweep.compose.bounds import check
from sweep.compose.keys import LAUNCH_MODES
from sweep.compose.checks import no_control_chars
from sweep.errors import ConfigError
from sweep.launch import BACKENDS

__all__ = ["LAUNCH_MODES", "PoolHost", "check_hosts", "hydra_value", "pool_hosts"]
ENTRY_KEYS = ("label", "server_port", "overrides")  # besides the launcher's own keys
KEY_MAP = {"server_port": "server.port"}  # entry keys that set another config key


@dataclass(frozen=True, slots=True)
class PoolHost:
    label: str
    entry: dict[str, Any]
    overrides: list[str]


def hydra_value(value: Any) -> str:
    """A Python value as a Hydra override value (strings quoted, so any text survives)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    # Hydra's quoted string: escape backslashes that precede a quote or the end, and
    # the quote itself; "${" would start an interpolation.
    text = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, text)
    text = text.replace("'", "\\'").replace("${", "\\${")
    return f"'{text}'"


def _label(i: int, entry: Mapping[str, Any]) -> str:
    if entry.get("label"):
        return str(entry["label"])
    host = entry.get("host")
    if host:
        label = str(host) + (f":{entry['port']}" if entry.get("port") is not None else "")
        if entry.get("server_port") is not None:
            label += f"/{entry['server_port']}"
        return label
    if entry.get("server_port") is not None:
        return f"local:{entry['server_port']}"
    return f"host{i}"


def check_hosts(node: Mapping[str, Any], name: str, path: str = "launcher.hosts") -> None:
    """Every entry of ``node["hosts"]`` is a setting of launcher ``name`` (inherited when
    absent) or label / server_port / overrides; one box per entry; one line per error."""
    hosts = node.get("hosts")
    if hosts is None:
        return
    if not isinstance(hosts, (list, tuple)):
        raise ConfigError(path, f"must be a list of mappings, one per box, got {hosts!r}")
    allowed = sorted((set(node) - {"name", "hosts"}) | set(ENTRY_KEYS))
    labels: set[str] = set()
    boxes: set[tuple[Any, Any]] = set()
    for i, entry in enumerate(hosts):
        key = f"{path}[{i}]"
        if not isinstance(entry, Mapping):
            raise ConfigError(key, "must be a mapping such as {server_port: 31001} or "
                              f"{{host: gpu-a}}, got {entry!r}")
        for k, v in entry.items():
            if k not in allowed:
                raise ConfigError(f"{key}.{k}", f"is not a launcher={name} setting; allowed: "
                                  f"{', '.join(allowed)}")
            for text in (v if isinstance(v, (list, tuple)) else [v]):
                if isinstance(text, str):
                    no_control_chars(f"{key}.{k}", text)
            if k not in ENTRY_KEYS and v is not None:
                check(f"{key}.{k}", v, rule_key=f"launcher.{k}")  # the launcher key's own rule
        merged = {**node, **entry, "hosts": None}
        remote = BACKENDS[name].remote  # the box is launcher.host (sweep/launch.py)
        if remote:
            if merged.get("mode") not in LAUNCH_MODES:
                raise ConfigError(f"{key}.mode", f"must be one of {', '.join(LAUNCH_MODES)}")
            check(f"{key}.port", merged.get("port"), rule_key="launcher.port")
            if not merged.get("host"):
                raise ConfigError(f"{key}.host", "is required (set it in the entry or launcher.host)")
        server_port = check(f"{key}.server_port", entry.get("server_port"), rule_key="server.port") \
            if entry.get("server_port") is not None else None
        extra = entry.get("overrides")
        if extra is not None and (not isinstance(extra, (list, tuple))
                                  or not all(isinstance(o, str) for o in extra)):
            raise ConfigError(f"{key}.overrides", f"must be a list of override strings, got {extra!r}")
        box = (merged.get("host") if remote else "this machine", server_port)
        if box in boxes:
            raise ConfigError(key, f"the same box and server port as an earlier entry ({box[0]}, "
                              f"server_port {server_port or 'inherited'}): give each entry on one "
                              "box its own server_port")
        boxes.add(box)
        label = entry.get("label")
        if label is not None:
            if str(label) in labels:
                raise ConfigError(f"{key}.label", f"{label!r} is used by an earlier entry")
            labels.add(str(label))


def pool_hosts(hosts: Any, *, parent: str = "launcher",
               key_map: Mapping[str, str] | None = None) -> list[PoolHost]:
    """One :class:`PoolHost` per entry (empty: no pool): its label and the overrides that
    start its worker -- each entry key K sets ``<parent>.K`` unless ``key_map`` maps it
    (``server_port`` -> ``server.port``); ``overrides`` are passed as they are."""
    if not hosts:
        return []
    if not isinstance(hosts, Sequence) or isinstance(hosts, str) \
            or not all(isinstance(e, Mapping) for e in hosts):
        raise ConfigError(f"{parent}.hosts", "a list of mappings, one per host, e.g. "
                          f"[{{server_port: 31001}}, {{host: gpu-b}}]; got {hosts!r}")
    mapping = KEY_MAP if key_map is None else dict(key_map)
    out: list[PoolHost] = []
    labels: set[str] = set()
    for i, entry in enumerate(hosts):
        label = _label(i, entry)
        if label in labels:
            label = f"{label}#{i}"
        labels.add(label)
        overrides = []
        for k, v in entry.items():
            if k in ("label", "overrides"):
                continue
            target = mapping.get(k) or (f"{parent}.{k}" if parent else str(k))
            overrides.append(f"{target}={hydra_value(v)}")
        overrides.extend(str(o) for o in entry.get("overrides") or [])
        out.append(PoolHost(label, dict(entry), overrides))
    return out
