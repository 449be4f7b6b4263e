"""The stderr console the summaries print to."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


def columns(default: int) -> int:
    """``$COLUMNS`` when set (a terminal's width said to a pipe), else ``default``."""
    import os

    raw = os.environ.get("COLUMNS", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else default


def console(width: int = 120) -> Console:
    """stderr console; when not a terminal (logs, CI) ``$COLUMNS`` or ``width`` columns, so tables stay
    readable and fit what the reader said their screen is."""
    from rich.console import Console

    out = Console(stderr=True)
    return out if out.is_terminal else Console(stderr=True, width=columns(width))


def fmt(x: Any, nd: int = 1) -> str:
    """A number for a table cell: ``-`` when unknown."""
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.{nd}f}"
    return str(x)
