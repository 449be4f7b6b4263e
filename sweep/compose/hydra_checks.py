"""Hydra's own keys that a run depends on, and the Optuna sweeper's search space, checked up front.

Hydra takes ``hydra.run.dir=/proc/x``, ``hydra.sweep.subdir=../../x``,
``hydra.sweeper.direction=sideways``, ``hydra.sweeper.n_trials=0`` or a
storage URL that names nothing, and fails late (a traceback from inside a
job or the sweeper, 69 s for an unreachable database) or not at all (no
trials, exit 0; job dirs outside the sweep dir). Their rules are rows of the
one key table (:mod:`sweep.compose.keys`, the ``hydra.*`` rows); here the
run's Hydra node is resolved as far as it resolves outside a running job
and checked against them -- the keys of the mode that runs (``run.dir`` for
one run, ``sweep.dir``/``sweep.subdir`` for a multirun), the sweeper's keys
when the Optuna sweeper is selected (on the command line or by a user's
primary config), its storage (form, file, server reachable). Then every value
of the search space, and one job composed with the first value of every
param (a param naming no key fails here, not in the sweeper).
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Sequence

from sweep.compose import bounds, storage_url
from sweep.compose.keys import RULES

_UNRESOLVED = re.compile(r"\$\{[^}]*\}")


def custom_sweeper(head: Any) -> bool:
    """Another sweeper than Hydra's basic one (the Optuna sweeper) owns the multirun."""
    from omegaconf import OmegaConf

    target = str(OmegaConf.select(head, "hydra.sweeper._target_", default="") or "")
    return bool(target) and not target.endswith("BasicSweeper")


def _value(head: Any, key: str, kind: str) -> tuple[bool, Any]:
    """(present?, the value resolved -- or its literal text with interpolations blanked)."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(head, parent, default=None)
    if node is None or not OmegaConf.is_dict(node) or leaf not in node:
        return False, None
    try:
        value = OmegaConf.select(head, key, throw_on_resolution_failure=True, throw_on_missing=True)
        return True, OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    except OmegaConfBaseException:
        raw = node._get_node(leaf)._value()  # an interpolation only a running job resolves
        if kind == "subpath" and isinstance(raw, str):
            return True, _UNRESOLVED.sub("x", raw)
        return False, None


def check(head: Any, *, multirun: bool, custom_sweeper: bool) -> None:
    """The ``hydra.*`` rows of the key table that apply to this run (ConfigError naming the key)."""
    wanted = ["hydra.output_subdir", "hydra.job.name"]
    wanted += ["hydra.sweep.dir", "hydra.sweep.subdir"] if multirun else ["hydra.run.dir"]
    if custom_sweeper:
        wanted += [k for k in RULES if k.startswith("hydra.sweeper.")]
    for key in wanted:
        present, value = _value(head, key, RULES[key].kind)
        if present and value is not None:
            bounds.check(key, value)
    _, tracking_uri = _value(head, "mlflow.tracking_uri", "uri")
    _, enabled = _value(head, "mlflow.enabled", "bool")
    from_env = os.environ.get("MLFLOW_TRACKING_URI")
    if enabled is not False and not tracking_uri and from_env:  # the store the run will use, as the key's
        bounds.check("MLFLOW_TRACKING_URI", from_env, rule_key="mlflow.tracking_uri")
    if custom_sweeper:
        present, url = _value(head, "hydra.sweeper.storage", "storage")
        if present and url:
            where = storage_url.parse(str(url))
            storage_url.check_file(where)
            storage_url.check_reachable(where)
        elif multirun:  # null: the study file in the sweep dir, when a rerun resumes it
            _, sweep_dir = _value(head, "hydra.sweep.dir", "outdir")
            for default in storage_url.defaults(sweep_dir) if sweep_dir else []:
                storage_url.check_file(default)


def check_search_space(head: Any, sweeps: Sequence[str], fixed: list[str],
                       compose: Callable[..., Any]) -> None:
    """Every value of the Optuna sweeper's space (``hydra.sweeper.params`` + sweep overrides), and one
    job composed with the first value of every param."""
    from omegaconf import OmegaConf

    from sweep.compose.config import from_omegaconf
    from sweep.compose.search_space import check_values, space_of

    node = OmegaConf.select(head, "hydra.sweeper.params")
    params = OmegaConf.to_container(node, resolve=False) if node is not None else {}
    space = space_of({str(k): v for k, v in params.items()} if isinstance(params, dict) else {}, sweeps)

    def compose_job(extra: list[str]) -> None:
        from_omegaconf(compose([*fixed, *extra]))

    check_values(space, compose_job)
    first = [f"{key}={_shown(values[0])}" for key, values in space.items() if values]
    if first:
        compose([*fixed, *first])  # a param naming no key: "no such key", one line


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str) and re.search(r"[\s,:=\[\]{}()'\"\\]", value):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(value)
