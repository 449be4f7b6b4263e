"""A comparison row as a flat record: the fields every export shares (CSV, JSON, Markdown, MLflow).

Numbers keep full precision here; only what a person reads (the terminal,
Markdown, HTML, the MLflow trials table) rounds, through :func:`sweep.score.names.rounded`.
Latency percentiles are those of the trial's headline cell (the one its
headline tok/s comes from); ``*_ci`` are 95% intervals when the cells were
measured with ``workload.repeats``.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

from sweep.record.result import Cell, TrialResult
from sweep.report.compare import Group, Row

LATENCIES = tuple(f"{m}_ms_p{q}" for m in ("ttft", "tpot", "itl") for q in (50, 90, 99))
FIELDS = (
    "group", "hardware", "model", "workload", "objective", "simulated", "rank", "trial", "status",
    "failure_reason", "feasible", "tied_with_best", "spec", "budget", "topk", "window", "headline_concurrency",
    "headline_context", "tok_s_lowc", "tok_s_lowc_ci_low", "tok_s_lowc_ci_high", "tok_s_c1",
    "tok_s_peak", "objective_value", "speedup_vs_baseline", "speedup_baseline", "accept_len",
    "accept_rate", "greedy_identical", "coding_pass_rate", *LATENCIES, "errors", "usd_per_mtok", "startup_s",
    "repeats", "goodput_tok_s", "max_load", "per_stream_tok_s_lowc", "sweep_id", "source",
)


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def headline_cell(row: Row) -> Cell | None:
    """The cell the row's headline tok/s was measured in."""
    for c in row.doc.cells:
        if c.concurrency == row.head.concurrency and c.context == row.head.context:
            return c
    return None


def interval(cell: Cell | None, metric: str = "output_tok_s") -> tuple[float, float] | None:
    """``<metric>_ci`` of a cell measured with repeats: (low, high), or None."""
    ci = cell.get(f"{metric}_ci") if cell is not None else None
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        low, high = _num(ci[0]), _num(ci[1])
        if low is not None and high is not None:
            return low, high
    return None


def record(group: Group, row: Row) -> dict[str, Any]:
    m, cell = row.metrics, headline_cell(row)
    ci = interval(cell)
    out: dict[str, Any] = {
        "group": group.label, "hardware": group.hardware_label, "model": group.model_label,
        "workload": row.workload, "objective": group.objective_name, "simulated": row.simulated,
        "rank": row.rank, "trial": row.name, "status": row.status, "failure_reason": row.reason,
        "feasible": row.feasible, "tied_with_best": row.tied_with_best, "spec": row.spec,
        "budget": row.budget, "topk": row.topk,
        "window": row.window, "headline_concurrency": row.head.concurrency,
        "headline_context": row.head.context, "tok_s_lowc": _num(row.head.tok_s),
        "tok_s_lowc_ci_low": ci[0] if ci else None, "tok_s_lowc_ci_high": ci[1] if ci else None,
        "tok_s_c1": _num(m.tok_s_c1), "tok_s_peak": _num(m.tok_s_peak),
        "objective_value": _num(row.objective_value), "speedup_vs_baseline": _num(row.speedup),
        "speedup_baseline": row.baseline_name, "accept_len": _num(m.accept_len),
        "accept_rate": _num(row.speculation.rate), "greedy_identical": _num(m.greedy_identical),
        "coding_pass_rate": _num(m.coding_pass_rate),
        **{k: _num(cell.get(k)) if cell is not None else None for k in LATENCIES},
        "errors": m.errors, "usd_per_mtok": _num(m.usd_per_mtok), "startup_s": _num(m.startup_s),
        "repeats": cell.get("repeats") if cell is not None else None,
        "goodput_tok_s": _num(m.goodput_tok_s), "max_load": _num(m.max_load),   # under objective.slo
        "per_stream_tok_s_lowc": _num(m.per_stream_tok_s_lowc),
        "sweep_id": row.sweep_id, "source": row.source,
    }
    return {k: out[k] for k in FIELDS}


