"""One name per figure, numbers rounded where a person reads them, the objective's own column,
and the report's charts: ticks on measured loads, throughput from 0, labels inside the frame.

Issue 33: the headline was ``tok_s_lowc``, "tok/s c1"/"tok/s c2" and "tok/s"; a two-objective
study was named ``...-tok_s_lowc``; a search printed "speedup vs the autoregressive baseline:
1.9358674055305418"; a max-load study's table had no max-load column; a chart with one point
had x ticks "2, 2.2, 2.4"; throughput_vs_budget.png's y axes did not start at 0.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from report_docs import crowded_sweep, mixed_sweep

from sweep.record.result import TrialResult
from sweep.report import export, plots, svg, table
from sweep.report.compare import build_groups
from sweep.report.records import objective_columns
from sweep.score import names


def _docs(root: Path) -> list[TrialResult]:
    return [TrialResult.load(p) for p in sorted(root.rglob("result.json"))]


def test_the_headline_has_one_label_with_its_load() -> None:
    assert names.label("tok_s_lowc") == "low-load tok/s"
    assert names.label("tok_s_lowc", 2) == "low-load tok/s (c2)"
    assert names.label("tok_s_peak", 2) == "peak tok/s"  # its load does not vary: no qualifier
    assert names.label("tok_s_ctx1024_c8") == "tok/s at ctx 1024, c8"
    assert names.objective_label("tok_s_lowc", ["per_stream_tok_s_lowc", "tok_s_peak"]) == \
        "low-load tok/s per user + peak tok/s"


def test_the_tables_terminal_markdown_and_html_use_the_same_labels(tmp_path: Path) -> None:
    groups = build_groups(_docs(mixed_sweep(tmp_path)))
    from rich.console import Console

    out = Console(width=250, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    out.print(table.render_group(groups[0]))
    text = out.export_text()
    md = export.to_markdown(groups, "t")
    for label in ("low-load tok/s (c1)", "peak tok/s", "speedup", "accept len", "coding pass", "USD/Mtok"):
        assert label in text and label in md, label
    assert "tok/s c1" not in text + md and "$/Mtok" not in text + md


@pytest.mark.parametrize("value, shown", [(1.9358674055305418, "1.94x"), (2.0, "2.00x"), (None, "-")])
def test_a_speedup_is_shown_to_two_decimals(value: float | None, shown: str) -> None:
    assert names.shown("speedup_vs_baseline", value) == shown


def test_the_search_prints_its_speedup_rounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import optuna
    from optuna.distributions import CategoricalDistribution

    from hydra_plugins.specsweep_optuna_sweeper import _report, _space

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", study_name="b300-ddtree-smoke-tok_s_lowc")
    study.add_trial(optuna.trial.create_trial(
        params={"spec.budget": 8}, distributions={"spec.budget": CategoricalDistribution([4, 8])}, value=407.539,
        user_attrs={"status": "ok", "values": {"speedup_vs_baseline": 1.9358674055305418}}))
    space = _space.parse({"spec.budget": "choice(4,8)"}, [])
    _report.report(study, space, tmp_path, storage_shown="memory", metric_names=["tok_s_lowc"], groups={},
                   config_name="config", contour=None, make_plots=False, executed=1)
    said = capsys.readouterr().out
    assert "speedup vs the autoregressive baseline: 1.94x" in said, said
    assert "tok_s_lowc=407.5" in said and "1.93586" not in said


def test_a_two_objective_study_is_named_after_both_metrics() -> None:
    from omegaconf import OmegaConf

    import sweep.compose.resolvers  # noqa: F401  (the ${sweep.objective:...} the study name uses)
    from sweep.compose import cmdline

    two = cmdline.compose(["hydra/sweeper=optuna", "workload=smoke",
                           "objective.metrics=[per_stream_tok_s_lowc,tok_s_peak]"], hydra_config=True)
    one = cmdline.compose(["hydra/sweeper=optuna", "workload=smoke"], hydra_config=True)
    assert OmegaConf.select(two, "hydra.sweeper.study_name") == \
        "b300-ddtree-smoke-per_stream_tok_s_lowc+tok_s_peak"
    assert OmegaConf.select(one, "hydra.sweeper.study_name") == "b300-ddtree-smoke-tok_s_lowc"


def test_a_max_load_study_has_its_max_load_column(tmp_path: Path) -> None:
    groups = build_groups(_docs(crowded_sweep(tmp_path)))
    [study] = [g for g in groups if g.rows[0].objective.measure == "max_load"]
    assert objective_columns(study) == [("max load", "max_load")]
    assert [g for g in groups if g is not study and objective_columns(g)] == []  # tok/s groups: shown already
    md = export.to_markdown([study], "t")
    head = next(line for line in md.splitlines() if line.startswith("| #"))
    assert head.startswith("| # | trial | status | max load | low-load tok/s (c1) |"), head
    best = next(line for line in md.splitlines() if "**" in line and line.startswith("| 1"))
    assert "| 16.0 |" in best or "| 16 |" in best, best


def _tick_texts(chart: str) -> list[str]:
    return re.findall(r'<text class="k" x="[\d.]+" y="[\d.]+" text-anchor="middle">([^<]*)</text>', chart)


def test_a_chart_of_one_load_has_one_tick_and_throughput_starts_at_0() -> None:
    one = svg.line_chart([svg.Series("b8", "#000", [(2.0, 600.0)])], title="t", x_label="x", y_label="y")
    assert _tick_texts(one) == ["2"]  # not "2, 2.2, 2.4"
    loads = svg.line_chart([svg.Series("b8", "#000", [(1.0, 300.0), (8.0, 900.0), (32.0, 1900.0)])],
                           title="t", x_label="x", y_label="y", log2_x=True)
    assert _tick_texts(loads) == ["1", "8", "32"]
    y_ticks = re.findall(r'text-anchor="end">([^<]*)</text>', loads)
    assert y_ticks[0] == "0"


def test_the_throughput_pngs_start_at_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figures: list[Any] = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig) or path)
    docs = _docs(mixed_sweep(tmp_path))
    assert plots.throughput_vs_spec(docs, tmp_path / "t.png") is not None
    assert plots.throughput_vs_concurrency(next(d for d in docs if d.ok), tmp_path / "c.png") is not None
    axes = [ax for fig in figures for ax in fig.axes]
    assert len(axes) == 4 and all(ax.get_ylim()[0] == 0 for ax in axes), [ax.get_ylim() for ax in axes]
    assert [ax.get_ylabel() for ax in figures[0].axes] == ["low-load tok/s", "peak tok/s"]


def test_scatter_labels_stay_inside_the_frame_and_the_front_does_not_hide_points() -> None:
    pts = [(10.0, 900.0), (300.0, 40.0), (310.0, 38.0)]
    chart = svg.scatter_front([svg.Series("b8", "#4e79a7", pts, labels=["a long label " * 3] * 3)],
                              [(10.0, 900.0), (300.0, 40.0)], title="t", x_label="x", y_label="y")
    for x, y in re.findall(r'<text class="pl" x="([\d.-]+)" y="([\d.-]+)"', chart):
        assert svg.LEFT <= float(x) <= svg.W - svg.RIGHT and svg.TOP <= float(y) <= svg.H - svg.BOTTOM
    # every point is drawn filled in its colour; the front gets rings (no fill) on top
    assert chart.count('fill="#4e79a7"') == 3 and chart.count('r="6.5" fill="none" stroke="#222"') == 2


def test_the_schedule_and_front_pngs_keep_their_labels_inside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """schedule-ctx*.png and pareto-user-vs-gpu.png: every label inside the axes (the one at the
    highest load was cut off by the frame), throughput from 0."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from test_schedule import write

    from sweep.report import deployment_plots
    from sweep.report.schedule import schedules_of

    for job, budget in enumerate(("none", 8, 4)):
        write(tmp_path / "deploy", job, budget)
    figures: list[Any] = []
    monkeypatch.setattr(deployment_plots, "_save", lambda fig, path: figures.append(fig) or path)
    [group] = build_groups(_docs(tmp_path))
    assert len(deployment_plots.deployment_plots(schedules_of(group), tmp_path / "out")) == 2
    for fig in figures:
        renderer = FigureCanvasAgg(fig).get_renderer()
        fig.draw(renderer)
        [ax] = fig.axes
        frame = ax.get_window_extent(renderer)
        labels = [t for t in ax.texts if t.get_text()]
        assert labels and ax.get_ylim()[0] == 0
        for text in labels:
            box = text.get_window_extent(renderer)
            assert frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1 and frame.y0 - 1 <= box.y0 \
                and box.y1 <= frame.y1 + 1, (text.get_text(), box, frame)


def test_the_docs_list_every_figure_under_its_one_name() -> None:
    """docs/tracking.md's table of names says what sweep/score/names.py says, key by key."""
    rows = [line for line in (Path(__file__).resolve().parents[2] / "docs" / "tracking.md").read_text().splitlines()
            if line.startswith("| `")]
    for key, label in names.LABELS.items():
        assert any(f"`{key}`" in row and label in row.split("|")[2] for row in rows), (key, label)
