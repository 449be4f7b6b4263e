"""The speedup over the autoregressive baseline: the baseline rule and the ratio, once.

A baseline is an ``ok`` result with ``spec.algorithm == none`` on the same
box and layout, the same model and engine (llama.cpp and vLLM serve the same
SmolLM2 on the same CPU box), the same workload matrix (so the headline
tok/s, at the lowest measured concurrency, compares like with like), the same
load and prompts (arrival rate, prompt source and dataset, temperature,
ignore_eos, the workload's endpoint: a Poisson-loaded or sampled trial is no
peer of a closed-loop greedy one, whatever its workload's name) and the same simulated-ness (a
simulated baseline never vouches for a real box, nor the reverse). The trial
looks one up among earlier result files (:func:`find`, the newest match);
the comparison table pairs rows it already has (:func:`best_baseline`). Both
use :func:`is_baseline_for` and :func:`speedup`. Trials that share a
:func:`baseline_key` are the ones a report may rank against each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, TypeVar

from sweep.record.result import TrialResult, iter_results
from sweep.score.metrics import headline

_HW_KEYS = ("name", "tp", "ep", "dp")
_WL_KEYS = ("contexts", "concurrency", "max_tokens")
# how the load is made, with the value a result file written before the key existed meant
_LOAD_KEYS = {"request_rate": None, "prompt_source": "text", "dataset_path": None,
              "temperature": 0.0, "ignore_eos": True, "endpoint": None}
T = TypeVar("T")


def _section(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = config.get(name)
    return value if isinstance(value, Mapping) else {}


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def baseline_key(config: Mapping[str, Any], simulated: bool) -> tuple[Any, ...]:
    """What must match between a trial and its baseline (box, layout, model, matrix, load, simulated)."""
    hw, wl, model = (_section(config, k) for k in ("hardware", "workload", "model"))
    return (
        tuple(hw.get(k) for k in _HW_KEYS),
        model.get("name"),
        _section(config, "server").get("name"),   # one engine's baseline never vouches for another's
        tuple(_hashable(wl.get(k)) for k in _WL_KEYS),
        tuple(_hashable(wl.get(k, default)) for k, default in _LOAD_KEYS.items()),
        bool(simulated),
    )


def is_baseline(result: TrialResult) -> bool:
    """An ok spec=none result with a headline number."""
    return (result.ok and result.spec_value("algorithm") == "none"
            and headline(result).tok_s is not None)


def is_baseline_for(baseline: TrialResult, config: Mapping[str, Any], simulated: bool) -> bool:
    """``baseline`` is a baseline measured like a trial of ``config`` (the one rule)."""
    return is_baseline(baseline) and (baseline_key(baseline.config, baseline.simulated)
                                      == baseline_key(config, simulated))


def speedup(tok_s: float | None, baseline_tok_s: float | None) -> float | None:
    """Headline tok/s over the baseline's (same matrix, so the same concurrency);
    None when either is unknown or zero."""
    if not tok_s or not baseline_tok_s:
        return None
    return float(tok_s) / float(baseline_tok_s)


def best_baseline(config: Mapping[str, Any], simulated: bool,
                  candidates: Iterable[tuple[T, TrialResult]]) -> tuple[T, TrialResult] | None:
    """The newest candidate that is a baseline for a trial of ``config`` (by ``trial.finished``)."""
    best: tuple[str, T, TrialResult] | None = None
    for key, doc in candidates:
        if not is_baseline_for(doc, config, simulated):
            continue
        stamp = doc.trial.finished or ""
        if best is None or stamp > best[0]:
            best = (stamp, key, doc)
    return None if best is None else (best[1], best[2])


def find(config: Mapping[str, Any], simulated: bool, roots: list[Path],
         exclude: Path | None = None) -> tuple[Path, TrialResult] | None:
    """The newest baseline for a trial of ``config`` among the result files under ``roots``."""
    skip = exclude.resolve() if exclude is not None else None
    return best_baseline(config, simulated, ((p, d) for p, d in iter_results(*roots)
                                             if skip is None or p.resolve() != skip))