# What an objective's value is called in a record, when a table does not show it already
# (the headline and peak tok/s, accept len and speedup are columns of every table).
_SHOWN = ("tok_s_lowc", "tok_s_c1", "tok_s_peak", "accept_len", "speedup_vs_baseline")
_FIELD = {"per_stream_tok_s_lowc": "per_stream_tok_s_lowc", "goodput_tok_s": "goodput_tok_s",
          "goodput": "goodput_tok_s", "max_load": "max_load"}


def objective_columns(group: Group) -> list[tuple[str, str]]:
    """(label, record key) of each figure the group's objective maximises that the tables do not
    show already: a max-load study gets its max load, a goodput study its goodput, a
    multi-objective study each of its metrics, a cell or weighted objective its value."""
    from sweep.score.names import label
    from sweep.score.objective import metric_name

    objective = group.rows[0].objective
    keys = list(objective.metrics or [objective.measure])
    out = []
    for key in keys:
        if key in _SHOWN:
            continue
        field = _FIELD.get(key, "objective_value")
        name = label(metric_name(objective) if field == "objective_value" else key)
        if (name, field) not in out:
            out.append((name, field))
    return out


def objective_text(group: Group) -> str:
    """What the group maximises, as its label and the config value it comes from:
    ``low-load tok/s (objective.metric=tok_s_lowc)``, both metrics of a two-objective study."""
    from sweep.score.names import objective_label
    from sweep.score.objective import metric_name

    objective = group.rows[0].objective
    if objective.metrics:
        return f"{objective_label('', objective.metrics)} (objective.metrics={','.join(objective.metrics)})"
    return f"{objective_label(metric_name(objective))} (objective.metric={objective.metric})"


def marker(group: Group, row: Row) -> str:
    """``★`` the best, ``≈`` in contention with it (or the leader of an open verdict), else nothing."""
    best, leader = group.best, group.leader
    undecided = best is None and leader is not None and group.verdict == "open"
    return "★" if row is best else "≈" if row.tied_with_best or (undecided and row is leader) else ""


def records(groups: Sequence[Group]) -> list[dict[str, Any]]:
    return [record(g, r) for g in groups for r in g.rows]


def short_names(group: Group) -> list[str]:
    """Each row (in order) by the spec knobs that differ within the group: ``b8``, ``b16 t2``,
    ``none`` -- what a chart writes beside a point, where a whole trial name does not fit."""
    rows = group.rows
    spec = [r for r in rows if not r.is_baseline]  # the baseline is "baseline" whatever its knobs
    keys = [k for k in ("spec", "budget", "topk", "window") if len({str(getattr(r, k)) for r in spec}) > 1]
    abbr = {"spec": "", "budget": "b", "topk": "t", "window": "w"}
    return [" ".join(f"{abbr[k]}{getattr(r, k)}" for k in keys if getattr(r, k) is not None)
            or ("baseline" if r.is_baseline else r.name) for r in rows]


LANDSCAPE_MORE = "more rounds of the recorded landscape (benchmarks/record_landscape.py resumes it with --rounds N)"


def recorded_landscape(docs: Iterable[TrialResult]) -> bool:
    """Rows read from a recorded landscape (``sweep/report/landscape_trials.py``): no trial overrides to
    run again from here, and decide would write beside the recording; more rounds come from its recorder."""
    docs = list(docs)
    return bool(docs) and all(not d.trial.overrides and isinstance(d.trial.extra, dict)
                              and d.trial.extra.get("landscape_overrides") for d in docs)


def rerun_command(row: Row) -> str:
    """``python -m sweep <the trial's overrides>``: the one command that runs this config again
    (secrets masked as in result.json; the sweeper's own bookkeeping keys left out)."""
    import shlex

    words = [o for o in row.doc.trial.overrides
             if not o.lstrip("+~").startswith(("hydra.", "optuna.", "hydra/"))]
    return " ".join(["python -m sweep", *(shlex.quote(str(w)) for w in words)])
