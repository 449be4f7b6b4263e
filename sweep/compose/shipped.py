"""The raw YAML of a shipped config group option (``conf/<group>/<name>.yaml``), uncomposed.

For the few readers that need a server group's declarations without composing
a whole config (its ``group_defaults`` before Hydra runs, SGLang's acceptance
declarations as defaults of the old serverstats helpers). No interpolation is
resolved: only plain keys are read this way.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping


@lru_cache(maxsize=32)
def option(group: str, name: str) -> Mapping[str, Any]:
    """The option's mapping; {} when there is no such file (or it is not a mapping)."""
    from importlib import resources

    import yaml

    try:
        text = (resources.files("sweep.conf") / group / f"{name}.yaml").read_text()
    except (FileNotFoundError, OSError):
        return {}
    node = yaml.safe_load(text)
    return node if isinstance(node, dict) else {}
