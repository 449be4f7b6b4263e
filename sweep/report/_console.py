"""The stderr console the summaries print to."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


def console() -> Console:
    """stderr console; 120 columns when not a terminal (logs, CI) so tables stay readable."""
    from rich.console import Console

    out = Console(stderr=True)
    return out if out.is_terminal else Console(stderr=True, width=120)


def fmt(x: Any, nd: int = 1) -> str:
    """A number for a table cell: ``-`` when unknown."""
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.{nd}f}"
    return str(x)
