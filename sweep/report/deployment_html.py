"""The HTML report's deployment section: the schedule per load, its envelope chart, the user-vs-GPU front.

Rendered from the report's groups (built from ``TrialResult`` alone,
:mod:`sweep.report.compare`) by the same code as ``python -m sweep.schedule``
(:mod:`sweep.report.schedule`) and the Pareto view (:mod:`sweep.report.frontier`),
so the page, the command and ``schedule.yaml`` never disagree. A multi-objective
study (``objective.metrics``) adds its Pareto set (:mod:`sweep.report.study_front`).
"""

from __future__ import annotations

from html import escape
from typing import Sequence

from sweep.report import svg
from sweep.report.chart_data import INTERPOLATED, best_band, measured_curves
from sweep.report.compare import Group
from sweep.report.html_names import name_html, names_html
from sweep.score.names import LABELS
from sweep.report.frontier import gpus_of, points_of
from sweep.report.schedule import Schedule, schedules_of
from sweep.report.schedule_text import summary_lines
from sweep.report.study_front import study_front_html


def _f(x: float | None, nd: int = 1) -> str:
    return "–" if x is None else f"{x:,.{nd}f}"


def _schedule_table(s: Schedule, said: Sequence[str] = ()) -> str:
    """One row per load; names without what the heading says (``said``: the box, the workload),
    shortened from the middle with the full name as the tooltip, lists cut to two names and a count:
    the table fits 1400 px and no row grows taller than a name and its interval."""
    rows = []
    for lv in s.levels:
        lead = lv.leader
        ci = f' <span class="ci">[{_f(lead.ci[0])}, {_f(lead.ci[1])}]</span>' if lead is not None and lead.ci else ""
        missed = names_html(sorted(e.name for e in lv.entries if not e.meets), said)
        if lv.best is not None:
            who = name_html(lv.best.name, said)
        elif lead is not None:
            who = (f"<i>open</i>: {name_html(lead.name, said)} leads "
                   f"<small>({'undecided' if lv.state == 'tied' else 'measured once, noise unknown'})</small>")
        else:
            who = "<i>none meets the SLO</i>"
        sp = "–" if lv.speedup is None else f"{lv.speedup:.2f}×" + (
            f' <span class="ci">[{lv.speedup_ci[0]:.2f}, {lv.speedup_ci[1]:.2f}]</span>' if lv.speedup_ci else "")
        rows.append(
            f'<tr class="{"best" if lv.baseline_wins else ""}"><td class="n">{lv.load:g}</td>'
            f'<td class="names">{who}</td>'
            f'<td class="n">{_f(lead.tok_s) + ci if lead else "–"}</td>'
            f'<td class="n">{lead.n if lead else "–"}</td>'
            f'<td class="n">{sp}</td>'
            f"<td class=\"names\">{names_html([e.name for e in lv.tied], said, prefix='≈ ')}</td>"
            f'<td class="names">{missed}</td></tr>')
    num = ' class="n"'
    head = "".join(f"<th{num if i in (0, 2, 3, 4) else ''}>{h}</th>" for i, h in enumerate(
        (escape(s.unit), "best feasible config", LABELS["output_tok_s"] + " [95%]", "n",
         LABELS["speedup_vs_baseline"], "tied within noise", "missed the SLO / failed requests")))
    return (f'<div class="tablewrap"><table class="schedule"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}'
            "</tbody></table></div>")


def said_by_heading(g: Group) -> tuple[str, ...]:
    """The name parts a group's heading already says or every row shares (the box, the workload, the
    loads ``c1.2.4.8``, ``mt64``): the schedule's names leave them out."""
    shared = set.intersection(*(set(r.name.split("-")) for r in g.rows)) if g.rows else set()
    box = str(g.first.config_section("hardware").get("name") or g.first.trial.hardware or "")
    return tuple(sorted({box, *(r.workload for r in g.rows), *shared} - {""}))


def _color(name: str, i: int, base: set[str], colors: dict[str, str] | None) -> str:
    """The page's colour for a config (sweep/report/html.py palette), else one of its own."""
    if colors is not None and name in colors:
        return colors[name]
    return svg.GREY if name in base else svg.color(i)


def _envelope_chart(s: Schedule, colors: dict[str, str] | None = None) -> str:
    """Measured values only (sweep/report/chart_data.py): the model's figure and interval are in
    each point's tooltip, never drawn above what ran."""
    base = {r.name for r in s.rows if r.is_baseline}
    model = {name: {x: (y, ci) for x, y, ci in pts} for name, pts in s.curves.items()}

    def tip(name: str, x: float, y: float) -> str:
        est, ci = model.get(name, {}).get(x, (None, None))
        said = f"; the model: {est:,.1f}" + (f" [{ci[0]:,.1f} - {ci[1]:,.1f}]" if ci else "") if est else ""
        return f"{name}: {s.unit} {x:g}: measured {y:,.1f} tok/s{said}"

    series = []
    curves = measured_curves(s)
    for i, (name, pts) in enumerate(sorted(curves.items())):
        series.append(svg.Series(name, _color(name, i, base, colors), list(pts),
                                 tips=[tip(name, x, y) for x, y in pts], dashed=True))
    band = best_band(s)
    if band:  # drawn first, its points as rings: the best config's own point stays visible inside
        series.insert(0, svg.Series("best feasible, measured", "#222", [(p.load, p.tok_s) for p in band],
                                    tips=[f"best at {s.unit} {p.load:g}: {p.name}, measured {p.tok_s:,.1f} tok/s"
                                          for p in band], ring=True))
    loads = sorted({x for pts in curves.values() for x, _ in pts})
    log2 = s.over == "concurrency" and bool(loads) and loads[0] > 0 and loads[-1] >= 4 * loads[0]
    chart = svg.line_chart(series, title=f"tok/s vs {s.unit}, context {s.context}",
                           x_label="request rate (req/s)" if s.over == "rate" else "concurrency (in-flight requests)",
                           y_label="output tok/s, measured", log2_x=log2, x_ticks=loads)  # ticks: the measured loads
    chips = "".join(f'<span><i style="background:{x.color}"></i>{escape(x.label)}</span>' for x in series)
    return (f'<figure>{chart}<figcaption><div class="legend">{chips}</div>One line per config at its measured '
            f"values (grey: the spec=none baseline; {INTERPOLATED}); the black line and rings mark the best "
            "feasible config at each measured load, at its measured value -- where it changes hands is a "
            "crossover; the model's figure and interval are in each point's tooltip; configs that fail the "
            "correctness gate are left out.</figcaption></figure>")


