"""Compare trials: one rich table, the best feasible one marked.

Why: the MLflow UI is the place to browse, but the question after a sweep
is one screen -- which configuration is fastest *without changing answers*,
and by how much over plain decoding on the same box. Rows are result
documents (:class:`sweep.record.result.TrialResult`) from the files under a
directory or from MLflow (:mod:`sweep.record.runs`); feasibility and speedup
are :mod:`sweep.score`'s. The command is ``python -m sweep.report``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from sweep.record.result import Metrics, TrialResult
from sweep.score import objective, speedup

COLUMNS = (  # (header, metric key, format)
    ("tok/s c1", "tok_s_c1", "{:.1f}"), ("tok/s peak", "tok_s_peak", "{:.0f}"),
    ("accept", "accept_len", "{:.2f}"), ("pass", "coding_pass_rate", "{:.2f}"),
    ("TTFT p50 ms", "ttft_ms_p50", "{:.0f}"), ("TPOT p50 ms", "tpot_ms_p50", "{:.1f}"),
    ("$/Mtok", "usd_per_mtok", "{:.2f}"), ("startup s", "startup_s", "{:.0f}"),
)


@dataclass
class Row:
    name: str
    hardware: str
    spec: str
    budget: Any
    topk: Any
    window: Any
    status: str
    reason: str | None
    simulated: bool
    sweep_id: str | None
    doc: TrialResult
    feasible: bool = False
    speedup: float | None = None
    speedup_from_table: bool = False
    source: str = ""

    @property
    def metrics(self) -> Metrics:
        return self.doc.metrics


def _num(x: Any) -> float | None:
    if isinstance(x, bool):
        return None
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def rows_from_docs(docs: Sequence[TrialResult], sources: Sequence[str] | None = None) -> list[Row]:
    """One row per result document; speedup filled from a baseline row of the table
    (:func:`sweep.score.speedup.best_baseline`) when the result itself does not know it."""
    rows: list[Row] = []
    for i, doc in enumerate(docs):
        rows.append(Row(
            name=doc.trial.name, hardware=doc.trial.hardware,
            spec=str(doc.trial.spec if doc.trial.spec != "?" else doc.spec_value("algorithm") or "?"),
            budget=doc.spec_value("budget"), topk=doc.spec_value("topk"), window=doc.spec_value("window"),
            status=str(doc.status), reason=doc.reason, simulated=bool(doc.simulated),
            sweep_id=doc.trial.sweep_id, doc=doc, feasible=objective.feasible(doc),
            speedup=_num(doc.metrics.speedup_vs_baseline), source=sources[i] if sources else ""))
    for row in rows:
        if row.speedup is None and row.doc.ok and row.spec != "none":
            found = speedup.best_baseline(row.doc.config, row.simulated, ((b, b.doc) for b in rows))
            if found is not None:
                row.speedup = speedup.speedup(_num(row.metrics.tok_s_c1), _num(found[1].metrics.tok_s_c1))
                row.speedup_from_table = row.speedup is not None
    return rows


def best_feasible(rows: Sequence[Row]) -> Row | None:
    feasible = [r for r in rows if r.feasible]
    return max(feasible, key=lambda r: float(r.metrics.tok_s_c1 or 0.0)) if feasible else None


def table_columns(rows: Sequence[Row]) -> dict[str, list[Any]]:
    """The comparison as columns (MLflow ``log_table`` of a parent run)."""
    keys = ("tok_s_c1", "tok_s_peak", "accept_len", "coding_pass_rate", "ttft_ms_p50",
            "tpot_ms_p50", "startup_s", "errors", "usd_per_mtok")
    out: dict[str, list[Any]] = {k: [] for k in (
        "trial", "hardware", "spec", "budget", "topk", "window", "status", "failure_reason",
        "feasible", "speedup_vs_baseline", *keys)}
    for r in rows:
        for k, v in (("trial", r.name), ("hardware", r.hardware), ("spec", r.spec), ("budget", r.budget),
                     ("topk", r.topk), ("window", r.window), ("status", r.status),
                     ("failure_reason", r.reason), ("feasible", r.feasible),
                     ("speedup_vs_baseline", r.speedup)):
            out[k].append(v)
        for k in keys:
            out[k].append(_num(r.metrics.get(k)))
    return out


def _sorted(rows: Sequence[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: (r.status != "ok", -(_num(r.metrics.tok_s_c1) or 0.0), r.name))


def render_table(rows: Sequence[Row], title: str) -> Any:
    from rich.table import Table

    best = best_feasible(rows)
    table = Table(title=title, caption=(
        "★ best feasible (status ok, coding pass rate 1.0, zero errors); "
        "speedup = tok/s c1 over the autoregressive baseline on the same box "
        "(* = computed from this table's spec=none row)"), caption_justify="left")
    # The trial name already reads hardware-spec-budget-topk-window.
    for header in ("", "trial", "status"):
        table.add_column(header, no_wrap=header in ("trial", "status"))
    for header, _, _ in COLUMNS[:2]:
        table.add_column(header, justify="right")
    table.add_column("speedup", justify="right")
    for header, _, _ in COLUMNS[2:]:
        table.add_column(header, justify="right")
    for r in _sorted(rows):
        status = r.status + (f" ({r.reason})" if r.reason else "") + (" sim" if r.simulated else "")
        cells = {key: ("-" if (v := _num(r.metrics.get(key))) is None else fmt.format(v))
                 for _, key, fmt in COLUMNS}
        speedup_text = "-" if r.speedup is None else f"{r.speedup:.2f}x" + ("*" if r.speedup_from_table else "")
        style = "bold green" if r is best else ("red" if r.status != "ok" else ("dim" if not r.feasible else None))
        table.add_row("★" if r is best else "", r.name, status,
                      cells["tok_s_c1"], cells["tok_s_peak"], speedup_text,
                      *(cells[key] for _, key, _ in COLUMNS[2:]), style=style)
    return table


def docs_from_dir(root: Path, on_error: Callable[[Path, Exception], None] | None = None
                  ) -> tuple[list[TrialResult], list[str]]:
    """Readable result files under ``root``; unreadable ones go to ``on_error(path, exc)``."""
    from sweep.record.result import iter_results

    found = sorted(iter_results(Path(root), on_error=on_error), key=lambda p: str(p[0]))
    return [doc for _, doc in found], [str(p) for p, _ in found]


def write_plots(rows: Sequence[Row], out_dir: Path) -> list[Path]:
    """Sweep-level plots, plus the per-trial plots in one folder per trial."""
    from sweep.report import plots

    docs = [r.doc for r in rows]
    written = plots.sweep_plots(docs, out_dir)
    for r in rows:
        written += plots.trial_plots(r.doc, out_dir / "trials" / f"{r.name}-{(r.source or '')[-8:]}".strip("-"))
    return written
