"""The Pareto set of a multi-objective study (``objective.metrics``), from the result files.

A study that maximises, say, tok/s per user at low load *and* the box's tok/s
at high load has no single best: it has the configs no other config beats on
every metric. The Optuna sweeper writes them to ``pareto.yaml`` and the header
of ``best.yaml``; the report and the MLflow parent recompute them here from
``TrialResult`` alone (each trial records ``objective.metrics`` in its
config), over the **feasible** trials only -- the correctness constraints
hold for every objective.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Sequence

from sweep.report.compare import Group, Row
from sweep.score.metrics import LOAD_METRIC, load_values

# Every study metric is a rate or a count the user wants more of (sweep.compose.keys.STUDY_METRICS).
DIRECTION = "maximize"


def study_metrics(group: Group) -> tuple[str, ...] | None:
    """The group's multi-objective metrics (the first row's objective), None for one objective."""
    for r in group.rows:
        if r.objective.metrics:
            return tuple(r.objective.metrics)
    return None


def values_of(row: Row, metrics: Sequence[str]) -> list[float] | None:
    out = []
    for m in metrics:
        v = row.metrics.get("tok_s_lowc" if m == "tok_s_c1" else m)
        if v is None and LOAD_METRIC.match(m):
            v = load_values(row.doc).get(m)
        if v is None:
            return None
        out.append(float(v))
    return out


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    return all(x >= y for x, y in zip(a, b)) and any(x > y for x, y in zip(a, b))


def study_front(group: Group) -> list[tuple[Row, list[float]]]:
    """Feasible rows no other feasible row dominates, by the first metric (best first)."""
    metrics = study_metrics(group)
    if not metrics:
        return []
    cands = [(r, v) for r in group.rows if r.feasible and (v := values_of(r, metrics)) is not None]
    front = [(r, v) for r, v in cands if not any(dominates(w, v) for _, w in cands)]
    return sorted(front, key=lambda rv: -rv[1][0])


def study_front_html(group: Group) -> str:
    metrics = study_metrics(group)
    if not metrics:
        return ""
    front = study_front(group)
    if not front:
        return (f"<h3>Pareto set of the study ({escape(', '.join(metrics))})</h3>"
                '<p class="note">No feasible trial has every metric yet.</p>')
    head = "".join(f'<th class="n">{escape(m)}</th>' for m in metrics)
    rows = "".join(f"<tr><td>{escape(r.name)}</td>"
                   + "".join(f'<td class="n">{v:,.2f}</td>' for v in vals) + "</tr>" for r, vals in front)
    return (f"<h3>Pareto set of the study ({escape(', '.join(metrics))})</h3>"
            f'<div class="tablewrap"><table><thead><tr><th>trial</th>{head}</tr></thead><tbody>{rows}'
            "</tbody></table></div><p class=\"note\">Feasible trials no other feasible trial beats on every "
            "metric (all maximised); the sweeper lists them with their overrides in best.yaml and pareto.yaml.</p>")


def study_front_png(group: Group, path: Path) -> Path | None:
    """The study's first two metrics, every feasible trial a point, the Pareto set marked and labelled."""
    metrics = study_metrics(group)
    if not metrics:
        return None
    pts = [(r, v) for r in group.rows if r.feasible and (v := values_of(r, metrics)) is not None]
    if not pts:
        return None
    from sweep.report.plots import _figure, _legend, _save

    front = {id(r) for r, _ in study_front(group)}
    fig, (ax,) = _figure(1)
    ax.scatter([v[0] for _, v in pts], [v[1] for _, v in pts], s=18, alpha=0.6, label="feasible trials")
    best = sorted(((v[0], v[1], r.name) for r, v in pts if id(r) in front))
    ax.plot([b[0] for b in best], [b[1] for b in best], color="black", marker="D", markersize=4,
            linewidth=1.2, label="Pareto set")
    for x, y, name in best:
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize="xx-small")
    ax.set_xlabel(metrics[0])
    ax.set_ylabel(metrics[1])
    ax.grid(True, alpha=0.3)
    _legend(ax, "x-small")
    fig.suptitle(f"Pareto set of the study: {group.hardware_label} · {group.model_label}", fontsize="medium")
    return _save(fig, path)