def _pareto_chart(g: Group, slo: object, colors: dict[str, str] | None = None) -> str:
    pts = points_of(g, slo)  # type: ignore[arg-type]
    if not pts:
        return ""
    _, unit = gpus_of(g)
    names = sorted({p.name for p in pts})
    base = {r.name for r in g.rows if r.is_baseline}
    series = [svg.Series(n, _color(n, i, base, colors),
                         [(p.per_user, p.per_gpu) for p in pts if p.name == n],
                         tips=[f"{p.label}: {p.per_user:,.1f} tok/s per user, {p.per_gpu:,.1f} tok/s {unit}"
                               + ("" if p.meets_slo else " (missed the SLO)") for p in pts if p.name == n])
              for i, n in enumerate(names)]
    front = [(p.per_user, p.per_gpu) for p in pts if p.on_front]
    from sweep.report.records import short_names

    short = dict(zip((r.name for r in g.rows), short_names(g)))  # "b8 t4": the knobs that differ
    chart = svg.scatter_front(series, front, title=f"Tok/s per user vs tok/s {unit}",
                              x_label="tok/s per user (interactivity)", y_label=f"output tok/s {unit}",
                              labels={(p.per_user, p.per_gpu): f"{short.get(p.name, p.name)} ctx{p.context} c{p.load:g}"
                                      for p in pts if p.on_front},
                              hollow={(p.per_user, p.per_gpu) for p in pts if not p.meets_slo})
    chips = "".join(f'<span><i style="background:{x.color}"></i>{escape(x.label)}</span>' for x in series)
    return (f'<figure>{chart}<figcaption><div class="legend">{chips}</div>One point per config '
            "and load (every cell of every trial that passes the correctness gate); the dotted line is the "
            "Pareto front, its points labelled (config, context, load); rings missed the SLO.</figcaption></figure>")


def drawn(groups: Sequence[Group]) -> dict[int, tuple[set[int], bool]]:
    """Per group (1-based): the contexts whose tok/s chart this section draws, and whether it draws the
    group's user-vs-box front -- the group's own section leaves those out (each chart once)."""
    out = {}
    for i, g in enumerate(groups, 1):
        scheds = schedules_of(g)
        if scheds:
            out[i] = ({s.context for s in scheds}, bool(points_of(g, scheds[0].slo)))
    return out


def deployment_section(groups: Sequence[Group], colors: dict[str, str] | None = None,
                       dir_arg: str = "SWEEP_DIR") -> str:
    """``<section id="deployment">``: per group and context the schedule, then the charts: tok/s against
    load per context (with the best envelope) and the group's user-vs-box front, side by side.
    ``colors``: the page's colour per config; ``dir_arg``: ``--dir``'s argument (the results' real
    directory, quoted) in the command that writes the same as ``schedule.yaml``."""
    parts = []
    for i, g in enumerate(groups, 1):
        scheds = schedules_of(g)
        if not scheds:
            continue
        said = said_by_heading(g)
        body = []
        for s in scheds:
            slo = s.slo.label() if s.slo is not None else "no SLO set (objective.slo): every cell counts"
            lines = "".join(f"<li>{escape(line)}</li>" for line in summary_lines(s))
            body.append(f"<h3>Context {s.context} · {escape(slo)}</h3>{_schedule_table(s, said)}<ul>{lines}</ul>")
        charts = [_envelope_chart(s, colors) for s in scheds] + [_pareto_chart(g, scheds[0].slo, colors)]
        body.append(f'<div class="charts">{"".join(charts)}</div>')
        body.append(study_front_html(g))
        parts.append(f'<h2 id="deployment-{i}">Group {i}: {escape(g.hardware_label)} · {escape(g.model_label)} · '
                     f"{escape(g.rows[0].workload)}</h2>{''.join(body)}")
    if not parts:
        return ""
    return ('<section id="deployment" class="group"><h2>Deployment: which config at which load</h2>'
            '<p class="group-meta">The best feasible config per measured load (correctness gate passed, no '
            "failed request, the SLO met), its speedup over the autoregressive baseline at that load, ties "
            "within noise (≈), and where the baseline or a shorter draft takes over; "
            f"<code>python -m sweep.schedule --dir {escape(dir_arg)}"
            "</code> writes the same as schedule.yaml.</p>"
            + "".join(parts) + "</section>")
