"""Compare trials in the terminal: one rich table per like-with-like group, best feasible marked.

Why: the MLflow UI is the place to browse, but the question after a sweep
is one screen -- which configuration is fastest *without changing answers*,
and by how much over plain decoding on the same box and workload. Rows are
result documents (:class:`sweep.record.result.TrialResult`) from the files
under a directory or from MLflow (:mod:`sweep.record.runs`), grouped and
ranked by :mod:`sweep.report.compare`; the command is ``python -m sweep.report``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from sweep.record.result import TrialResult
from sweep.report.compare import Group, Row, all_rows, build_groups
from sweep.report.fit import Column, Fitted, fit
from sweep.report.fit import table as fitted_table
from sweep.report.records import (LANDSCAPE_MORE, marker, objective_columns, record, recorded_landscape, records,
                                  rerun_command)
from sweep.report.shortnames import renamed
from sweep.score.names import LABELS, interval_text, rounded, shown

CAPTION = ("★ best feasible of its group (status ok, meets the objective's constraints: coding pass "
           "rate, errors, TTFT SLO -- and the verdict below the table decides it); ≈ the leader and the "
           "configs the verdict cannot tell apart from it (noise pooled over the group, comparisons with "
           "the best, the practical margin): undecided; # ranks feasible rows by the group's objective (a "
           "rank inside noise is no verdict); n: measurements pooled (copies of one config are one row); "
           "low-load tok/s: output tok/s at the lowest measured concurrency (cN), ± half its own 95% "
           "interval (one that would pass below zero: [low-high] on the log scale); peak tok/s: the "
           "highest of any cell; speedup = low-load tok/s over the spec=none baseline of the same group "
           "(* = that baseline is a row of this table); latencies p50 / p99 of the low-load cell")


def _fmt(x: Any, nd: int = 1) -> str:
    return "-" if x is None else f"{float(x):,.{nd}f}"


def _headline(rec: dict[str, Any]) -> str:
    text = _fmt(rec["tok_s_lowc"])
    if rec["tok_s_lowc_ci_low"] is not None and rec["tok_s_lowc"] is not None:
        text += interval_text(float(rec["tok_s_lowc"]), rec["tok_s_lowc_ci_low"], rec["tok_s_lowc_ci_high"])
    return text


def _columns(group: Group) -> list[Column]:
    """The group's columns, the name aside: marker/rank, n and the headline figure with its interval
    are never left out; the others are, from the last, when the names would not fit."""
    recs = [record(group, r) for r in group.rows]
    extra = objective_columns(group)  # the objective's own figure (max load, goodput ...) when not shown

    def col(header: str, cells: list[str], optional: bool = True) -> Column:
        return Column(header, cells, optional=optional)

    def speedup(r: Row) -> str:
        if r.is_baseline and r.doc.ok:
            return "baseline"
        return "-" if r.speedup is None else f"{r.speedup:.2f}x" + ("*" if r.speedup_from_table else "")

    rows = group.rows
    return [
        col("#", [(marker(group, r) + " " + str(r.rank or "")).strip() for r in rows], optional=False),
        col("n", [str(rec["repeats"] or r.copies) for r, rec in zip(rows, recs)], optional=False),
        *(col(name, [shown(key if key != "objective_value" else "", rec[key]) for rec in recs], optional=False)
          for name, key in extra),
        col(group.headline_label, [_headline(rec) for rec in recs], optional=False),
        col("status", [r.status_text for r in rows]),
        col(LABELS["speedup_vs_baseline"], [speedup(r) for r in rows]),
        col(LABELS["tok_s_peak"], [_fmt(rec["tok_s_peak"], 0) for rec in recs]),
        col(LABELS["accept_len"], [_fmt(rec["accept_len"], 2) for rec in recs]),
        col(LABELS["coding_pass_rate"], [_fmt(rec["coding_pass_rate"], 2) for rec in recs]),
        col("TPOT ms p50/p99", [f"{_fmt(rec['tpot_ms_p50'], 1)} / {_fmt(rec['tpot_ms_p99'], 1)}" for rec in recs]),
        col("TTFT ms p50/p99", [f"{_fmt(rec['ttft_ms_p50'], 0)} / {_fmt(rec['ttft_ms_p99'], 0)}" for rec in recs]),
        col(LABELS["usd_per_mtok"], [_fmt(rec["usd_per_mtok"], 2) for rec in recs]),
        col(LABELS["startup_s"], [_fmt(rec["startup_s"], 1) for rec in recs]),
    ]


def fitted_group(group: Group, width: int | None = None) -> Fitted:
    """The group's columns and row names at ``width`` columns (sweep/report/fit.py)."""
    cols = _columns(group)
    status = next(c for c in cols if c.header == "status")
    status.justify = "left"
    return fit(cols, [r.name for r in group.rows], width, ids=[r.config_id for r in group.rows])


def render_group(group: Group, title: str | None = None, width: int | None = None) -> Any:
    """The group's table; ``width``: the console's (the names shrink to fit it, the figures never do)."""
    return _render(group, fitted_group(group, width), title)


