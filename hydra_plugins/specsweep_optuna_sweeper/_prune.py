"""Early stop inside a trial: the matrix reports each cell, Optuna's pruner decides.

``hydra/sweeper/pruner=median`` (or percentile, successive_halving, hyperband,
wilcoxon; default ``none``) is instantiated like Hydra's Optuna sweeper
instantiates its samplers (``_target_`` + arguments, ``config.py``). Around each
job the search loop registers a cell hook (``sweep.trial.hooks.CELL_HOOKS``): the
trial calls it after every measured cell, it reports an intermediate value to the
trial and raises ``StopTrial`` when ``trial.should_prune()``. The trial ends
``pruned`` with the cells it measured (result.json, MLflow run KILLED with tag
``status=pruned``), the study records it PRUNED. This needs the job in this process
(Hydra's basic launcher, the project's default, and every host-pool worker).

What is reported, so that values are comparable across configs at the same step:

* **step** = the cell's index in the matrix's fixed order (``workload.contexts``
  outer, ``workload.concurrency`` inner, as listed); every config measures the same
  cells in the same order, so step s means the same cells for every trial;
* **value** (median, percentile, successive halving, hyperband) = the objective's
  cumulative contribution: for ``weighted_mean``, sum over the cells measured so far
  of w_i x tok/s_i / (sum of all the matrix's weights) -- it only grows, and the last
  step's value *is* the objective; for ``tok_s_peak`` the peak so far; for a one-cell
  objective (``tok_s_lowc``, ``cell``) that cell's tok/s, reported at its step only
  (it is the whole objective, known once that cell is measured);
* **value** (wilcoxon, which compares two trials' per-step values pairwise) = the
  cell's own contribution, w_i x tok/s_i / mean weight (their mean is the objective).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import optuna

from sweep.errors import ConfigError
from optuna.trial import Trial

log = logging.getLogger(__name__)
NO_PRUNER = ("optuna.pruners.NopPruner", None, "")


def build(conf: Any, n_objectives: int) -> optuna.pruners.BasePruner | None:
    """The pruner ``hydra.sweeper.pruner`` names (None: no pruning). Hydra hands the sweeper
    an instantiated pruner; a config mapping (``_target_`` + arguments) is instantiated here."""
    if isinstance(conf, optuna.pruners.BasePruner):
        if isinstance(conf, optuna.pruners.NopPruner):
            return None
        if n_objectives > 1:
            raise ConfigError("hydra.sweeper.pruner", "Optuna prunes single-objective studies only "
                             "(this one has several directions); use hydra/sweeper/pruner=none")
        return conf
    if not conf or conf.get("_target_") in NO_PRUNER:
        return None
    if n_objectives > 1:
        raise ConfigError("hydra.sweeper.pruner", "Optuna prunes single-objective studies only "
                         "(this one has several directions); use hydra/sweeper/pruner=none")
    from hydra.utils import instantiate

    pruner = instantiate(dict(conf))
    if not isinstance(pruner, optuna.pruners.BasePruner):
        raise ConfigError("hydra.sweeper.pruner._target_", f"{conf.get('_target_')} is not an Optuna pruner")
    return pruner


@dataclass
class CellReporter:
    """The cell hook of one trial (see the module docstring for what it reports)."""

    trial: Trial
    per_cell: bool = False
    name: str = "pruner"

    def __call__(self, result: Any, cell: Any) -> None:
        from sweep.score.objective import objective_of
        from sweep.trial.hooks import StopTrial

        step = len(result.cells) - 1
        value = intermediate(result, objective_of(result), per_cell=self.per_cell)
        if value is None:
            return
        self.trial.report(value, step)
        if self.trial.should_prune():
            total = len(matrix_cells(result.config))
            raise StopTrial(f"{self.name}: after cell {step + 1} of {total} (ctx {cell.context} x "
                            f"conc {cell.concurrency}) its objective so far, {value:.6g}, cannot "
                            "beat the trials before it at that cell")


def matrix_cells(config: Mapping[str, Any]) -> list[tuple[int, int]]:
    """The matrix's cells in the order the benchmark measures them (sweep/bench/matrix.py)."""
    wl = config.get("workload") or {}
    return [(int(x), int(c)) for x in wl.get("contexts") or [] for c in wl.get("concurrency") or []]


def intermediate(result: Any, objective: Any, *, per_cell: bool = False) -> float | None:
    """The value reported after the last cell of ``result`` (None: nothing to report yet)."""
    cells = [c for c in result.cells if c.output_tok_s is not None]
    last = result.cells[-1] if result.cells else None
    if last is None or last.output_tok_s is None:
        return None
    metric = objective.measure  # tok_s_c1, the old name, reads as tok_s_lowc
    if metric in ("tok_s_lowc", "cell"):
        order = matrix_cells(result.config)
        target = min(order, key=lambda xc: (xc[1], xc[0])) if metric == "tok_s_lowc" and order \
            else (objective.context, objective.concurrency)
        return float(last.output_tok_s) if (last.context, last.concurrency) == tuple(target) else None
    if metric == "tok_s_peak":
        return float(last.output_tok_s) if per_cell else max(float(c.output_tok_s) for c in cells)

    def weight(x: int, c: int) -> float:
        return float(objective.weights.get(f"ctx{x}_c{c}", 1.0))

    order = matrix_cells(result.config) or [(c.context, c.concurrency) for c in result.cells]
    total = sum(weight(x, c) for x, c in order)
    if not total:
        return None
    if per_cell:
        return weight(last.context, last.concurrency) * float(last.output_tok_s) * len(order) / total
    return sum(weight(c.context, c.concurrency) * float(c.output_tok_s) for c in cells) / total


@contextlib.contextmanager
def reporting(trial: Trial, pruner: optuna.pruners.BasePruner) -> Iterator[None]:
    """Register this trial's cell hook for the duration of its job."""
    from sweep.trial import hooks

    hook = CellReporter(trial, per_cell=isinstance(pruner, optuna.pruners.WilcoxonPruner),
                        name=type(pruner).__name__)
    hooks.CELL_HOOKS.append(hook)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            hooks.CELL_HOOKS.remove(hook)
