"""A terminal table that fits its width: the name column shrinks, the figures never do.

Why: rich shares a shortage of width over every column, so at 100 or 120
columns the rank/★ and n columns came out as ``┏┳━━`` and names lost their
distinguishing end. Here the columns a verdict needs (marker, n, the figure
and its interval) keep their full width (``no_wrap``, ``min_width``), the
columns a reader can do without are left out last-first when even short names
would not fit (the table says which, once), and the name column gets what
remains; :mod:`sweep.report.shortnames` shortens the names to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from sweep.report.shortnames import ShortNames, short_names

MIN_NAME = 24  # names up to this long are cut only when no column is left to leave out
WRAPPED = 24  # the most a wrapping text column (a list of names) is given


@dataclass
class Column:
    header: str
    cells: list[str]
    justify: str = "right"
    optional: bool = False  # left out (the last optional one first) when the names would not fit
    wrap: bool = False  # a text column that may wrap (a list of names); the others never do

    def width(self) -> int:
        from rich.cells import cell_len

        return max([cell_len(self.header), *(cell_len(c) for c in self.cells)])

    def need(self) -> int:
        """The width it takes from the names: its full width, a wrapping column at most ``WRAPPED``."""
        return min(self.width(), WRAPPED) if self.wrap else self.width()


@dataclass
class Fitted:
    columns: list[Column]  # kept, in order; the name column at ``name_at``
    names: ShortNames  # every name the table and the lines under it may say, as shown
    left_out: list[str] = field(default_factory=list)  # headers of the columns that did not fit
    rows: list[int | None] | None = None  # which name each table row shows (None: one row per name)

    def row_names(self) -> list[str]:
        if self.rows is None:
            return list(self.names.names)
        return ["-" if i is None else self.names.names[i] for i in self.rows]

    def mapping(self, full: Sequence[str]) -> dict[str, str]:
        """Full name -> the name as shown (for :func:`sweep.report.shortnames.renamed`)."""
        return dict(zip(full, self.names.names))

    def note(self) -> str:
        """One line naming what this width leaves out, and where it is."""
        if not self.left_out:
            return ""
        return f"not shown at this width: {', '.join(self.left_out)} (a wider terminal or --format json shows them)"

    def key(self, full: Sequence[str], ids: Sequence[str]) -> list[str]:
        """``--full-names``: each row's name as shown, its full name and its config id, one line each."""
        pad = max((len(n) for n in self.names.names), default=0)
        return [f"  {short:<{pad}}  {name}  (config {cid or '-'})"
                for short, name, cid in zip(self.names.names, full, ids)]


def _total(columns: Sequence[Column], name_width: int) -> int:
    """The table's width: each column's content + 2 of padding, + 1 rule per column and one more."""
    return sum(c.need() for c in columns) + name_width + 3 * (len(columns) + 1) + 1


def fit(columns: Sequence[Column], names: Sequence[str], width: int | None,
        ids: Sequence[str] | None = None, rows: list[int | None] | None = None) -> Fitted:
    """Which columns to keep and how wide the names may be at ``width`` (None: unbounded). ``names``:
    every config the table and its lines name (kept distinct); ``rows``: each table row's index into
    them (None: a row per name)."""
    if width is None:
        return Fitted(list(columns), short_names(names, ids=ids), rows=rows)
    kept, left = list(columns), list[str]()
    natural = max((len(n) for n in short_names(names, ids=ids).names), default=0)
    while True:
        room = width - _total(kept, 0)  # what the other columns leave the names
        shown = short_names(names, width=max(MIN_NAME // 2, room), ids=ids)
        longest = max((len(n) for n in shown.names), default=0)
        drop = next((c for c in reversed(kept) if c.optional), None)
        if (longest <= room and room >= min(MIN_NAME, natural)) or drop is None:  # fits, or nothing to leave out
            return Fitted(kept, shown, left, rows)
        kept.remove(drop)  # names cut into each other, or cut at all up to MIN_NAME: a figure a reader can spare goes
        left.insert(0, drop.header)


def table(fitted: Fitted, name_header: str, name_at: int, title: str | None = None, caption: str | None = None,
          styles: Sequence[str | None] | None = None) -> Any:
    """The rich table of a fit: the name column between ``name_at`` kept columns and the rest."""
    from rich.table import Table

    out = Table(title=title, caption=caption, title_justify="left", caption_justify="left")
    cols = fitted.columns
    for c in cols[:name_at]:
        _add(out, c)
    out.add_column(name_header, overflow="fold")  # the one column that gives way on a very narrow screen
    for c in cols[name_at:]:
        _add(out, c)
    for i, name in enumerate(fitted.row_names()):
        cells = [c.cells[i] for c in cols]
        out.add_row(*cells[:name_at], name, *cells[name_at:],
                    style=styles[i] if styles is not None else None)
    return out


def _add(table: Any, c: Column) -> None:
    if c.wrap:
        table.add_column(c.header, justify=c.justify, max_width=c.need())
    else:
        table.add_column(c.header, justify=c.justify, no_wrap=True, min_width=c.width())
