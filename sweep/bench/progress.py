"""Progress of a benchmark on stderr: a rich bar on a terminal, a line per finished cell elsewhere."""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any


class _NoBar:
    """Stands in for rich's Progress when progress=False (tests, CI logs)."""

    def add_task(self, *_a: Any, **_k: Any) -> int:
        return 0

    def advance(self, *_a: Any, **_k: Any) -> None:
        pass

    def update(self, *_a: Any, **_k: Any) -> None:
        pass


class _Lines:
    """Progress when stderr is not a terminal (piped, logged, CI): one line per finished task.

    Rich draws nothing live there and prints every bar at the end, so a log
    stayed silent for the whole matrix; a line per cell, flushed as the cell
    ends, streams instead. Tasks run one after another, so a task's time is
    the time since the previous one ended.
    """

    def __init__(self) -> None:
        self._tasks: list[dict[str, Any]] = []
        self._since = time.monotonic()

    def __enter__(self) -> _Lines:
        self._since = time.monotonic()
        return self

    def __exit__(self, *_exc: Any) -> None:
        return None

    def add_task(self, description: str, total: int, **fields: Any) -> int:
        self._tasks.append({"description": description, "total": total, "done": 0,
                            "printed": False, **fields})
        return len(self._tasks) - 1

    def advance(self, task: int, n: int = 1) -> None:
        self._tasks[task]["done"] += n

    def update(self, task: int, **fields: Any) -> None:
        t = self._tasks[task]
        t.update(fields)
        if t["done"] >= t["total"] and not t["printed"]:
            import sys

            t["printed"] = True
            now = time.monotonic()
            print(f"{t['description'].rstrip()}: {t['done']}/{t['total']}  {t.get('tok_s', '')}"
                  f"  ({now - self._since:.1f} s)", file=sys.stderr, flush=True)
            self._since = now


def progress_bar(enabled: bool) -> Any:
    """Rich progress on stderr (one task per cell, advanced per finished request);
    a line per finished cell instead when stderr is not a terminal."""
    if not enabled:
        return nullcontext(_NoBar())
    from rich.console import Console

    if not Console(stderr=True).is_terminal:
        return _Lines()
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn)

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("{task.fields[tok_s]}"),
                    console=Console(stderr=True), transient=False)
