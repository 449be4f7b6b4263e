"""PNG plots of one trial and of a whole sweep (matplotlib, no display).

Why: MLflow's own charts draw one metric per panel; an engineer choosing a
draft-tree budget wants the shapes side by side -- throughput per context as
concurrency grows, where latency turns, and the per-stream vs aggregate
trade-off across every configuration of a sweep (the Pareto front).

Only ``matplotlib.figure.Figure`` is used (never pyplot): no GUI backend is
selected, nothing global changes, and plotting works in a headless job.
Figures are rendered straight to PNG by the Agg canvas in one draw
(``savefig`` would draw twice: a dry run for the layout, then the real one).
Every function returns the paths it wrote and writes nothing when there is
no data, so callers can log whatever exists.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Sequence

from sweep.record.result import Cell, TrialResult
from sweep.score.metrics import honest, ok_cells
from sweep.score.names import label as figure_label

Doc = TrialResult


def _figure(ncols: int = 1) -> tuple[Any, list[Any]]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4 * ncols, 4.6), dpi=100, layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


def _by_context(cells: Iterable[Cell]) -> dict[int, list[Cell]]:
    out: dict[int, list[Cell]] = defaultdict(list)
    for c in cells:
        out[int(c.context)].append(c)
    return {k: sorted(v, key=lambda c: c.concurrency) for k, v in sorted(out.items())}


def _concurrency_axis(ax: Any, cells: Sequence[Cell]) -> None:
    levels = sorted({int(c.concurrency) for c in cells})
    if len(levels) > 1 and levels[0] > 0:
        ax.set_xscale("log", base=2)
    ax.set_xticks(levels, [str(x) for x in levels])
    ax.set_xlabel("concurrency")
    ax.grid(True, alpha=0.3)


def _legend(ax: Any, size: str) -> None:
    """A legend only where something is labelled (matplotlib warns "No artists with labels")."""
    if ax.get_legend_handles_labels()[1]:
        ax.legend(fontsize=size)


def label_inside(ax: Any, text: str, x: float, y: float, xs: Sequence[float], ys: Sequence[float], *,
                 log2_x: bool = False, size: str = "x-small") -> None:
    """A point's label on the side that keeps it inside the plot: to the left of points in the
    right part of the x range, below points near the top (a label past the frame is cut off)."""
    import math

    def pos(v: float) -> float:
        return math.log2(v) if log2_x and v > 0 else v

    lo, hi = pos(min(xs)), pos(max(xs))
    right = hi > lo and (pos(x) - lo) / (hi - lo) > 0.55
    top = max(ys) > 0 and y > 0.9 * max(ys)
    ax.annotate(text, (x, y), textcoords="offset points", xytext=(-7 if right else 7, -9 if top else 6),
                ha="right" if right else "left", va="top" if top else "bottom", fontsize=size,
                annotation_clip=True)


def _save(fig: Any, path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig).print_png(path)  # lays out and renders once
    return path


def _title(doc: Doc) -> str:
    sim = " (simulated)" if doc.simulated else ""
    return f"{doc.trial.name}{sim}"


def throughput_vs_concurrency(doc: Doc, path: Path) -> Path | None:
    """Aggregate and per-stream output tok/s against concurrency, one line per context."""
    cells = ok_cells(doc.cells)
    if not cells:
        return None
    fig, (agg, per) = _figure(2)
    for ctx, row in _by_context(cells).items():
        xs = [c.concurrency for c in row]
        agg.plot(xs, [c.output_tok_s for c in row], marker="o", label=f"ctx {ctx}")
        per.plot(xs, [c.per_stream_tok_s or 0.0 for c in row], marker="o", label=f"ctx {ctx}")
    agg.set_ylabel("output tok/s (all streams)")
    per.set_ylabel("output tok/s per user")
    for ax in (agg, per):
        _concurrency_axis(ax, cells)
        ax.set_ylim(bottom=0)  # throughput from 0: a small gap looks small
        _legend(ax, "small")
    fig.suptitle(f"Throughput vs concurrency: {_title(doc)}")
    return _save(fig, path)


def latency_vs_concurrency(doc: Doc, path: Path) -> Path | None:
    """TTFT, TPOT and ITL against concurrency, per context: p50 solid, p99 dashed."""
    cells = ok_cells(doc.cells)
    if not cells:
        return None
    fig, axes = _figure(3)
    for i, (ctx, row) in enumerate(_by_context(cells).items()):
        xs = [c.concurrency for c in row]
        color = f"C{i}"
        for ax, key in zip(axes, ("ttft", "tpot", "itl")):
            for q, style in (("p50", "-"), ("p99", "--")):
                ys = [c.get(f"{key}_ms_{q}") for c in row]
                if all(y is not None for y in ys):
                    ax.plot(xs, ys, style, marker="o", color=color, label=f"ctx {ctx} {q}")
    for ax, name in zip(axes, ("TTFT", "TPOT", "ITL")):
        ax.set_ylabel(f"{name} (ms), p50 solid, p99 dashed")
        _concurrency_axis(ax, cells)
        _legend(ax, "x-small")
    fig.suptitle(f"Latency vs concurrency: {_title(doc)}")
    return _save(fig, path)


def trial_plots(doc: Doc, out_dir: Path) -> list[Path]:
    """Both per-trial plots into ``out_dir``; empty when the trial has no cells."""
    out = [throughput_vs_concurrency(doc, out_dir / "throughput_vs_concurrency.png"),
           latency_vs_concurrency(doc, out_dir / "latency_vs_concurrency.png")]
    return [p for p in out if p is not None]


def throughput_vs_spec(docs: Sequence[Doc], path: Path) -> Path | None:
    """tok_s_lowc (headline) and tok_s_peak against the draft budget, one line per
    hardware x topk x window; failed trials as red crosses on the x axis;
    spec=none baselines as dashed horizontal lines."""
    series: dict[str, list[tuple[float, Doc]]] = defaultdict(list)
    baselines: list[Doc] = []
    for doc in docs:
        budget = doc.spec_value("budget")
        if doc.spec_value("algorithm") == "none" or budget is None:
            if doc.ok:
                baselines.append(doc)
            continue
        knobs = [f"{k[0]}{v}" for k in ("topk", "window") if (v := doc.spec_value(k)) is not None]
        key = " ".join([doc.trial.hardware, doc.trial.spec, *knobs])
        series[key].append((float(budget), doc))
    if not series:
        return None
    fig, axes = _figure(2)
    for ax, metric in zip(axes, ("tok_s_lowc", "tok_s_peak")):
        for label, points in sorted(series.items()):
            points.sort(key=lambda p: p[0])
            ok = [(b, honest(d).get(metric)) for b, d in points
                  if d.ok and honest(d).get(metric) is not None]
            if ok:
                ax.plot([b for b, _ in ok], [v for _, v in ok], marker="o", label=label)
            bad = [(b, d) for b, d in points if not d.ok]
            for b, d in bad:
                reason = d.reason or d.status
                ax.plot([b], [0], marker="x", color="red", markersize=10)
                ax.annotate(str(reason), (b, 0), textcoords="offset points", xytext=(0, 8),
                            ha="center", fontsize="x-small", color="red")
        for base in baselines:
            value = honest(base).get(metric)
            if value is not None:
                ax.axhline(value, linestyle="--", color="gray", linewidth=1)
                ax.annotate(f"baseline {base.trial.hardware}", (0, value),
                            xycoords=("axes fraction", "data"), fontsize="x-small", color="gray")
        budgets = sorted({b for pts in series.values() for b, _ in pts})
        if budgets[0] > 0 and budgets[-1] >= 4 * budgets[0]:
            ax.set_xscale("log", base=2)  # budgets are usually powers of two
        ax.set_xticks(budgets, [f"{b:g}" for b in budgets])
        ax.margins(x=0.1)
        ax.set_ylim(bottom=0)  # throughput from 0: the gaps between budgets look as large as they are
        ax.set_xlabel("draft budget (spec.budget)")
        ax.set_ylabel(figure_label(metric))
        ax.grid(True, alpha=0.3)
        _legend(ax, "small")
    fig.suptitle("Throughput vs speculative budget / topk")
    return _save(fig, path)


def pareto_front(points: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points not beaten on both axes (maximise both), sorted by x."""
    front: list[tuple[float, float]] = []
    best_y = float("-inf")
    for x, y in sorted(points, key=lambda p: (-p[0], -p[1])):
        if y > best_y:
            front.append((x, y))
            best_y = y
    return sorted(front)


