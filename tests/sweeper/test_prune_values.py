"""What the pruner is told after each cell: comparable across configs, the objective at the end."""

from __future__ import annotations

import pytest

from hydra_plugins.specsweep_optuna_sweeper._prune import intermediate, matrix_cells
from sweep.compose.settings import Objective
from sweep.record.result import Cell, TrialResult
from sweep.score.metrics import metrics
from sweep.score.objective import objective_value

CONFIG = {"workload": {"contexts": [60, 4096], "concurrency": [1, 8]}}
TOK = {(60, 1): 280.0, (60, 8): 900.0, (4096, 1): 250.0, (4096, 8): 700.0}


def partials(metric: dict, per_cell: bool = False) -> tuple[list[float | None], float | None]:
    obj = Objective.from_mapping(metric)
    doc = TrialResult(status="running", config=CONFIG)
    out = []
    for ctx, conc in matrix_cells(CONFIG):
        doc.cells.append(Cell(context=ctx, concurrency=conc, output_tok_s=TOK[(ctx, conc)]))
        out.append(intermediate(doc, obj, per_cell=per_cell))
    doc.metrics = metrics(doc)  # what the trial computes at its end
    return out, objective_value(doc, obj)


def test_weighted_mean_grows_to_the_objective() -> None:
    steps, final = partials({"metric": "weighted_mean", "weights": {"ctx4096_c8": 2.0}})
    assert steps == sorted(steps) and steps[-1] == pytest.approx(final)  # type: ignore[type-var]
    assert steps[0] == pytest.approx(280.0 / 5)  # its share of the total weight (1+1+1+2)


def test_wilcoxon_gets_each_cells_share_with_the_objective_as_mean() -> None:
    steps, final = partials({"metric": "weighted_mean"}, per_cell=True)
    assert steps == [TOK[k] for k in matrix_cells(CONFIG)]
    assert sum(steps) / len(steps) == pytest.approx(final)  # type: ignore[arg-type]


def test_one_cell_objectives_report_at_their_cell_only() -> None:
    steps, final = partials({"metric": "tok_s_c1"})
    assert steps == [280.0, None, None, None] and final == 280.0
    steps, final = partials({"metric": "cell", "context": 4096, "concurrency": 1})
    assert steps == [None, None, 250.0, None] and final == 250.0
    steps, _ = partials({"metric": "tok_s_peak"})
    assert steps == [280.0, 900.0, 900.0, 900.0]


def test_goodput_reports_its_peak_so_far_and_max_load_nothing() -> None:
    obj = Objective.from_mapping({"metric": "goodput", "slo": {"tpot_ms": 20}})
    doc = TrialResult(status="running", config=CONFIG)
    seen = []
    for (ctx, conc), good in zip(matrix_cells(CONFIG), (250.0, 600.0, 0.0, 400.0)):
        doc.cells.append(Cell(context=ctx, concurrency=conc, output_tok_s=TOK[(ctx, conc)], goodput_tok_s=good))
        seen.append(intermediate(doc, obj))
    assert seen == [250.0, 600.0, 600.0, 600.0]   # goodput, not tok/s (900 at 60 x 8)
    ml = Objective.from_mapping({"metric": "max_load", "slo": {"tpot_ms": 20}})
    assert intermediate(doc, ml) is None
