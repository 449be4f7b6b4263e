"""The objective, the constraints and feasibility: decided here, once.

A trial is *feasible* when it ended ok, has an objective value and meets
every constraint of its ``objective`` block (Optuna's convention: a
constraint value <= 0 is met; by default coding pass rate 1.0 and zero
request errors, conf/config.yaml). The trial's return to the sweeper, the
comparison table, the sweep summary and the MLflow parent run all ask
:func:`feasible`.

``objective.metric: tok_s_c1`` (the old default) is read as ``tok_s_lowc``,
the lowest measured concurrency's tok/s, which is what it always measured;
the sweeper's ``values`` carry the old name too, so a metric list that names
it keeps working. Stored results say ``tok_s_c1`` only for concurrency 1.
"""

from __future__ import annotations

from typing import Any

from sweep.compose.settings import METRIC_ALIASES, OBJECTIVE_METRICS, Objective
from sweep.errors import ConfigError
from sweep.record.result import Metrics, TrialResult
from sweep.score.metrics import headline, honest, load_values, ok_cells
from sweep.score.noise import objective_interval

INFEASIBLE = 1e9  # a constraint that could not be measured, as a finite number for Optuna


def objective_of(result: TrialResult) -> Objective:
    """The objective the trial was run with (the shipped one's keys where it lacks them,
    the shipped one if what was recorded is not a valid objective)."""
    try:
        return Objective.from_mapping(result.config_section("objective"))
    except ConfigError:
        return Objective.from_mapping({})


def metric_name(objective: Objective) -> str:
    """What the objective measures, as a name (Optuna's metric name, a report's column)."""
    if objective.measure == "cell":
        return f"tok_s_ctx{objective.context}_c{objective.concurrency}"
    if objective.measure == "weighted_mean":
        return "tok_s_weighted_mean"
    if objective.measure == "goodput":
        return "goodput_tok_s"
    return objective.measure


def objective_value(result: TrialResult, objective: Objective) -> float | None:
    metric = objective.measure
    if metric == "tok_s_lowc":
        return headline(result).tok_s
    if metric == "tok_s_peak":
        value = result.metrics.get(metric)
        return None if value is None else float(value)
    if metric in ("goodput", "max_load"):  # under objective.slo (sweep/score/metrics.py)
        value = result.metrics.get("goodput_tok_s" if metric == "goodput" else "max_load")
        return None if value is None else float(value)
    ok = ok_cells(result.cells)
    if metric == "cell":
        for c in ok:
            if c.context == objective.context and c.concurrency == objective.concurrency:
                return c.output_tok_s
        return None
    if metric == "weighted_mean":
        total = wsum = 0.0
        for c in ok:
            w = float(objective.weights.get(f"ctx{c.context}_c{c.concurrency}", 1.0))
            total += w * float(c.output_tok_s or 0.0)
            wsum += w
        return total / wsum if wsum else None
    raise ValueError(f"objective.metric must be one of {', '.join(OBJECTIVE_METRICS)}, got {metric!r}")


def constraints(values: Metrics, objective: Objective) -> tuple[list[float], list[str]]:
    """Constraint values, Optuna's convention: <= 0 is feasible."""
    spec = objective.constraints
    out: list[float] = []
    names: list[str] = []
    if spec.coding_pass_rate_min is not None:
        rate = values.coding_pass_rate
        out.append(0.0 if rate is None else float(spec.coding_pass_rate_min) - float(rate))
        names.append("coding_pass_rate")
    if spec.max_errors is not None:
        out.append(float(values.errors or 0) - float(spec.max_errors))
        names.append("errors")
    if spec.ttft_ms_p99_max is not None:
        p99 = values.ttft_ms_p99
        out.append(float("inf") if p99 is None else float(p99) - float(spec.ttft_ms_p99_max))
        names.append("ttft_ms_p99")
    if spec.greedy_identical_min is not None:
        # unmeasured (no baseline answers for these prompts) is not passed: the gate was asked for
        same = values.greedy_identical
        out.append(float("inf") if same is None else float(spec.greedy_identical_min) - float(same))
        names.append("greedy_identical")
    return out, names


def feasible(result: TrialResult, objective: Objective | None = None) -> bool:
    """Ended ok, has an objective value, meets every constraint (the one rule)."""
    objective = objective if objective is not None else objective_of(result)
    if not result.ok or objective_value(result, objective) is None:
        return False
    values, _ = constraints(result.metrics, objective)
    return all(v <= 0 for v in values)


def trial_return(result: TrialResult, objective: Objective, result_path: str) -> dict[str, Any]:
    """What the task function hands back to Hydra's sweeper (docs/ARCHITECTURE.md)."""
    values = honest(result).to_dict()
    for old, new in METRIC_ALIASES.items():  # a sweeper's metric list may use the old name
        values[old] = values.get(new)
    values.update(load_values(result))  # tok_s_at_c<N>: a per-load study's values
    out: dict[str, Any] = {
        "status": result.status, "values": values, "failure_reason":
        result.failure.reason if result.failure is not None else None,
        "failure_message": result.failure.message if result.failure is not None else None,
        "result_path": result_path, "fingerprint": result.fingerprint,
        "config_id": result.trial.config_id,
        "mlflow_run_id": result.mlflow.run_id,
        "objective": None, "constraints": None, "constraint_names": [], "feasible": False,
    }
    if not result.ok:
        return out
    out["objective"] = objective_value(result, objective)
    ci = objective_interval(result, objective, out["objective"])  # the tie rule's input (sweep/score/noise.py)
    out["objective_ci"] = list(ci) if ci else None
    # how many measurements the interval rests on (the verdict pools their spread: sweep/score/campaign.py)
    reps = [int(c.repeats or 1) for c in result.cells if c.output_tok_s is not None]
    out["objective_n"] = min(reps) if ci and reps else None
    cons, names = constraints(result.metrics, objective)
    out["constraints"] = [c if c != float("inf") else INFEASIBLE for c in cons]
    out["constraint_names"] = names
    out["feasible"] = feasible(result, objective)
    return out
