"""Library warnings a user cannot act on go to the sweep dir's log, not the console.

Every search printed Optuna's ``ExperimentalWarning`` with its source line
(``study.set_metric_names is experimental ...``) between the study line and the
first trial: a note to the sweeper's authors, not to the person running it, and
it pushed what matters off the screen. While a search runs, warnings of these
categories are appended to ``<sweep dir>/sweeper.log`` (kept for whoever
upgrades Optuna); every other warning still reaches the console.
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import Iterator, TextIO

LOG_NAME = "sweeper.log"


def _library_categories() -> tuple[type[Warning], ...]:
    """Optuna's experimental-API notice and the deprecation family: about the libraries'
    own future, which a user of the sweep cannot change."""
    import optuna

    return (optuna.exceptions.ExperimentalWarning, DeprecationWarning,
            PendingDeprecationWarning, FutureWarning)


@contextlib.contextmanager
def library_warnings_logged(sweep_dir: Path) -> Iterator[Path]:
    """Inside: library warnings are appended to ``sweep_dir/sweeper.log`` (its path is yielded)."""
    log_path = Path(sweep_dir) / LOG_NAME
    quiet = _library_categories()
    with warnings.catch_warnings():  # restores showwarning and the filters on the way out
        shown = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: TextIO | None = None, line: str | None = None) -> None:
            if not issubclass(category, quiet):
                shown(message, category, filename, lineno, file, line)
                return
            text = warnings.formatwarning(message, category, filename, lineno, line)
            try:
                with log_path.open("a", encoding="utf-8") as log:
                    log.write(text)
            except OSError:
                pass  # the log is a courtesy: an unwritable sweep dir fails louder elsewhere

        warnings.showwarning = show
        yield log_path

