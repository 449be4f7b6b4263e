"""What one job's outcome means for Optuna: state, values, constraints, user attrs.

The trial pipeline returns a dict (docs/ARCHITECTURE.md, "Task function
return"): ``status``, ``objective``, ``values``, ``constraints`` (<= 0 is
feasible), ``constraint_names``, ``feasible``, ``failure_reason``,
``result_path``, ``mlflow_run_id``, ``fingerprint``. Plain floats (or a
list, one per objective) are accepted too, so the plugin serves any Hydra app.
``status: pruned`` (the pruner stopped the job after some cells) is a PRUNED trial.
A job that raised is a FAIL: reason ``config_error`` for the app's
:class:`sweep.errors.ConfigError` (deterministic: the same config raises
again, e.g. ``spec.topk`` above ``spec.budget``), ``exception`` otherwise.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from optuna.trial import TrialState

from sweep.errors import ConfigError

from ._sampler import CRASHED

# No information, the config queued again, not counted (preempted: a cluster job lost, _jobs)
INTERRUPTED = ("interrupted", "stale", "preempted")
_ATTR_KEYS = ("status", "failure_reason", "result_path", "mlflow_run_id", "fingerprint", "feasible",
              "objective_ci", "objective_n", "config_id")


@dataclass
class Outcome:
    state: TrialState
    values: list[float] | None = None
    constraints: dict[str, float] = field(default_factory=dict)
    user_attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def failure_reason(self) -> str | None:
        return self.user_attrs.get("failure_reason")

    @property
    def interrupted(self) -> bool:
        return self.failure_reason in INTERRUPTED


def failed(reason: str, message: str | None = None, **attrs: Any) -> Outcome:
    ua = {"status": "failed", "failure_reason": reason, **attrs}
    if message:
        ua["failure_message"] = message[:2000]
    return Outcome(TrialState.FAIL, user_attrs=ua)


def from_exception(exc: BaseException) -> Outcome:
    reason = "config_error" if isinstance(exc, ConfigError) else "exception"
    return failed(reason, f"{type(exc).__name__}: {exc}")


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def _finite(x: Any) -> float | None:
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def from_return(ret: Any, metrics: Sequence[str] | None, n_objectives: int) -> Outcome:
    """Interpret a job's return value (dict contract, float, or list of floats)."""
    if ret is None:
        return failed("no_objective", "the job returned nothing (dry run?)")
    if not isinstance(ret, Mapping):
        raw = list(ret) if isinstance(ret, (list, tuple)) else [ret]
        vals = [_finite(v) for v in raw]
        if len(vals) != n_objectives or any(v is None for v in vals):
            return failed("no_objective", f"expected {n_objectives} finite value(s), got {ret!r}")
        return Outcome(TrialState.COMPLETE, [float(v) for v in vals if v is not None],
                       {CRASHED: 0.0}, {"status": "ok"})

    attrs = {k: _jsonable(ret.get(k)) for k in _ATTR_KEYS if ret.get(k) is not None}
    if isinstance(ret.get("values"), Mapping):
        attrs["values"] = {str(k): _jsonable(v) for k, v in ret["values"].items()}
    status = str(ret.get("status") or "ok")
    if status == "interrupted":
        return failed("interrupted", "the job was interrupted", **attrs)
    if status == "pruned":  # stopped by the pruner after some cells (sweep/trial/hooks.py)
        attrs["status"] = "pruned"
        if ret.get("failure_message"):
            attrs["pruned_because"] = str(ret["failure_message"])[:2000]
        return Outcome(TrialState.PRUNED, user_attrs=attrs)
    if status != "ok":
        reason = str(ret.get("failure_reason") or "unknown")
        attrs.pop("failure_reason", None)
        attrs.pop("status", None)
        return failed(reason, ret.get("failure_message"), **attrs)

    if metrics:
        source = ret.get("values") or {}
        raw_vals = [source.get(m) if isinstance(source, Mapping) else None for m in metrics]
        label = "values[" + ", ".join(metrics) + "]"
    else:
        raw_vals = [ret.get("objective")]
        label = "objective"
    vals = [_finite(v) for v in raw_vals]
    if len(vals) != n_objectives or any(v is None for v in vals):
        return failed("no_objective", f"{label} is {raw_vals!r}: not {n_objectives} finite "
                      "number(s)", **attrs)

    constraints: dict[str, float] = {CRASHED: 0.0}
    names = list(ret.get("constraint_names") or [])
    for i, c in enumerate(ret.get("constraints") or []):
        name = str(names[i]) if i < len(names) else f"c{i}"
        f = _finite(c)
        # A constraint that could not be measured (NaN/None) counts as violated.
        constraints[name] = 1.0 if f is None else f
    if ret.get("feasible") is False and all(v <= 0 for v in constraints.values()):
        constraints["infeasible"] = 1.0
    attrs["status"] = "ok"
    return Outcome(TrialState.COMPLETE, [float(v) for v in vals if v is not None],
                   constraints, attrs)
