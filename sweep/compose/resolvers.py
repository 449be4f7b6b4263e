"""OmegaConf resolvers the YAML uses (registered once, idempotently).

``${sweep.python:}`` is the running interpreter, so ``server=sim`` starts
the simulator with the same environment as the controller; ``${sweep.gt:a,b}``
lets YAML turn a number into a boolean flag (e.g. vLLM's
--enable-expert-parallel when hardware.ep > 1); ``${sweep.when:cond,value}`` is
``value`` when ``cond`` is true and null (the flag dropped) otherwise, for a
boolean knob whose flag takes a value (SGLang's ``--cuda-graph-backend-decode
disabled`` for ``server.disable_cuda_graph``); ``${sweep.csv:list}`` joins a
list into one comma-separated argument (llama.cpp's ``P0,P1,...`` values), null
stays null so the flag is dropped; ``${sweep.json:x}`` is ``x`` as one compact JSON argument
(a list of lists such as ``spec.per_load`` for the simulator's ``--sim-per-load``), null stays
null; ``${sweep.tok_s_at:${workload.concurrency}}`` names a per-load study's metrics
(``tok_s_at_c<N>``, one per concurrency: hydra/sweeper/space=per_load); ``${sweep.not:x}``
is true where ``x`` is false or null and null otherwise, for a negative flag (vLLM's
``--no-enable-prefix-caching``). ``${sweep.engines_dir:}`` and
``${sweep.cpu_target:}`` locate what ``python -m sweep.engines`` installs
(:mod:`sweep.compose.engine_paths`), so a server group can name its binary and a
model group its weights without a path spelled in Python. ``${sweep.objective:metric,metrics}``
names what a study maximises: ``objective.metric``, or every key of a multi-objective
study's ``objective.metrics`` joined by ``+`` (its study name says both). ``${sweep.minus:a,b}``
is ``a - b`` for a count one engine spells one less than another (vLLM's DSpark
``num_speculative_tokens`` is the verify block less one); null stays null.
"""

from __future__ import annotations

import sys
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf


def register() -> None:
    from sweep.compose import engine_paths as _engine_paths

    if not OmegaConf.has_resolver("sweep.python"):
        OmegaConf.register_new_resolver("sweep.python", lambda: sys.executable)
    if not OmegaConf.has_resolver("sweep.gt"):
        OmegaConf.register_new_resolver("sweep.gt", lambda a, b: float(a) > float(b))
    if not OmegaConf.has_resolver("sweep.when"):
        OmegaConf.register_new_resolver("sweep.when", _when)
    if not OmegaConf.has_resolver("sweep.minus"):
        OmegaConf.register_new_resolver("sweep.minus", _minus)
    if not OmegaConf.has_resolver("sweep.not"):
        OmegaConf.register_new_resolver("sweep.not", _not)
    if not OmegaConf.has_resolver("sweep.csv"):
        OmegaConf.register_new_resolver("sweep.csv", _csv)
    if not OmegaConf.has_resolver("sweep.tok_s_at"):
        OmegaConf.register_new_resolver("sweep.tok_s_at", _tok_s_at)
    if not OmegaConf.has_resolver("sweep.json"):
        OmegaConf.register_new_resolver("sweep.json", _json)
    if not OmegaConf.has_resolver("sweep.engines_dir"):
        OmegaConf.register_new_resolver("sweep.engines_dir", lambda: str(_engine_paths.engines_dir()))
    if not OmegaConf.has_resolver("sweep.objective"):
        OmegaConf.register_new_resolver("sweep.objective", _objective)
    if not OmegaConf.has_resolver("sweep.cpu_target"):
        OmegaConf.register_new_resolver("sweep.cpu_target", _engine_paths.cpu_target)


def _objective(metric: Any, metrics: Any = None) -> str:
    if isinstance(metrics, (list, tuple, ListConfig)) and len(metrics) > 0:
        return "+".join(str(m) for m in metrics)
    return str(metric)


def _minus(a: Any, b: Any) -> int | None:
    if a is None:
        return None
    return int(a) - int(b)


def _when(cond: Any, value: Any) -> Any:
    if isinstance(cond, str):  # an override spelt as text
        cond = cond.strip().lower() == "true"
    return value if cond else None


def _not(value: Any) -> bool | None:
    if isinstance(value, str):
        value = value.strip().lower() == "true"
    return None if value else True


def _csv(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple, ListConfig)):
        return ",".join(_scalar(v) for v in value)
    return _scalar(value)


def _tok_s_at(concurrency: Any) -> list[str] | None:
    """``[tok_s_at_c1, tok_s_at_c4, ...]``: a per-load study's metrics, one per measured concurrency
    (null while Hydra composes its own node without the app's keys)."""
    if concurrency is None:
        return None
    if isinstance(concurrency, ListConfig):
        concurrency = OmegaConf.to_container(concurrency, resolve=True)
    values = concurrency if isinstance(concurrency, (list, tuple)) else [concurrency]
    return [f"tok_s_at_c{int(c)}" for c in values]


def _json(value: Any) -> str | None:
    if value is None:
        return None
    import json

    if isinstance(value, (ListConfig, DictConfig)):
        value = OmegaConf.to_container(value, resolve=True)
    return json.dumps(value, separators=(",", ":"))


def _scalar(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


register()
