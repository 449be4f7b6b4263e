"""The HTML report: one self-contained file per sweep that a person can send to a colleague.

Inline CSS, charts as inline SVG (:mod:`sweep.report.svg`), no script and no
external resource (a Content-Security-Policy says so, so it renders the same
offline). Per group of comparable trials (:mod:`sweep.report.compare`): the
ranking with the best feasible configuration and its speedup, headline tok/s
per configuration, tok/s against concurrency per context, per-stream against
aggregate tok/s with the Pareto front, accept length and speedup against the
draft budget (or topk), each trial's cells; the deployment section (which
config at which load, tok/s per user vs per GPU: :mod:`sweep.report.deployment_html`);
then every failure with its reason and log tail, and trials stopped early (pruned). Intervals are shown
where cells were measured with ``workload.repeats``.

Written to ``<sweep_dir>/report.html`` at the end of a multirun or search
(and logged to its MLflow parent run); ``python -m sweep.report --format html``.
"""

from __future__ import annotations

import datetime as dt
from html import escape
from pathlib import Path
from typing import Any, Sequence

from sweep.record.result import TrialResult
from sweep.report import svg
from sweep.report._html_style import CSS
from sweep.report.compare import Group, Row, build_groups
from sweep.report.html_names import results_dir
from sweep.report.records import (LANDSCAPE_MORE, headline_cell, interval, objective_columns,
                                  objective_text, record, recorded_landscape, rerun_command, short_names)
from sweep.score.metrics import ok_cells
from sweep.score.names import LABELS, shown

FILENAME = "report.html"
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _f(x: Any, nd: int = 1) -> str:
    return "–" if x is None else f"{float(x):,.{nd}f}"


def _td(text: str, num: bool = True) -> str:
    return f'<td class="n">{text}</td>' if num else f"<td>{text}</td>"


Colors = dict[str, str]  # a config's name -> its colour, the same in every chart of the page


def palette(groups: Sequence[Group]) -> Colors:
    """One colour per config across the whole page (first come, first served; baselines grey)."""
    out: Colors = {}
    for g in groups:
        for r in g.rows:
            if r.name not in out and (r.is_baseline or r.doc.ok):
                out[r.name] = svg.GREY if r.is_baseline else svg.color(sum(c != svg.GREY for c in out.values()))
    return out


def _headline_html(g: Group, r: Row) -> str:
    rec = record(g, r)
    text = _f(rec["tok_s_lowc"])
    if rec["tok_s_lowc_ci_low"] is not None:
        text += (f'<span class="ci">95% CI {_f(rec["tok_s_lowc_ci_low"])}–{_f(rec["tok_s_lowc_ci_high"])}'
                 f' (n={rec["repeats"]})</span>')
    return text


def _objective_figure(g: Group, r: Row) -> tuple[str, str] | None:
    """(label, value) of the figure the group's objective maximises when it is not the low-load tok/s
    (a max-load study's max load, a goodput study's goodput), else None."""
    extra = objective_columns(g)
    if not extra:
        return None
    name, key = extra[0]
    return name, shown(key if key != "objective_value" else "", record(g, r)[key])


def _speedup_text(r: Row) -> str:
    if r.is_baseline and r.doc.ok:
        return "baseline"
    return "–" if r.speedup is None else f"{r.speedup:.2f}×"


