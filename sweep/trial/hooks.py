"""What a trial calls after each measured cell: the sweeper's pruner listens here.

``sweep.trial.run`` calls every function in :data:`CELL_HOOKS` with the trial's
result so far and the cell just measured, right after the result file was
rewritten with that cell (so whatever a hook decides, the cell is on disk). A
hook that raises :class:`StopTrial` stops the matrix: the trial ends with status
``pruned``, keeping the cells measured so far (not ``failed``: nothing went
wrong, the config was judged not worth the rest of its benchmark).

The registry is module-level on purpose: the Optuna sweeper runs each job in its
own process through Hydra's launcher, and registers its hook around the job
(``hydra_plugins/specsweep_optuna_sweeper/_prune.py``); nothing else has to pass
it down the call chain.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from sweep.record.result import Cell, TrialResult

CellHook = Callable[["TrialResult", "Cell"], None]
CELL_HOOKS: list[CellHook] = []


class StopTrial(Exception):
    """Raised by a cell hook: stop this trial's matrix now (status ``pruned``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def after_cell(result: "TrialResult", cell: "Cell") -> None:
    """Call every registered hook (in registration order); StopTrial propagates."""
    for hook in list(CELL_HOOKS):
        hook(result, cell)
