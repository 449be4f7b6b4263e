"""A per-load table's verification shown: terminal lines, ``verify.yaml``, the chart, the report's section.

The chart is the dynamic config's tok/s curve over its family's static budgets and the
baseline (95% intervals as bars): where it runs below a static budget's curve, the table
loses there.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any, Sequence

from sweep.report.dynamic import table_text
from sweep.report.verify import FORMAT, Arm, Ratio, Verification


def _tok(arm: Arm | None, load: int, spread: float | None = None) -> str:
    if arm is None or arm.mean(load) is None:
        return "-"
    ci = arm.ci(load, spread)
    return f"{arm.mean(load):,.1f}" + (f" [{ci[0]:,.1f}-{ci[1]:,.1f}]" if ci else "")


def _r(r: Ratio | None) -> str:
    return r.text() + (f" {r.verdict}" if r.verdict in ("wins", "loses") else "") if r is not None else "-"


def text_lines(v: Verification) -> list[str]:
    best = f"b{v.best_static}" if v.best_static is not None else "-"
    lines = [f"verify: {v.title}" + (" (simulated)" if v.simulated else ""),
             f"  table {table_text(v.per_load)}; {v.rounds} round(s); best static over the loads: {best} "
             f"(of {', '.join(f'b{k}' for k in v.statics)})"]
    rows = [("conc", "K", "dynamic tok/s", f"best static {best}", "baseline", "vs best static",
             "vs best at load", "vs baseline")]
    for r in v.results:
        at = f"b{r.load_best} " + _r(r.vs_load_best) if r.load_best is not None else "-"
        rows.append((str(r.load), str(r.budget), _tok(v.dynamic, r.load, v.spread),
                     _tok(v.statics.get(v.best_static or -1), r.load, v.spread), _tok(v.baseline, r.load, v.spread),
                     _r(r.vs_best), at, _r(r.vs_baseline)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        lines.append("  " + "  ".join(c.rjust(w) if i < 2 else c.ljust(w)
                                      for i, (c, w) in enumerate(zip(row, widths))).rstrip())
    g = v.geomean
    lines.append(f"  geometric mean over loads: vs best static {g.text() if g else '-'}"
                 + (f"; vs baseline {v.geomean_baseline.text()}" if v.geomean_baseline else ""))
    loses = v.where_it_loses()
    lines.append("  where it loses: " + ("; ".join(loses) if loses else "nowhere beyond noise"))
    lines.append("  noise: " + noise_text(v))
    lines.append(f"  {v.headline()}")
    return lines


def noise_text(v: Verification) -> str:
    """What the intervals were judged with (sweep/report/verify.py's module doc)."""
    if v.noise_line:
        return f"95% intervals over {v.rounds} round(s) from the campaign model: {v.noise_line}"
    if v.spread is None:
        return (f"95% t-intervals over {v.rounds} paired round(s), the box's spread unknown"
                + (" (one round: no interval)" if v.rounds < 2 else ""))
    how = ("the wider of the spread's and each pair's own" if v.rounds == 2
           else "the spread's alone" if v.rounds < 2 else "t-intervals, never narrower than the spread gives")
    return (f"95% intervals over {v.rounds} paired round(s): {how}; the box's spread "
            f"{v.spread:.1%} per measurement ({v.spread_source})")


def _arm_dict(arm: Arm, loads: Sequence[int], spread: float | None = None) -> dict[str, Any]:
    return {"name": arm.name, "config_id": arm.config_id,
            "tok_s": {x: round(arm.mean(x) or 0.0, 3) for x in loads},
            "tok_s_ci": {x: [round(c[0], 3), round(c[1], 3)] if (c := arm.ci(x, spread)) else None for x in loads},
            "runs": {x: len(arm.values(x)) for x in loads}}


def verification_dict(v: Verification) -> dict[str, Any]:
    w, wb = v.worst, v.worst_baseline
    return {
        "hardware": v.hardware, "model": v.model, "workload": v.workload, "context": v.context,
        "family": v.family, "per_load": v.per_load, "simulated": v.simulated, "rounds": v.rounds,
        "spread": round(v.spread, 4) if v.spread is not None else None, "spread_source": v.spread_source or None,
        "loads": v.loads, "best_static": v.best_static,
        "speculation_pays": v.pays,
        "per_load_results": [{"load": r.load, "budget": r.budget,
                              "vs_best_static": r.vs_best.to_dict() if r.vs_best else None,
                              "best_at_load": r.load_best,
                              "vs_best_at_load": r.vs_load_best.to_dict() if r.vs_load_best else None,
                              "vs_baseline": r.vs_baseline.to_dict() if r.vs_baseline else None}
                             for r in v.results],
        "geomean_vs_best_static": v.geomean.to_dict() if v.geomean else None,
        "geomean_vs_baseline": v.geomean_baseline.to_dict() if v.geomean_baseline else None,
        "worst_load_vs_best_static": ({"load": w.load, **w.vs_best.to_dict()} if w and w.vs_best else None),
        "worst_load_vs_baseline": ({"load": wb.load, **wb.vs_baseline.to_dict()} if wb and wb.vs_baseline else None),
        "loses": v.where_it_loses(),
        "headline": v.headline(),
        "arms": {"dynamic": _arm_dict(v.dynamic, v.loads, v.spread),
                 **{f"b{k}": _arm_dict(a, v.loads, v.spread) for k, a in v.statics.items()},
                 **({"baseline": _arm_dict(v.baseline, v.loads, v.spread)} if v.baseline is not None else {})},
    }


def document(vs: Sequence[Verification], *, command: str = "") -> dict[str, Any]:
    return {"format": FORMAT, "command": command, "verifications": [verification_dict(v) for v in vs]}


def _series(v: Verification) -> list[tuple[str, Arm, str]]:
    """(label, arm, style): the statics thin, the baseline dashed, the dynamic config bold."""
    out = [(f"static b{k}", a, "static") for k, a in v.statics.items()]
    if v.baseline is not None:
        out.append(("baseline (spec=none)", v.baseline, "baseline"))
    out.append((f"dynamic {table_text(v.per_load)}", v.dynamic, "dynamic"))
    return out


def png(v: Verification, path: Path) -> Path | None:
    """tok/s against load: the dynamic curve over the static budgets' and the baseline's."""
    from sweep.report.plots import _figure, _legend, _save

    fig, (ax,) = _figure(1)
    fig.set_size_inches(8.4, 5.2)
    for label, arm, style in _series(v):
        xs = [x for x in v.loads if arm.mean(x) is not None]
        ys = [arm.mean(x) or 0.0 for x in xs]
        errs = [arm.ci(x, v.spread) for x in xs]
        lo = [y - e[0] if e else 0.0 for y, e in zip(ys, errs)]
        hi = [e[1] - y if e else 0.0 for y, e in zip(ys, errs)]
        styles: dict[str, dict[str, Any]] = {"dynamic": {"color": "black", "linewidth": 3.0, "zorder": 5},
                                             "baseline": {"color": "grey", "linestyle": "--", "linewidth": 1.3},
                                             "static": {"linewidth": 1.2, "alpha": 0.85}}
        kw = styles[style]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", markersize=3.5, capsize=3, label=label, **kw)
    if v.loads and v.loads[-1] >= 4 * v.loads[0]:
        ax.set_xscale("log", base=2)
        ax.set_xticks(v.loads, [f"{x:g}" for x in v.loads])
    ax.set_xlabel("concurrency (in-flight requests = the engine's batch size)")
    ax.set_ylabel("output tok/s (the box)")
    ax.grid(True, alpha=0.3)
    _legend(ax, "x-small")
    g = v.geomean
    sub = f"dynamic / best static (b{v.best_static}) {g.text()} over loads" if g else ""
    fig.suptitle(f"Per-load table verified: {v.hardware} · {v.model} · {v.workload} · ctx {v.context}"
                 f"{' (simulated)' if v.simulated else ''}\nfamily {v.family}\n{sub}", fontsize="small")
    return _save(fig, path)


def pngs(vs: Sequence[Verification], out_dir: Path) -> list[Path]:
    out = []
    for i, v in enumerate(vs, 1):
        p = png(v, Path(out_dir) / f"verify-{i}-{v.workload}-ctx{v.context}.png")
        if p is not None:
            out.append(p)
    return out


def html_section(vs: Sequence[Verification]) -> str:
    """The report's section: per verification the chart and the per-load table."""
    if not vs:
        return ""
    from sweep.report import svg

    parts = ['<section id="per-load"><h2>Per-load speculation, verified</h2>'
             "<p>A dynamic config (<code>spec.per_load</code>: the draft budget by the number of in-flight "
             "requests, the engine's batch size) measured against its family's static budgets and the "
             "autoregressive baseline over the same loads, in interleaved rounds (ratios: geometric mean of "
             "the per-round ratios, 95% intervals).</p>"]
    for v in vs:
        series = []
        for i, (label, arm, style) in enumerate(_series(v)):
            xs = [x for x in v.loads if arm.mean(x) is not None]
            series.append(svg.Series(label, "#111" if style == "dynamic" else svg.GREY if style == "baseline"
                                     else svg.color(i), [(x, arm.mean(x) or 0.0) for x in xs],
                                     [arm.ci(x, v.spread) for x in xs],
                                     [f"{label}: concurrency {x}: {arm.mean(x) or 0.0:,.1f} tok/s" for x in xs],
                                     dashed=style == "baseline"))
        log2 = bool(v.loads) and v.loads[-1] >= 4 * v.loads[0]
        chart = svg.line_chart(series, title=f"tok/s vs concurrency, context {v.context}",
                               x_label="concurrency (in-flight requests)", y_label="output tok/s",
                               log2_x=log2, width=620, height=330)
        chips = "".join(f'<span><i style="background:{s.color}"></i>{escape(s.label)}</span>' for s in series)
        rows = "".join(
            f"<tr><td class=num>{r.load}</td><td class=num>{r.budget}</td>"
            f"<td class=num>{escape(_tok(v.dynamic, r.load))}</td>"
            f"<td class=num>{escape(_r(r.vs_best))}</td>"
            f"<td class=num>{escape(('b' + str(r.load_best) + ' ' + _r(r.vs_load_best)) if r.load_best else '-')}</td>"
            f"<td class=num>{escape(_r(r.vs_baseline))}</td></tr>" for r in v.results)
        loses = v.where_it_loses()
        parts.append(
            f"<h3>{escape(v.title)}</h3><p>table <code>{escape(table_text(v.per_load))}</code>, {v.rounds} round(s); "
            f"best static over the loads: b{v.best_static}. <b>{escape(v.headline())}</b>. Where it loses: "
            f"{escape('; '.join(loses) if loses else 'nowhere beyond noise')}.</p>"
            f'<figure class="wide">{chart}<figcaption><div class="legend">{chips}</div>The dynamic config '
            "(black) over the static budgets it chose between and the baseline (dashed grey).</figcaption></figure>"
            "<table><thead><tr><th>concurrency</th><th>budget</th><th>dynamic tok/s [95%]</th>"
            f"<th>vs best static b{v.best_static}</th><th>vs the best static at that load</th><th>vs baseline</th>"
            f"</tr></thead><tbody>{rows}</tbody></table>")
    parts.append("</section>")
    return "".join(parts)
