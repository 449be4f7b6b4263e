"""PNG charts of the deployment answer: the schedule's measured curves and best band, and the
per-user vs per-GPU front. The schedule chart draws measured values only (sweep/report/chart_data.py).

Written by ``python -m sweep.schedule`` into the sweep dir and logged to the
sweep's MLflow parent run (matplotlib's ``Figure`` only, as :mod:`sweep.report.plots`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from sweep.report.chart_data import INTERPOLATED, best_band, measured_curves, top_measured
from sweep.report.compare import Group
from sweep.report.frontier import Point, gpus_of
from sweep.report.plots import _figure, _legend, _save, label_inside
from sweep.report.schedule import Schedule

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def envelope_figure(s: Schedule) -> Figure | None:
    """tok/s against load at measured values only (sweep/report/chart_data.py): a marker per
    measured cell, dashed lines between them (interpolation, labelled), the baseline grey, and the
    best band through each level's pick at its measured value."""
    curves = measured_curves(s)
    if not curves:
        return None
    fig, (ax,) = _figure(1)
    fig.set_size_inches(8.4, 5.2)
    base = {r.name for r in s.rows if r.is_baseline}
    for name, pts in sorted(curves.items()):
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        ax.plot(xs, ys, marker="s" if name in base else "o", markersize=4, linewidth=1.1, linestyle="--",
                label=name + (" (baseline)" if name in base else ""), alpha=0.85,
                **({"color": "grey"} if name in base else {}))
    band = best_band(s)
    if band:
        ax.plot([p.load for p in band], [p.tok_s for p in band], color="black", linewidth=5, alpha=0.18, marker="o",
                markersize=11,
                solid_capstyle="round", label="best feasible, measured (band)")
        loads_seen = [lv.load for lv in s.levels]
        tops = [y for pts in curves.values() for _, y in pts]
        log2 = s.over == "concurrency" and min(loads_seen) > 0 and max(loads_seen) >= 4 * min(loads_seen)
        for p in band:
            label_inside(ax, p.name + (" ≈" if p.tied else ""), p.load, p.tok_s, loads_seen, tops, log2_x=log2)
    ax.plot([], [], color="grey", linestyle="--", linewidth=1.1, label=INTERPOLATED)
    for c in s.crossovers:
        ax.axvline(c.load, color="red" if c.kind == "baseline" else "grey", linestyle=":", linewidth=1)
    loads = sorted({x for pts in curves.values() for x, _ in pts})
    if s.over == "concurrency" and loads and loads[0] > 0 and loads[-1] >= 4 * loads[0]:
        ax.set_xscale("log", base=2)
    ax.set_xticks(loads, [f"{x:g}" for x in loads])  # ticks on the measured loads only
    ax.set_ylim(0, top_measured(s) * 1.08 or 1.0)  # from 0: a small gap looks small; room for the labels
    ax.set_xlabel("request rate (req/s)" if s.over == "rate" else "concurrency (in-flight requests)")
    ax.set_ylabel("output tok/s (the box), measured")
    ax.grid(True, alpha=0.3)
    _legend(ax, "x-small")
    slo = f"; SLO {s.slo.label()}" if s.slo is not None else ""
    sim = " (simulated)" if s.group.simulated else ""
    fig.suptitle(f"Which config at which load: {s.title}{sim}{slo}", fontsize="medium")
    return fig


def envelope_png(s: Schedule, path: Path) -> Path | None:
    """:func:`envelope_figure` written to ``path``."""
    fig = envelope_figure(s)
    return _save(fig, path) if fig is not None else None


def pareto_png(points: Sequence[Point], title: str, unit: str, path: Path, max_labels: int = 14) -> Path | None:
    """Per-user against per-GPU tok/s, the front drawn and its points labelled (config, context, load)."""
    if not points:
        return None
    fig, (ax,) = _figure(1)
    fig.set_size_inches(8.4, 5.6)
    names = sorted({p.name for p in points})
    for i, name in enumerate(names):
        color = f"C{i % 10}"
        mine = [p for p in points if p.name == name]
        met = [p for p in mine if p.meets_slo]
        missed = [p for p in mine if not p.meets_slo]
        ax.scatter([p.per_user for p in met], [p.per_gpu for p in met], s=16, alpha=0.75, color=color, label=name)
        if missed:
            ax.scatter([p.per_user for p in missed], [p.per_gpu for p in missed], s=16, facecolors="none",
                       edgecolors=color, alpha=0.75)
    front = sorted((p for p in points if p.on_front), key=lambda p: p.per_user)
    if front:  # rings on top: the points under the front stay visible
        ax.plot([p.per_user for p in front], [p.per_gpu for p in front], color="black", linewidth=1.0,
                linestyle=":", marker="o", markersize=9, markerfacecolor="none", markeredgewidth=1.2,
                label="Pareto front", zorder=3)
        xs, ys = [p.per_user for p in points], [p.per_gpu for p in points]
        for p in front[:max_labels]:
            label_inside(ax, p.label, p.per_user, p.per_gpu, xs, ys, size="xx-small")
    if any(not p.meets_slo for p in points):
        ax.scatter([], [], s=16, facecolors="none", edgecolors="grey", label="hollow: missed the SLO")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("tok/s per user (interactivity)")
    ax.set_ylabel(f"output tok/s {unit} (throughput)")
    ax.grid(True, alpha=0.3)
    _legend(ax, "xx-small")
    fig.suptitle(title, fontsize="medium")
    return _save(fig, path)


def deployment_plots(schedules: Sequence[Schedule], out_dir: Path) -> list[Path]:
    """``schedule-<n>.png`` per schedule and ``pareto-user-vs-gpu-<n>.png`` per group into ``out_dir``."""
    from sweep.report.frontier import points_of

    written: list[Path] = []
    seen: list[int] = []
    for i, s in enumerate(schedules, 1):
        stem = f"ctx{s.context}" if len(schedules) == len({x.context for x in schedules}) else f"{i}-ctx{s.context}"
        if (p := envelope_png(s, out_dir / f"schedule-{stem}.png")) is not None:
            written.append(p)
        if id(s.group) not in seen:
            seen.append(id(s.group))
            _, unit = gpus_of(s.group)
            sim = " (simulated)" if s.group.simulated else ""
            suffix = "" if len({id(x.group) for x in schedules}) == 1 else f"-{len(seen)}"
            if (p := pareto_png(points_of(s.group, s.slo), f"Tok/s per user vs tok/s {unit}: "
                                f"{s.group.hardware_label} · {s.group.model_label}{sim}", unit,
                                out_dir / f"pareto-user-vs-gpu{suffix}.png")) is not None:
                written.append(p)
    return written


def deployment_artifacts(groups: Sequence[Group], out_dir: Path) -> tuple[list[Path], dict[str, str]]:
    """What the sweep's MLflow parent run shows of the deployment answer: the schedule and Pareto
    PNGs, each multi-objective study's Pareto set as a PNG, and tags naming that set's trials."""
    from sweep.report.schedule import schedules_of
    from sweep.report.study_front import study_front, study_front_png

    written = deployment_plots([s for g in groups for s in schedules_of(g)], out_dir)
    tags: dict[str, str] = {}
    for i, g in enumerate(groups, 1):
        front = study_front(g)
        if not front:
            continue
        suffix = "" if len(groups) == 1 else f"-{i}"
        if (p := study_front_png(g, out_dir / f"study-pareto{suffix}.png")) is not None:
            written.append(p)
        tags[f"pareto.trials{suffix.replace('-', '.')}"] = ", ".join(r.name for r, _ in front)[:4900]
    return written, tags
