"""The schedule's charts never draw above what was measured.

On a recorded landscape the chart's envelope passed about 1,100 tok/s at concurrency 8
where the best measured value was 811: it drew the campaign model's estimates, and the
HTML chart its intervals. Both charts are read back here -- the PNG's plotted arrays
(matplotlib's Figure), the HTML's SVG coordinates -- from the recorded landscapes, and
every drawn value is a measured one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sweep.io.readback import Skipped
from sweep.report.chart_data import INTERPOLATED
from sweep.report.compare import build_groups
from sweep.report.deployment_html import deployment_section
from sweep.report.deployment_plots import envelope_figure, envelope_png
from sweep.report.schedule import Schedule, build_schedules
from sweep.report.table import docs_from_dir
from sweep.score.metrics import load_of, ok_cells

LANDSCAPES = Path(__file__).resolve().parents[2] / "benchmarks" / "measured" / "landscapes"


@pytest.fixture(scope="module")
def recorded() -> tuple[list, list[str]]:
    docs, sources = docs_from_dir(LANDSCAPES, Skipped())
    assert docs
    return docs, sources


def _measured(s: Schedule) -> dict[str, dict[float, float]]:
    """Each config's measured tok/s per load at the schedule's context, from its cells."""
    return {r.name: {load_of(c): float(c.output_tok_s) for c in ok_cells(r.doc.cells)
                     if c.context == s.context and c.output_tok_s is not None} for r in s.rows}


def test_png_draws_measured_values_only(recorded: tuple[list, list[str]], tmp_path: Path) -> None:
    docs, sources = recorded
    schedules = build_schedules(docs, None, sources)
    assert schedules
    checked = 0
    for s in schedules:
        measured = _measured(s)
        top = max(y for by in measured.values() for y in by.values())
        fig = envelope_figure(s)
        assert fig is not None
        (ax,) = fig.axes
        assert ax.get_ylim()[1] <= top * 1.1  # the frame ends just above the top measured value
        labels = [line.get_label() for line in ax.get_lines()]
        assert INTERPOLATED in labels  # the lines between measured loads say what they are
        for line in ax.get_lines():
            xs, ys = list(line.get_xdata()), list(line.get_ydata())
            assert all(y <= top + 1e-9 for y in ys), (s.title, line.get_label(), ys, top)
            name = str(line.get_label()).removesuffix(" (baseline)")
            if name in measured:  # a config's line: exactly its measured cells, dashed between them
                assert dict(zip(xs, ys)) == measured[name]
                assert line.get_linestyle() == "--"
                checked += 1
        band = next((ln for ln in ax.get_lines() if "band" in str(ln.get_label())), None)
        for lv in s.levels:  # the band passes through each pick at the pick's measured value
            if lv.best is not None and band is not None:
                at = dict(zip(band.get_xdata(), band.get_ydata()))
                assert at[lv.load] == measured[lv.best.name][lv.load]
    assert checked >= len(schedules)
    assert envelope_png(schedules[0], tmp_path / "s.png").stat().st_size > 1000


def test_html_chart_draws_nothing_above_the_top_measured_value(recorded: tuple[list, list[str]]) -> None:
    docs, sources = recorded
    html = deployment_section(build_groups(docs, sources))
    charts = [c for c in re.findall(r"<svg.*?</svg>", html, flags=re.S) if "tok/s vs " in c]
    assert charts
    for chart in charts:
        assert "output tok/s, measured" in chart
        points = [(float(cy), title) for cy, title in
                  re.findall(r'<circle cx="[\d.]+" cy="([\d.]+)"[^>]*><title>([^<]*)</title>', chart)]
        values = [(cy, float(m.group(1).replace(",", ""))) for cy, t in points
                  if (m := re.search(r"measured ([\d,.]+) tok/s", t))]
        assert values and len(values) == len(points)  # every point is a measured one
        top_y = min(cy for cy, v in values if v == max(v for _, v in values))
        drawn_y = [cy for cy, _ in points]
        for poly in re.findall(r'<polyline[^>]*points="([^"]+)"', chart):
            drawn_y += [float(p.split(",")[1]) for p in poly.split()]
        # SVG y grows downward: nothing is drawn higher than the highest measured point
        assert min(drawn_y) >= top_y - 0.05, (min(drawn_y), top_y)
        assert not re.search(r'<path stroke="[^"]+" stroke-width="1.4" d="M', chart)  # no interval bars
