"""Checks of a server group's ``acceptance`` block (read by :mod:`sweep.bench.acceptance`).

Part of compose so that building a config (sweep.compose.config) never imports the
benchmark stage: an unknown key, or a log pattern that does not compile or does
not capture its number as ``(?P<v>...)``, is one ConfigError naming the key.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from sweep.errors import ConfigError

REQUEST_KEYS = ("paths", "tokens", "verify_steps", "drafted", "accepted")
METRIC_KEYS = ("counters", "gauges", "per_position")
LOG_KEYS = ("line", "fields", "sum", "synthetic", "per_request", "weight", "weighted", "definition")


def check_declaration(node: Mapping[str, Any], p: str = "server.acceptance") -> None:
    """Raise ConfigError for an unknown key or a regex that does not compile."""
    for part, allowed in (("request", REQUEST_KEYS), ("metrics", METRIC_KEYS), ("log", LOG_KEYS)):
        sub = node.get(part)
        if sub is None:
            continue
        if not isinstance(sub, Mapping):
            raise ConfigError(f"{p}.{part}", f"must be a mapping with keys {', '.join(allowed)}")
        for key in sub:
            if key not in allowed:
                raise ConfigError(f"{p}.{part}.{key}", f"unknown key; allowed: {', '.join(allowed)}")
    for key in node:
        if key not in ("request", "metrics", "log"):
            raise ConfigError(f"{p}.{key}", "unknown key; allowed: request, metrics, log")
    log = node.get("log") or {}
    patterns = {"line": log.get("line"), "synthetic": log.get("synthetic"),
                **{f"fields.{k}": v for k, v in (log.get("fields") or {}).items()}}
    for key, pattern in patterns.items():
        if pattern is None:
            continue
        try:
            compiled = re.compile(str(pattern))
        except re.error as exc:
            raise ConfigError(f"{p}.log.{key}", f"is not a valid regular expression: {exc}") from None
        if key.startswith("fields.") and "v" not in compiled.groupindex:
            raise ConfigError(f"{p}.log.{key}", "must capture the number as (?P<v>...)")
    weight = log.get("weight")
    if weight is not None and weight not in (log.get("fields") or {}):
        raise ConfigError(f"{p}.log.weight", f"must name one of the log fields "
                          f"({', '.join(sorted(log.get('fields') or {}))}), got {weight!r}")


def checked_declaration(node: Any, p: str = "server.acceptance") -> dict[str, Any]:
    """``server.acceptance`` as the typed config keeps it ({} when absent), checked."""
    if node is None:
        return {}
    if not isinstance(node, Mapping):
        raise ConfigError(p, "must be a mapping with request / metrics / log")
    check_declaration(node, p)
    return dict(node)
