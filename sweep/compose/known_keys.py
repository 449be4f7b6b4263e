"""Which keys exist, which a run reads, and the nearest ones to a typo.

Why: ``spec.budgit=4`` was refused with "write +spec.budgit=VALUE to add it",
and ``+spec.budgit=4`` then ran with budget 8 and exit 0 -- a key nothing reads.
Now a key that does not exist names the nearest keys of the composed config
("did you mean spec.budget?"), and a key added with ``+`` is refused unless
something reads it. What reads a key is not a hand-kept list; it is

* the key table (:data:`sweep.compose.keys.RULES`): every key a check or the code
  reads has a rule, and ``a.b.*`` covers the children of ``a.b``;
* the places meant for keys of your own -- a ``mapping`` rule with no rule for any
  child (:func:`free_places`): the server's flag mapping and environment
  (``server.args``, ``server.env``, ``server.extra_env``, ``server.sim_args``,
  ``server.request_extras``), a spec's ``render`` blocks, a model's or server's
  ``install`` recipe ...; anything under them is rendered or passed on as given;
* the YAML templates: a key an interpolation of the composed config names
  (``${spec.myknob}`` in a render block you wrote) is read by the render;
* Hydra's own config (``hydra.*``: Hydra refuses its unknown keys itself) and the
  keys the search sweeper passes to its jobs (``optuna.*``).
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Callable, Iterable, Sequence

from sweep.compose.keys import RULES
from sweep.errors import ConfigError

OWNED_BY_OTHERS = ("hydra", "optuna")  # Hydra's own config; what the search sweeper passes its jobs
_REF = re.compile(r"\$\{(?:oc\.select:)?([A-Za-z_][\w.]*)")


def free_places() -> tuple[str, ...]:
    """Mapping keys of the table whose children are free-form (no child has a rule of its own)."""
    mappings = [k for k, rule in RULES.items() if rule.kind == "mapping"]
    return tuple(sorted(k for k in mappings if not any(o.startswith(k + ".") for o in RULES)))


def _in_table(key: str) -> bool:
    if key in RULES:
        return True
    parent = key.rpartition(".")[0]
    return bool(parent) and f"{parent}.*" in RULES


def free_place_of(key: str) -> str | None:
    """The free-form mapping ``key`` lies under (``server.extra_env`` for ``server.extra_env.FOO``)."""
    return next((p for p in free_places() if key.startswith(p + ".")), None)


def flat_keys(cfg: Any) -> list[str]:
    """Every dotted key of a composed config (mappings and leaves; list items not)."""
    from omegaconf import DictConfig, OmegaConf

    out: list[str] = []

    def walk(node: Any, prefix: str) -> None:
        for k in node.keys():
            key = f"{prefix}{k}"
            out.append(key)
            try:
                child = node._get_node(k)
            except Exception:  # noqa: BLE001 - a node that cannot be read has no children to list
                continue
            if isinstance(child, DictConfig) and not OmegaConf.is_missing(node, k):
                walk(child, key + ".")

    if isinstance(cfg, DictConfig):
        walk(cfg, "")
    return out


def nearest(key: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The known keys closest to ``key``: a near leaf under the same parent (``spec.budgit`` ->
    ``spec.budget``), the same leaf under a near parent (``sepc.budget``), or a near whole key."""
    pool = set(candidates) | {k for k in RULES if not k.endswith(".*")}
    parent, _, leaf = key.rpartition(".")

    def ratio(a: str, b: str) -> float:
        return difflib.SequenceMatcher(None, a, b).ratio()

    scored = []
    for cand in pool - {key}:
        c_parent, _, c_leaf = cand.rpartition(".")
        if c_parent == parent:
            score = ratio(leaf, c_leaf) if ratio(leaf, c_leaf) >= 0.7 else 0.0
        elif c_leaf == leaf:
            score = ratio(parent, c_parent) if ratio(parent, c_parent) >= 0.6 else 0.0
        else:
            score = ratio(key, cand) if ratio(key, cand) >= 0.88 else 0.0
        if score:
            scored.append((-score, cand))
    return [cand for _, cand in sorted(scored)[:n]]


def referenced(cfg: Any) -> set[str]:
    """Keys the composed config's interpolations name (``${spec.budget}`` -> ``spec.budget``)."""
    from omegaconf import OmegaConf

    tree = OmegaConf.to_container(cfg, resolve=False)
    out: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif isinstance(node, str) and "${" in node:
            out.update(_REF.findall(node))

    walk(tree)
    return out


def is_read(key: str, refs: set[str]) -> bool:
    if key.split(".", 1)[0] in OWNED_BY_OTHERS or _in_table(key) or free_place_of(key) is not None:
        return True
    return any(r == key or r.startswith(key + ".") or key.startswith(r + ".") for r in refs)


def check_added(parsed: Sequence[Any], cfg: Any, groups: Iterable[str] = (),
                exists: Callable[[str], bool] = lambda _key: False) -> None:
    """Refuse a key added with ``+``/``++`` that nothing reads (ConfigError naming it, one line).

    ``parsed``: Hydra's parsed overrides of the run; ``cfg``: the job's composed config
    (its interpolations are the templates); ``groups``: the config groups (``+hardware@x=cpu``
    adds a group, not a key); ``exists``: whether the config has the key without the
    overrides (``++key=v`` of a key the config has sets it, as ``key=v`` does)."""
    groups = set(groups)
    added = [o for o in parsed if o.is_add() or o.is_force_add()]
    if not added:
        return
    refs = referenced(cfg)
    for o in added:
        key = str(o.key_or_group)
        if "/" in key or o.package is not None or key in groups:
            continue  # a config group (+hardware@x=cpu, +experiment=...), not a key
        if is_read(key, refs) or (o.is_force_add() and exists(key)):
            continue
        near = [k for k in nearest(key, flat_keys(cfg)) if k != key]
        hint = f"; did you mean {' or '.join(near)}?" if near else ""
        raise ConfigError(key, f"nothing reads this key, so +{key} would change nothing{hint} "
                          f"(python -m sweep --cfg job lists every key; keys of your own go under "
                          f"server.extra_env, server.args or a spec's render block: docs/config-keys.md)")
