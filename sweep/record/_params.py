"""The composed config as MLflow params: dotted readable keys, MLflow's limits kept.

Secrets are masked by :mod:`sweep.secrets` (by name: ``server.api_key`` is
``***``; by value: in every other string). Subtrees that are long and already
in ``config.yaml`` / ``command.txt`` (the flag mappings) are left out.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from sweep import secrets

MAX_PARAM_VALUE = 6000   # mlflow.utils.validation.MAX_PARAM_VAL_LENGTH
MAX_TAG_VALUE = 8000     # mlflow.utils.validation.MAX_TAG_VAL_LENGTH
MAX_KEY = 250            # mlflow.utils.validation.MAX_ENTITY_KEY_LENGTH
# Subtrees that are long and already in config.yaml / command.txt.
DROP_FROM_PARAMS = frozenset({"render", "args", "sim_args"})


def truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _param_key(key: str) -> str:
    key = re.sub(r"[^/\w.\- ]", "_", key).strip("/ ")
    return truncate(key.replace("..", "_"), MAX_KEY)


def flatten_params(tree: Mapping[str, Any], red: secrets.Redactor | None = None) -> dict[str, str]:
    """Dotted, readable keys (``spec.budget``); lists as JSON strings; the
    rendering subtrees dropped; secrets masked; MLflow's length limits kept."""
    red = red if red is not None else secrets.redactor()
    masked = secrets.mask_tree(tree, red)
    out: dict[str, str] = {}

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for k, v in node.items():
            if str(k) in DROP_FROM_PARAMS:
                continue
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, Mapping) and v:
                walk(v, key)
                continue
            text = json.dumps(v, default=str) if isinstance(v, (list, tuple, Mapping)) else str(v)
            out[_param_key(key)] = truncate(text, MAX_PARAM_VALUE)

    walk(masked, "")
    return out
