"""Throughput against load, one standalone SVG per context: the charts MLflow's own cannot draw.

Why: MLflow draws a metric series over its *step*, and the step axis is labelled "Step" whatever
it holds -- the matrix's series carry concurrency there, with no unit on y. A run's artifacts get a
chart per context instead, concurrency on x and output tok/s on y, with the interval of repeated
cells as bars. SVG (the report's own :mod:`sweep.report.svg`, its styles inlined): a few kilobytes,
its labels are text a browser -- and a test -- can read, and the file names sort by context as
numbers (``tok_s_ctx00000060.svg`` before ``tok_s_ctx00001024.svg``).
"""

from __future__ import annotations

from pathlib import Path

from sweep.record._run_content import context_key
from sweep.record.result import TrialResult
from sweep.report import svg
from sweep.score.metrics import ok_cells

CHARTS_DIR = "charts"
X_LABEL = "concurrency (requests in flight)"
Y_LABEL = "output tok/s (all streams)"
# the report page's chart styles, for a file opened on its own
_STYLE = ("<style>text{font-family:system-ui,sans-serif} .t{font-size:13px;font-weight:600;fill:#24292f}"
          " .k{font-size:10.5px;fill:#57606a} .l{font-size:11px;fill:#57606a}"
          " .g{stroke:#eaeef2;stroke-width:1} .a{stroke:#8c959f;stroke-width:1}</style>")


def chart_name(context: int) -> str:
    return f"tok_s_{context_key(context)}.svg"


def tok_s_by_load(doc: TrialResult, out_dir: Path) -> list[Path]:
    """One SVG per measured context into ``out_dir`` (none without an ok cell)."""
    by_context: dict[int, list[tuple[float, float, tuple[float, float] | None]]] = {}
    for cell in ok_cells(doc.cells):
        if cell.output_tok_s is None:
            continue
        ci = cell.output_tok_s_ci
        interval = (float(ci[0]), float(ci[1])) if ci and len(ci) == 2 and None not in ci else None
        by_context.setdefault(int(cell.context), []).append(
            (float(cell.concurrency), float(cell.output_tok_s), interval))
    written = []
    for context, rows in sorted(by_context.items()):
        rows.sort()
        loads = [x for x, _, _ in rows]
        series = svg.Series(label=f"ctx {context}", color=svg.color(0), points=[(x, y) for x, y, _ in rows],
                            errors=[e for _, _, e in rows],
                            tips=[f"concurrency {x:g}: {y:,.1f} tok/s" for x, y, _ in rows])
        sim = " (simulated)" if doc.simulated else ""
        chart = svg.line_chart([series], title=f"tok/s at context {context}{sim}", x_label=X_LABEL,
                               y_label=Y_LABEL, log2_x=len(loads) > 1 and loads[0] > 0, x_ticks=loads)
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / chart_name(context)
        path.write_text(chart.replace(">", ">" + _STYLE, 1) + "\n")
        written.append(path)
    return written
