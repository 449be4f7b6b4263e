"""Group choices a server group brings with it (``server.group_defaults`` in its YAML).

Why: Hydra lets only the primary config choose defaults for other groups, but
a server like llama.cpp on a CPU box makes no sense with the default model
(Kimi K2.6) and box (8x B300). So ``conf/server/<name>.yaml`` may declare
``group_defaults: {model: smollm2, hardware: cpu}``, and a command line that
picks that server (one ``server=NAME``, not a sweep over servers) gets those
choices inserted right after it -- unless it names the group itself.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

_SERVER = re.compile(r"^server=([A-Za-z0-9_]+)$")
_GROUP = re.compile(r"^[+~]?([A-Za-z0-9_]+)(?:@[^=]*)?=")


def declared(server: str) -> Mapping[str, Any]:
    """``group_defaults`` of the shipped ``conf/server/<server>.yaml`` ({} if none or no such file)."""
    from sweep.compose.shipped import option

    node = option("server", server).get("group_defaults") or {}
    return dict(node) if isinstance(node, Mapping) else {}


def implied(overrides: Sequence[str]) -> list[str]:
    """``overrides`` with the server's group defaults inserted after its ``server=NAME``."""
    out = list(overrides)
    named = {m.group(1) for o in out if (m := _GROUP.match(o))}
    for i, o in enumerate(out):
        m = _SERVER.match(o)
        if m:
            extra = [f"{g}={v}" for g, v in declared(m.group(1)).items() if g not in named]
            return out[:i + 1] + extra + out[i + 1:]
    return out