def _render(group: Group, fitted: Fitted, title: str | None = None) -> Any:
    note = fitted.names.note()
    styles = [("bold green" if r is group.best else "red" if r.status == "failed" else
               "yellow" if r.status != "ok" else "dim" if not r.feasible else None) for r in group.rows]
    return fitted_table(fitted, "trial", 1, (title or group.label) + (f" · {note}" if note else ""),
                        styles=styles)


def print_groups(console: Any, groups: Sequence[Group], title: str, where: Path | str | None = None,
                 full: bool = False, study_best: int | None = None) -> None:
    """Every group's table, under one title, with the legend once at the end; the lines under a
    table name its rows as the table does. ``full``: each table's rows by full name and config id
    below it (``--full-names``); ``study_best``: the trial a study's report named best just above (its
    group then says so in one line instead of a verdict, noise and rerun command of its own)."""
    sim = " (simulated)" if groups and all(g.simulated for g in groups) else ""
    console.print(f"[bold]{title}[/bold]{sim}: {sum(len(g.rows) for g in groups)} trials in "
                  f"{len(groups)} group(s) of comparable trials", highlight=False)
    for g in groups:
        fitted = fitted_group(g, console.width)
        console.print(_render(g, fitted))
        short = fitted.mapping([r.name for r in g.rows])
        if full:  # as they are: the key is where the full names are read
            for line in ["full names:", *fitted.key([r.name for r in g.rows], [r.config_id for r in g.rows])]:
                console.print(line, highlight=False, markup=False, soft_wrap=True)
        said = study_lines(g, study_best) if study_best is not None else None
        for line in [fitted.note(), *(said if said is not None else verdict_lines(g, where))]:
            if line:
                console.print(renamed(line, short), highlight=False, markup=False)
    console.print(CAPTION, style="dim", highlight=False)


def verdict_lines(g: Group, where: Path | str | None = None) -> list[str]:
    """What a person acts on: the best and how sure, or why there is none yet and the command that
    decides it (``where``: the directory of the results)."""
    leader = g.leader
    if leader is None:
        return []
    if g.best is not None:
        lines = [f"best {g.best.name}: {g.noise_line}"] if g.noise_line and len(g.rows) > 1 else []
        return lines + [f"run the best again: {rerun_command(g.best)}"]
    docs = [r.doc for r in g.rows]
    if recorded_landscape(docs):
        return [f"no best yet: {leader.name} leads, {g.noise_line}", f"to decide: {LANDSCAPE_MORE}"]
    to = f"python -m sweep.decide --dir {where if where else '<this dir>'}"
    return [f"no best yet: {leader.name} leads, {g.noise_line}",
            f"to decide: {to} (measures again only the open cells; the runs pool as repeats)"]


def study_lines(g: Group, trial: int) -> list[str] | None:
    """A study's closing table under the study's report: one line tying the group to the best named
    above (None: that trial is not in this group, which keeps its own verdict lines)."""
    holder = next((r for r in g.rows if any(d.trial.job_num == trial for _, d in r.parts)), None)
    if holder is None:
        return None
    chosen = g.best or g.leader
    if chosen is holder or chosen is None:
        return [f"{holder.name} is trial {trial}, the study's pick above (its noise, best.yaml and rerun there)"]
    return [f"{holder.name} is trial {trial}, the study's pick above by its value; this table's verdict "
            f"({g.verdict}) picks {chosen.name}: {g.noise_line}"]


# -- what the MLflow parent run gets -------------------------------------------------------


def rows_from_docs(docs: Sequence[TrialResult], sources: Sequence[str] | None = None) -> list[Row]:
    return all_rows(build_groups(docs, sources))


def best_per_group(groups: Sequence[Group]) -> list[Row]:
    return [b for g in groups if (b := g.best) is not None]


def table_columns(groups: Sequence[Group]) -> dict[str, list[Any]]:
    """The comparison as columns (MLflow ``log_table`` of a parent run), numbers rounded for reading."""
    recs = records(groups)
    keys = [k for k in (recs[0] if recs else {}) if k != "source"]
    return {k: [rounded(rec[k]) for rec in recs] for k in keys}


def docs_from_dir(root: Path, on_error: Callable[[Path, Exception], None] | None = None
                  ) -> tuple[list[TrialResult], list[str]]:
    """Readable result files under ``root``, then the rounds of its recorded landscapes
    (sweep/report/landscape_trials.py); unreadable files go to ``on_error(path, exc)``."""
    from sweep.record.result import iter_results
    from sweep.report.landscape_trials import landscape_trials

    found: list[tuple[str | Path, TrialResult]] = sorted(iter_results(Path(root), on_error=on_error),
                                                          key=lambda p: str(p[0]))
    found += landscape_trials(Path(root), on_error or (lambda _path, _exc: None))
    return [doc for _, doc in found], [str(p) for p, _ in found]


def write_plots(rows: Sequence[Row], out_dir: Path) -> list[Path]:
    """Sweep-level plots, plus the per-trial plots in one folder per trial."""
    from sweep.report import plots

    docs = [r.doc for r in rows]
    written = plots.sweep_plots(docs, out_dir)
    for r in rows:
        src = Path(r.source) if r.source.endswith(".json") else None
        tag = (f"{src.parent.parent.name}-{src.parent.name}" if src is not None else r.source[-8:])
        written += plots.trial_plots(r.doc, out_dir / "trials" / f"{r.name}-{tag}".strip("-"))
    return written