def pareto(docs: Sequence[Doc], path: Path, max_legend: int = 12) -> Path | None:
    """Per-stream vs aggregate tok/s of every cell of every ok trial, with the
    front drawn: the configurations worth keeping for some latency target."""
    groups: list[tuple[list[float], list[float], str | None]] = []
    names: dict[tuple[float, float], str] = {}  # a point -> its (config, context, concurrency)
    for i, doc in enumerate(d for d in docs if d.ok):
        cells = [c for c in ok_cells(doc.cells) if c.per_stream_tok_s is not None]
        if cells:
            label = doc.trial.name if i < max_legend else None
            groups.append(([float(c.per_stream_tok_s or 0.0) for c in cells],
                           [float(c.output_tok_s or 0.0) for c in cells], label))
            for c in cells:
                names.setdefault((float(c.per_stream_tok_s or 0.0), float(c.output_tok_s or 0.0)),
                                 f"{doc.trial.name}, ctx {c.context} c{c.concurrency}")
    if not groups:
        return None  # before any figure is built
    fig, (ax,) = _figure(1)
    every: list[tuple[float, float]] = []
    for xs, ys, label in groups:
        every.extend(zip(xs, ys))
        ax.scatter(xs, ys, s=18, alpha=0.75, label=label)
    front = pareto_front(every)
    ax.plot([p[0] for p in front], [p[1] for p in front], color="black", linewidth=1.0, linestyle=":",
            marker="o", markersize=9, markerfacecolor="none", markeredgewidth=1.2, label="Pareto front",
            zorder=3)  # rings: the points under them stay visible
    xs, ys = [p[0] for p in every], [p[1] for p in every]
    for point in front:  # the configurations worth keeping, named where they sit
        label_inside(ax, names.get(point, ""), point[0], point[1], xs, ys, size="xx-small")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("output tok/s per user")
    ax.set_ylabel("output tok/s (all streams: the box)")
    ax.grid(True, alpha=0.3)
    _legend(ax, "x-small")
    fig.suptitle("Pareto: tok/s per user vs tok/s of the box, all trials and cells")
    return _save(fig, path)


def sweep_plots(docs: Sequence[Doc], out_dir: Path) -> list[Path]:
    """The sweep-level plots into ``out_dir``."""
    out = [throughput_vs_spec(docs, out_dir / "throughput_vs_budget.png"),
           pareto(docs, out_dir / "pareto_per_stream_vs_aggregate.png")]
    return [p for p in out if p is not None]