def _table(g: Group) -> str:
    """The ranking: key columns first (rank, trial, status, the objective's own figure, low-load tok/s,
    speedup), latencies as p50 / p99 (the cells table has p90 too), columns nobody filled left out;
    headers wrap, so the table fits a 1400 px page (scrolling in its own box if it still cannot)."""
    best = g.best
    extra = objective_columns(g)
    head = ["#", "trial", "status", *(name for name, _ in extra), g.headline_label, LABELS["speedup_vs_baseline"],
            LABELS["tok_s_peak"], LABELS["accept_len"], LABELS["accept_rate"], LABELS["coding_pass_rate"],
            "TTFT ms p50 / p99", "TPOT ms p50 / p99", LABELS["errors"], LABELS["usd_per_mtok"], LABELS["startup_s"]]
    rated = any(r.speculation.rate is not None for r in g.rows)
    priced = any(r.metrics.usd_per_mtok is not None for r in g.rows)
    erred = any(r.metrics.errors for r in g.rows)
    rows = []
    for r in g.rows:
        rec = record(g, r)
        cls = ("best" if r is best else r.status if r.status != "ok" else "" if r.feasible else "infeasible")
        status = escape(r.status_text)
        if r.doc.ok and not r.feasible:
            status += " (infeasible)"
        lat = {k: " / ".join(_f(rec[f"{k}_ms_p{q}"], 0 if k == "ttft" else 1) for q in (50, 99))
               for k in ("ttft", "tpot")}
        mark = "★ " if r is best else "≈ " if r.tied_with_best or (best is None and r is g.leader
                                                                     and g.verdict == "open") else ""
        peak_nd = 0 if (rec["tok_s_peak"] or 0) >= 100 else 1  # 0.5 tok/s is not "0"
        rows.append(f'<tr class="{cls}">{_td(mark + str(r.rank or ""))}'
                    f'<td class="name">{escape(r.name)}'
                    + (f' <small class="muted">×{r.copies}</small>' if r.copies > 1 else "")
                    + f'</td><td class="status">{status}</td>'
                    + "".join(_td(escape(shown(key if key != "objective_value" else "", rec[key])))
                              for _, key in extra)
                    + f"{_td(_headline_html(g, r))}{_td(_speedup_text(r))}"
                    f"{_td(_f(rec['tok_s_peak'], peak_nd))}{_td(_f(rec['accept_len'], 2))}"
                    + (_td(_rate_html(r)) if rated else "")
                    + f"{_td(_f(rec['coding_pass_rate'], 2))}{_td(lat['ttft'])}{_td(lat['tpot'])}"
                    + (_td(str(rec['errors'] if rec['errors'] is not None else '–')) if erred else "")
                    + (_td(_f(rec['usd_per_mtok'], 2)) if priced else "")
                    + f"{_td(_f(rec['startup_s'], 1))}</tr>")
    if not rated:  # no server reported a rate (or only baselines)
        head.remove(LABELS["accept_rate"])
    if not priced:  # no hardware.cost_per_hour: no column of dashes
        head.remove(LABELS["usd_per_mtok"])
    if not erred:  # no request failed anywhere in the group
        head.remove(LABELS["errors"])
    ths = "".join(f'<th class="{"n" if i in (0,) or i > 2 else ""}">{escape(h)}</th>' for i, h in enumerate(head))
    return (f'<div class="tablewrap"><table class="ranking"><thead><tr>{ths}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _rate_html(r: Row) -> str:
    """The accept rate, with accepted of drafted as its tooltip when counted."""
    spec = r.speculation
    if spec.rate is None:
        return "–"
    return f'<span title="{escape(spec.rate_text())}">{spec.rate:.2f}</span>'


def _speculation_notes(g: Group) -> str:
    """One line per trial whose draft was never accepted (it makes the trial slower, not faster)."""
    notes = [f"<b>{escape(r.name)}</b>: {escape(v)}" for r in g.rows
             if r.doc.ok and (v := r.speculation.verdict()) is not None]
    return "".join(f'<p class="note">{n}</p>' for n in notes)


def _legend(g: Group, colors: Colors) -> str:
    chips = [f'<span><i style="background:{colors[r.name]}"></i>{escape(r.name)}</span>'
             for r in g.rows if r.name in colors]
    return f'<div class="legend">{"".join(chips)}</div>' if chips else ""


def _figure(chart: str, caption: str, wide: bool = False,
            legend: Sequence[tuple[str, str]] = ()) -> str:
    chips = "".join(f'<span><i style="background:{c}"></i>{escape(label)}</span>' for label, c in legend)
    keys = f'<div class="legend">{chips}</div>' if chips else ""
    return (f'<figure class="{"wide" if wide else ""}">{chart}<figcaption>{keys}{escape(caption)}'
            "</figcaption></figure>")


def _bars(g: Group, colors: Colors) -> str:
    bars = []
    for r in g.rows:
        note = r.status_text if not r.doc.ok else ""
        value = r.head.tok_s if r.doc.ok else None
        if r.doc.ok and r.speedup is not None and not r.is_baseline:
            note = f"{r.speedup:.2f}× baseline"
        elif r.is_baseline and r.doc.ok:
            note = "baseline"
        if value is None and not note:
            note = "no cell measured"
        bars.append(svg.Bar(r.name, value, colors.get(r.name, svg.GREY), note, interval(headline_cell(r))))
    return _figure(svg.bar_chart(bars, title=f"{g.headline_label} per configuration",
                                 x_label=f"output tok/s at concurrency {g.rows[0].head.concurrency}"),
                   "Best feasible first; bars end in the value (with its 95% interval when the cell was "
                   "repeated); trials that did not finish say why.", wide=True)


def _per_context(g: Group, colors: Colors, drawn: set[int] = frozenset()) -> list[str]:  # type: ignore[assignment]
    """tok/s against concurrency per context -- for the contexts the deployment section does not draw
    (its chart is the same lines with the best envelope: each chart once)."""
    ok = [r for r in g.rows if r.doc.ok and ok_cells(r.doc.cells)]
    levels = sorted({c.concurrency for r in ok for c in ok_cells(r.doc.cells)})
    if len(levels) < 2:
        return []
    out = []
    for ctx in sorted({c.context for r in ok for c in ok_cells(r.doc.cells)} - set(drawn)):
        series = []
        for r in ok:
            cells = [c for c in ok_cells(r.doc.cells) if c.context == ctx]
            if cells:
                series.append(svg.Series(
                    r.name, colors[r.name], [(float(c.concurrency), float(c.output_tok_s or 0)) for c in cells],
                    [interval(c) for c in cells],
                    [f"{r.name}: ctx {ctx}, conc {c.concurrency}: {c.output_tok_s:,.1f} tok/s" for c in cells],
                    dashed=r.is_baseline))
        out.append(_figure(svg.line_chart(series, title=f"tok/s vs concurrency, context {ctx}",
                                          x_label="concurrency (in-flight requests)",
                                          y_label="output tok/s", log2_x=True),
                           f"Output tok/s of the box against concurrency at context {ctx}: one line per "
                           "configuration (dashed: the baseline)."))
    return out


def _pareto(g: Group, colors: Colors) -> list[str]:
    from sweep.report.plots import pareto_front

    series, every = [], []
    short = {id(r): n for r, n in zip(g.rows, short_names(g))}
    for r in g.rows:
        cells = [c for c in ok_cells(r.doc.cells) if c.per_stream_tok_s is not None] if r.doc.ok else []
        if cells:
            pts = [(float(c.per_stream_tok_s or 0), float(c.output_tok_s or 0)) for c in cells]
            every += pts
            series.append(svg.Series(r.name, colors[r.name], pts, tips=[
                f"{r.name}: ctx {c.context}, conc {c.concurrency}: {c.per_stream_tok_s:,.1f} per stream, "
                f"{c.output_tok_s:,.1f} aggregate" for c in cells],
                labels=[" ".join(x for x in (short[id(r)], f"ctx{c.context} c{c.concurrency}") if x)
                        for c in cells]))
    if not series:
        return []
    chart = svg.scatter_front(series, pareto_front(every), title="tok/s per user vs tok/s of the box",
                              x_label="tok/s per user (what one user sees)",
                              y_label="tok/s (all streams: the box)")
    return [_figure(chart, "Every cell of every finished trial; the dotted line is the Pareto front: "
                           "no other cell is faster for both the user and the box. Points on it are "
                           "labelled with their configuration, context and concurrency.",
                    legend=[(s.label, s.color) for s in series])]


LATENCY_CHARTS = (("ttft", "TTFT", "time to first token"), ("tpot", "TPOT", "time per output token"),
                  ("itl", "ITL", "inter-token latency"))


def _latency(g: Group, colors: Colors) -> list[str]:
    """TTFT, TPOT and ITL p50 (solid) and p99 (dashed) against concurrency, per context."""
    ok = [r for r in g.rows if r.doc.ok and ok_cells(r.doc.cells)]
    levels = sorted({c.concurrency for r in ok for c in ok_cells(r.doc.cells)})
    if len(levels) < 2:
        return []
    out = []
    short = {id(r): n for r, n in zip(g.rows, short_names(g))}
    for ctx in sorted({c.context for r in ok for c in ok_cells(r.doc.cells)}):
        for key, name, what in LATENCY_CHARTS:
            series = []
            for r in ok:
                cells = sorted((c for c in ok_cells(r.doc.cells) if c.context == ctx), key=lambda c: c.concurrency)
                for q, dashed in (("p50", False), ("p99", True)):
                    pts = [(float(c.concurrency), float(v)) for c in cells
                           if (v := c.get(f"{key}_ms_{q}")) is not None]
                    if pts:
                        series.append(svg.Series(f"{r.name} {q}", colors[r.name], pts, dashed=dashed, tips=[
                            f"{short[id(r)] or r.name}: ctx {ctx}, conc {int(x)}: {name} {q} {y:,.1f} ms"
                            for x, y in pts]))
            if series:
                chart = svg.line_chart(series, title=f"{name} p50 / p99, context {ctx}",
                                       x_label="concurrency (in-flight requests)", y_label=f"{name} ms",
                                       log2_x=True)
                out.append(_figure(chart, f"{what.capitalize()} against concurrency at context {ctx}: "
                                          "solid p50, dashed p99, one colour per configuration."))
    return out


LINES = ("#57606a", "#a0a7b0", "#24292f", "#c5cbd3")  # the knob charts' lines: neutral, so colour means config


def _knob_charts(g: Group, colors: Colors) -> list[str]:
    """Accept length and speedup against the budget (or topk), one line per other knob setting;
    each point in its config's colour (the page's colour for that config)."""
    spec = [r for r in g.rows if r.doc.ok and not r.is_baseline]
    for knob, other, label in (("budget", "topk", "draft budget (spec.budget)"),
                               ("topk", "budget", "draft topk (spec.topk)")):
        values = {getattr(r, knob) for r in spec if isinstance(getattr(r, knob), (int, float))}
        if len(values) >= 2:
            break
    else:
        return []
    lines: dict[str, list[Row]] = {}
    for r in spec:
        if isinstance(getattr(r, knob), (int, float)):
            # the other knobs that are set name the line (llama.cpp drafts have no topk or window)
            fixed = [f"{k} {v}" for k in (other, "window") if (v := getattr(r, k)) is not None]
            lines.setdefault(", ".join(fixed) or r.spec, []).append(r)
    log2 = min(values) > 0 and max(values) >= 4 * min(values)
    out = []
    values_of = {"accept": lambda r: r.metrics.accept_len, "rate": lambda r: r.speculation.rate,
                 "speedup": lambda r: r.speedup}
    for metric, title, y_label in (("accept", "Accept length", "tokens per verify step"),
                                   ("rate", "Accept rate", "accepted / drafted"),
                                   ("speedup", "Speedup over the baseline", "× baseline")):
        series = []
        for i, (name, rows) in enumerate(sorted(lines.items())):
            kept = [(r, v) for r in rows if (v := values_of[metric](r)) is not None]
            pts = [(float(getattr(r, knob)), v) for r, v in kept]
            if pts:
                series.append(svg.Series(name, LINES[i % len(LINES)], pts, tips=[
                    f"{r.name}: {name}, {knob} {x:g}: {y:.2f}" for (x, y), (r, _) in zip(pts, kept)],
                    dashed=i % 2 == 1, point_colors=[colors.get(r.name, svg.GREY) for r, _ in kept]))
        if not series:
            if metric == "speedup":
                out.append('<p class="note">No speedup: this group has no spec=none baseline '
                           '(run <code>spec=none</code> with the same box and workload).</p>')
            continue
        chart = svg.line_chart(series, title=f"{title} vs {knob}", x_label=label, y_label=y_label,
                               log2_x=log2, y_zero=metric != "accept", x_ticks=sorted(values),
                               hlines=[(1.0, "baseline")] if metric == "speedup" else ())
        caption = "Finished trials, each point in its config's colour; " + {
            "accept": "the trial's accept length over all cells (1 = no draft token accepted).",
            "rate": "accepted over drafted draft tokens (where the server counts them; else its own rate).",
            "speedup": "headline tok/s over the group's baseline."}[metric]
        out.append(_figure(chart, caption, legend=[(("dashed: " if s.dashed else "") + s.label, s.color)
                                                   for s in series]))
    return out


def _cells(g: Group) -> str:
    parts = []
    for r in g.rows:
        if not r.doc.cells:
            continue
        rows = []
        judged = any(c.slo_attainment is not None for c in r.doc.cells)  # objective.slo: sweep/stats/slo.py
        for c in r.doc.cells:
            ci = interval(c)
            tok = _f(c.output_tok_s) + (f' <span class="ci">[{_f(ci[0])}, {_f(ci[1])}]</span>' if ci else "")
            lat = "".join(_td(" / ".join(_f(c.get(f"{m}_ms_p{q}"), 1) for q in (50, 90, 99)))
                          for m in ("ttft", "itl", "tpot"))
            slo = (_td("–" if c.slo_attainment is None else f"{c.slo_attainment:.0%}") + _td(_f(c.goodput_tok_s))
                   if judged else "")
            rows.append(f"<tr>{_td(str(c.context))}{_td(str(c.concurrency))}{_td(str(c.requests))}"
                        f"{_td(str(c.errors))}{_td(tok)}{_td(_f(c.per_stream_tok_s))}{lat}"
                        f"{_td(_f(c.accept_len, 2))}{slo}</tr>")
        head = "".join(f'<th class="n">{h}</th>' for h in (
            "ctx", "conc", "requests", "errors", LABELS["output_tok_s"], LABELS["per_stream_tok_s"],
            "TTFT ms p50/90/99", "ITL ms p50/90/99", "TPOT ms p50/90/99", LABELS["accept_len"],
            *(("SLO attainment", LABELS["goodput_tok_s"]) if judged else ())))
        spec = r.speculation
        said = []
        if spec.rate is not None:
            said.append(f"accept rate {spec.rate_text()}")
        if (positions := spec.positions_text()) is not None:
            said.append(f"accepted per draft position (share of drafting steps): {positions}")
        note = f'<p class="muted">{escape("; ".join(said))}</p>' if said else ""
        parts.append(f"<details><summary>cells of {escape(r.name)} ({escape(r.status)})</summary>{note}"
                     f'<div class="tablewrap"><table><thead><tr>{head}</tr></thead>'
                     f"<tbody>{''.join(rows)}</tbody></table></div></details>")
    return "".join(parts)


def _group(g: Group, i: int, colors: Colors, drawn: tuple[set[int], bool] = (set(), False),
           results: str | None = None) -> str:
    """One group; ``drawn``: the contexts whose tok/s chart, and whether the Pareto chart, the
    deployment section draws for this group (each chart once on the page); ``results``: the
    results' directory, for the decide command."""
    best = g.best
    if best is not None:
        sp = f", {best.speedup:.2f}× the baseline" if best.speedup is not None and not best.is_baseline else ""
        wanted = _objective_figure(g, best)  # a max-load study's best: its max load first
        verdict = (f'<div class="best">★ Best feasible: <b>{escape(best.name)}</b> — '
                   + (f"{escape(wanted[0])} {escape(wanted[1])}, " if wanted else "")
                   + f"{_f(best.head.tok_s)} {escape(g.headline_label)}{sp}"
                   f"<br><small>{escape(g.noise_line or '')}</small>"
                   f"<br><small>run it again: <code>{escape(rerun_command(best))}</code></small></div>")
    elif g.leader is not None:
        lead = g.leader
        verdict = (f'<div class="note">No best yet: <b>{escape(lead.name)}</b> leads with '
                   f"{_f(lead.head.tok_s)} {escape(g.headline_label)}"
                   f"<br><small>{escape(g.noise_line or '')}</small>"
                   + (f"<br><small>to decide: {escape(LANDSCAPE_MORE)}</small></div>"
                      if recorded_landscape(r.doc for r in g.rows) else
                      "<br><small>to decide: <code>python -m sweep.decide --dir "
                      f"{escape(_dir_arg(results))}</code> measures again only the open cells "
                      "(the runs pool as repeats)</small></div>"))
    else:
        verdict = '<div class="note">No feasible trial in this group.</div>'
    meta = (f'<p class="group-meta"><b>{escape(g.hardware_label)}</b> · model <b>{escape(g.model_label)}</b> · '
            f"workload <b>{escape(g.workload_label)}</b> · objective <b>{escape(objective_text(g))}</b>"
            + (' <span class="pill sim">simulated</span>' if g.simulated else "") + "</p>")
    contexts, pareto_drawn = drawn
    charts = [_bars(g, colors), *_per_context(g, colors, contexts), *([] if pareto_drawn else _pareto(g, colors)),
              *_knob_charts(g, colors), *_latency(g, colors)]
    if contexts or pareto_drawn:
        front = " and the user-vs-box front" if pareto_drawn else ""
        charts.append(f'<p class="muted">tok/s against concurrency{front} of this group: in the '
                      f'<a href="#deployment-{i}">deployment section</a>.</p>')
    return (f'<section id="group-{i}" class="group"><h2>Group {i}: {escape(g.hardware_label)} · '
            f"{escape(g.model_label)} · {escape(g.rows[0].workload)}</h2>{meta}{verdict}{_table(g)}"
            f"{_speculation_notes(g)}"
            f'{_legend(g, colors)}<div class="charts">{"".join(charts)}</div>'
            f'<h3>Cells</h3>{_cells(g)}</section>')


def _not_finished(groups: Sequence[Group], statuses: tuple[str, ...], sid: str, title: str, empty: str) -> str:
    rows = []
    for g in groups:
        for r in g.rows:
            if r.status not in statuses:
                continue
            f = r.doc.failure
            tail = (f'<details><summary>log tail</summary><pre>{escape(f.log_tail)}</pre></details>'
                    if f is not None and f.log_tail else "")
            rows.append(f'<tr class="{escape(r.status)}"><td>{escape(r.name)}</td><td>{escape(r.status)}</td>'
                        f"<td>{escape(r.reason or '–')}</td>"
                        f'<td style="white-space:normal">{escape(f.message if f else "")}{tail}</td>'
                        f"{_td(str(len(r.doc.cells)))}<td>{escape(g.rows[0].workload)}</td></tr>")
    body = (f'<div class="tablewrap"><table><thead><tr><th>trial</th><th>status</th><th>reason</th>'
            f'<th>message</th><th class="n">cells kept</th><th>workload</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>" if rows else f'<p class="muted">{empty}</p>')
    return f'<section id="{sid}"><h2>{title}</h2>{body}</section>'


def _cards(groups: Sequence[Group], docs: Sequence[TrialResult]) -> str:
    counts: dict[str, int] = {}
    for d in docs:
        counts[str(d.status)] = counts.get(str(d.status), 0) + 1
    pills = " ".join(f'<span class="pill {escape(k)}">{n} {escape(k)}</span>' for k, n in sorted(counts.items()))
    cards = [f'<div class="card"><div class="k">trials</div><div class="v">{len(docs)}</div>'
             f'<div class="d">{pills}</div></div>']
    for i, g in enumerate(groups, 1):
        best = g.best or g.leader
        what = "best feasible" if g.best is not None else "leader (undecided)" if best else "best feasible"
        wanted = _objective_figure(g, best) if best else None
        value = ("–" if best is None else f"{escape(wanted[1])} <small>{escape(wanted[0])}</small>" if wanted
                 else f"{_f(best.head.tok_s)} <small>{escape(g.headline_label)}</small>")
        sp = f" · {best.speedup:.2f}× baseline" if best and best.speedup and not best.is_baseline else ""
        cards.append(f'<div class="card"><div class="k">group {i}: {what}</div><div class="v">{value}</div>'
                     f'<div class="d">{escape(best.name) if best else "none feasible"}{sp}<br>'
                     f"{escape(g.hardware_label)} · {escape(g.rows[0].workload)}</div></div>")
    return f'<div class="cards">{"".join(cards)}</div>'


FOOTER = """<footer><dl>
<dt>Groups</dt><dd>Trials are compared only with trials on the same box and layout, model, workload matrix
and load (arrival rate, prompts, temperature), simulated or not, with the same objective; a ranking never
crosses groups.</dd>
<dt>Low-load tok/s</dt><dd>Output tok/s of the lowest measured concurrency at the shortest context
(key <code>tok_s_lowc</code>; its concurrency in the column header: c1, c2 ...). Each figure has one
name on this page, in the terminal and in MLflow's columns (docs/tracking.md lists them).</dd>
<dt>Feasible</dt><dd>Ended ok and meets the objective's constraints (coding pass rate, zero request errors,
an optional p99 TTFT limit).</dd>
<dt>tok/s and tok/s per user</dt><dd><i>tok/s</i> is the cell's output tokens over its wall time, every stream
together, time to first token and the gaps between requests included (the box's throughput);
<i>tok/s per user</i> is one stream's decode speed, its tokens over (end − first token). At concurrency 1
it is therefore a little above tok/s: it leaves out the TTFT.</dd>
<dt>Accept length and rate</dt><dd>Accept length: tokens per target verify step (1 = no draft token
accepted). Accept rate: accepted over drafted draft tokens, where the server counts them (llama.cpp,
vLLM), else the server's own rate (SGLang's log).</dd>
<dt>Speedup</dt><dd>Low-load tok/s over the spec=none (autoregressive) baseline of the same group.</dd>
<dt>Intervals</dt><dd>95% t-intervals over <code>workload.repeats</code> when a cell was measured more than once.</dd>
</dl></footer>"""


def _dir_arg(results: str | None) -> str:
    """``--dir``'s argument in a printed command: the results' real directory, quoted for a shell."""
    import shlex

    return shlex.quote(results) if results else "SWEEP_DIR"


def _deployment(groups: Sequence[Group], colors: Colors,
                results: str | None) -> tuple[str, dict[int, tuple[set[int], bool]]]:
    """The deployment section and what it draws per group (1-based); a bug there costs that
    section, never the page."""
    try:
        from sweep.report.deployment_html import deployment_section, drawn

        return deployment_section(groups, colors, _dir_arg(results)), drawn(groups)
    except Exception as exc:  # noqa: BLE001
        import logging

        logging.getLogger(__name__).warning("report: deployment section skipped: %s", exc)
        return "", {}


def _per_load(docs: Sequence[TrialResult], sources: Sequence[str] | None) -> str:
    """Dynamic (per-load) configs checked against their family (sweep/report/verify.py); a bug there
    costs that section, never the page."""
    if not any(d.spec_value("per_load") for d in docs):
        return ""
    try:
        from sweep.report.verify import verifications
        from sweep.report.verify_view import html_section

        return html_section(verifications(docs, sources))
    except Exception as exc:  # noqa: BLE001
        import logging

        logging.getLogger(__name__).warning("report: per-load section skipped: %s", exc)
        return ""


def render(docs: Sequence[TrialResult], *, title: str, sources: Sequence[str] | None = None,
           generated: dt.datetime | None = None) -> str:
    groups = build_groups(docs, sources)
    when = (generated or dt.datetime.now()).strftime("%Y-%m-%d %H:%M")
    sim = all(d.simulated for d in docs) and docs
    nav = " · ".join(f'<a href="#group-{i}">group {i}</a>' for i in range(1, len(groups) + 1))
    colors = palette(groups)  # one colour per config on the whole page
    results = results_dir(sources)  # the real path in the commands the page prints
    deployment, drawn = _deployment(groups, colors, results)
    body = "".join(_group(g, i, colors, drawn.get(i, (set(), False)), results) for i, g in enumerate(groups, 1))
    per_load = _per_load(docs, sources)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body><main>"
            f"<header><h1>specsweep report: {escape(title)}</h1>"
            f'<p class="sub">{len(docs)} trials in {len(groups)} group(s) of comparable trials · generated {when}'
            + (' · <span class="pill sim">simulated results</span>' if sim else "")
            + f"<br>{nav}" + (' · <a href="#deployment">deployment</a>' if deployment else "")
            + (' · <a href="#per-load">per-load speculation</a>' if per_load else "")
            + " · <a href=\"#failures\">failures</a> · <a href=\"#pruned\">pruned</a></p></header>"
            f"{_cards(groups, docs)}{body}{deployment}{per_load}"
            + _not_finished(groups, ("failed", "interrupted", "running"), "failures",
                            "Failures and unfinished trials", "Every trial finished.")
            + _not_finished(groups, ("pruned",), "pruned", "Pruned trials (stopped early by the search)",
                            "No trial was pruned.")
            + f"{FOOTER}</main></body></html>\n")


def write_report(docs: Sequence[TrialResult], path: Path, *, title: str,
                 sources: Sequence[str] | None = None) -> Path:
    from sweep.io.atomic import write_atomic_text

    return write_atomic_text(Path(path), render(docs, title=title, sources=sources))
