"""Secrets out, MLflow's limits in: masking and parameter flattening.

Nothing secret may leave the machine: values of config keys and environment
variables named like api_key/password/secret/token are replaced by ``***``
in every param, tag and artifact text, and credentials are dropped from a
tracking URI before it is written anywhere. The composed config becomes
MLflow params with dotted, readable keys, cut at MLflow's length limits.

Public names are re-exported by ``sweep.tracking``.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Iterable, Mapping
from urllib.parse import urlsplit, urlunsplit

MAX_PARAM_VALUE = 6000   # mlflow.utils.validation.MAX_PARAM_VAL_LENGTH
MAX_TAG_VALUE = 8000     # mlflow.utils.validation.MAX_TAG_VAL_LENGTH
MAX_KEY = 250            # mlflow.utils.validation.MAX_ENTITY_KEY_LENGTH
# Subtrees that are long and already in config.yaml / command.txt.
DROP_FROM_PARAMS = frozenset({"render", "args", "sim_args"})
SECRET_NAME = re.compile(r"(?:^|[_\-.])(?:api[_-]?key|apikey|password|passwd|secret|token|"
                         r"credentials?)(?:$|[_\-.])", re.IGNORECASE)
NOT_SECRETS = frozenset({"true", "false", "none", "null", "yes", "no", "***"})
MASK = "***"


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(str(name)))


def _secret_value(value: Any) -> str | None:
    """Strings only (a numeric "token budget" is not a secret), long enough
    that masking it cannot garble numbers or words in a log."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    if len(value) < 4 or value.lower() in NOT_SECRETS:
        return None
    return value


def collect_secrets(*trees: Any, environ: Mapping[str, str] | None = None) -> set[str]:
    """Values of keys named like api_key/password/secret/token in the given
    trees and in the environment (where ``${oc.env:...}`` secrets come from)."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for k, v in node.items():
                if is_secret_name(k) and (s := _secret_value(v)):
                    found.add(s)
                walk(v)
        elif isinstance(node, (list, tuple)):
            for v in node:
                walk(v)

    for tree in trees:
        walk(tree)
    for name, value in (os.environ if environ is None else environ).items():
        if is_secret_name(name) and (s := _secret_value(value)):
            found.add(s)
    return found


class Redactor:
    """Masks known secret values in any text that leaves the machine."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def text(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return text


def redactor_for(*trees: Any) -> Redactor:
    return Redactor(collect_secrets(*trees))


def mask_tree(node: Any) -> Any:
    """A copy with every string under a secret-named key replaced by ***
    (numbers such as ``experts_per_token`` are not secrets)."""
    if isinstance(node, Mapping):
        return {k: (MASK if is_secret_name(k) and isinstance(v, str) and v else mask_tree(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [mask_tree(v) for v in node]
    return node


def safe_uri(uri: str) -> str:
    """The URI without user:password (what is stored in files and tags)."""
    parts = urlsplit(uri)
    if not (parts.username or parts.password) or not parts.hostname:
        return uri
    netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _param_key(key: str) -> str:
    key = re.sub(r"[^/\w.\- ]", "_", key).strip("/ ")
    return truncate(key.replace("..", "_"), MAX_KEY)


def flatten_params(tree: Mapping[str, Any], red: Redactor | None = None) -> dict[str, str]:
    """Dotted, readable keys (``spec.budget``); lists as JSON strings; the
    rendering subtrees dropped; secrets masked; MLflow's length limits kept."""
    out: dict[str, str] = {}

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for k, v in node.items():
            if str(k) in DROP_FROM_PARAMS:
                continue
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, Mapping) and v:
                walk(v, key)
                continue
            if is_secret_name(k) and isinstance(v, str) and v:
                text = MASK
            elif isinstance(v, (list, tuple, Mapping)):
                text = json.dumps(v, default=str)
            else:
                text = str(v)
            out[_param_key(key)] = truncate(red.text(text) if red else text, MAX_PARAM_VALUE)

    walk(tree, "")
    return out
