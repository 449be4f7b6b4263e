"""Headline metrics of a trial, and the objective/constraints for sweepers.

Scoring reads only the result document, so a sweeper, the report and the
MLflow logger all agree on what "tok_s_c1" or "feasible" means.
"""

from __future__ import annotations

from typing import Any, Mapping

OBJECTIVE_METRICS = ("tok_s_c1", "tok_s_peak", "cell", "weighted_mean")


def _ok_cells(cells: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [c for c in cells if c.get("output_tok_s") is not None]


def headline_cell(cells: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The lowest-concurrency cell at the shortest context (single stream)."""
    ok = _ok_cells(cells)
    if not ok:
        return None
    return min(ok, key=lambda c: (c["concurrency"], c["context"]))


def trial_accept_len(cells: list[Mapping[str, Any]]) -> float | None:
    """Sum of completion tokens over sum of verify steps, across all cells."""
    tokens = steps = 0.0
    for c in cells:
        acc, toks = c.get("accept_len"), c.get("completion_tokens")
        if acc and toks:
            tokens += toks
            steps += toks / acc
    return tokens / steps if steps else None


def metrics(result: Mapping[str, Any]) -> dict[str, Any]:
    cells = list(result.get("cells") or [])
    head = headline_cell(cells)
    ok = _ok_cells(cells)
    coding = result.get("coding") or {}
    return {
        "tok_s_c1": head["output_tok_s"] if head else None,
        "tok_s_peak": max((c["output_tok_s"] for c in ok), default=None),
        "accept_len": trial_accept_len(cells),
        "coding_pass_rate": coding.get("pass_rate"),
        "speedup_vs_baseline": result.get("speedup_vs_baseline"),
        "ttft_ms_p50": head.get("ttft_ms_p50") if head else None,
        "ttft_ms_p99": max((c.get("ttft_ms_p99") or 0 for c in ok), default=None) if ok else None,
        "tpot_ms_p50": head.get("tpot_ms_p50") if head else None,
        "startup_s": (result.get("server") or {}).get("startup_s"),
        "errors": sum(int(c.get("errors") or 0) for c in cells),
    }


def objective_value(values: Mapping[str, Any], cells: list[Mapping[str, Any]],
                    objective: Mapping[str, Any]) -> float | None:
    metric = objective.get("metric", "tok_s_c1")
    if metric in ("tok_s_c1", "tok_s_peak"):
        return values.get(metric)
    ok = _ok_cells(cells)
    if metric == "cell":
        for c in ok:
            if c["context"] == objective.get("context") and c["concurrency"] == objective.get("concurrency"):
                return c["output_tok_s"]
        return None
    if metric == "weighted_mean":
        weights = objective.get("weights") or {}
        total = wsum = 0.0
        for c in ok:
            w = float(weights.get(f"ctx{c['context']}_c{c['concurrency']}", 1.0))
            total += w * c["output_tok_s"]
            wsum += w
        return total / wsum if wsum else None
    raise ValueError(f"objective.metric must be one of {', '.join(OBJECTIVE_METRICS)}, got {metric!r}")


def constraints(values: Mapping[str, Any], objective: Mapping[str, Any]) -> tuple[list[float], list[str]]:
    """Constraint values, Optuna's convention: <= 0 is feasible."""
    spec = objective.get("constraints") or {}
    out: list[float] = []
    names: list[str] = []
    pass_min = spec.get("coding_pass_rate_min")
    if pass_min is not None:
        rate = values.get("coding_pass_rate")
        out.append(0.0 if rate is None else float(pass_min) - float(rate))
        names.append("coding_pass_rate")
    max_err = spec.get("max_errors")
    if max_err is not None:
        out.append(float(values.get("errors") or 0) - float(max_err))
        names.append("errors")
    ttft_max = spec.get("ttft_ms_p99_max")
    if ttft_max is not None:
        p99 = values.get("ttft_ms_p99")
        out.append(float("inf") if p99 is None else float(p99) - float(ttft_max))
        names.append("ttft_ms_p99")
    return out, names


def trial_return(result: Mapping[str, Any], objective: Mapping[str, Any], result_path: str) -> dict[str, Any]:
    """What the task function hands back to Hydra's sweeper (docs/ARCHITECTURE.md)."""
    status = result.get("status")
    values = dict(result.get("metrics") or {})
    failure = result.get("failure") or {}
    out: dict[str, Any] = {
        "status": status, "values": values, "failure_reason": failure.get("reason"),
        "result_path": result_path, "fingerprint": result.get("fingerprint"),
        "mlflow_run_id": (result.get("mlflow") or {}).get("run_id"),
        "objective": None, "constraints": None, "constraint_names": [], "feasible": False,
    }
    if status != "ok":
        return out
    out["objective"] = objective_value(values, list(result.get("cells") or []), objective)
    cons, names = constraints(values, objective)
    out["constraints"] = [c if c != float("inf") else 1e9 for c in cons]
    out["constraint_names"] = names
    out["feasible"] = out["objective"] is not None and all(c <= 0 for c in cons)
    return out
