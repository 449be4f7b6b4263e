"""Config names in an HTML table cell: what the heading already says dropped, the rest shortened from
the middle, the full name in a ``title`` (the browser's tooltip) -- never cut at its distinguishing end.

Why: the deployment table printed every tied and every failed config's full name
(``cpu-ngram-b4-max6-min2-smoke-c1.2.4.8``) unbroken in one cell; at 1400 px the table grew to 5,700 px
and clipped its right-hand columns. Names of one group share their start (the box, the algorithm) and
their end (the workload, the loads): the part that tells two rows apart is in the middle and at its
edges, so the shortened form keeps both ends of what is left.
"""

from __future__ import annotations

import os
from html import escape
from pathlib import Path
from typing import Iterable, Sequence

NAME_CHARS = 30  # a name cell at 1400 px, beside the figures
LISTED = 2  # names a list cell shows before "+N more" (all of them in its title)


def middle(text: str, limit: int = NAME_CHARS) -> str:
    """``cpu-ngram-b4…min2-c1.2.4.8``: at most ``limit`` characters, the ellipsis in the middle."""
    if len(text) <= limit:
        return text
    head = (limit - 1 + 1) // 2
    tail = limit - 1 - head
    return f"{text[:head]}…{text[len(text) - tail:]}" if tail > 0 else text[: limit - 1] + "…"


def without(name: str, said: Iterable[str]) -> str:
    """The name without the ``-``-separated parts the heading already says (the box, the workload);
    the name itself when nothing would be left."""
    drop = {s for s in said if s}
    parts = [p for p in name.split("-") if p not in drop]
    return "-".join(parts) or name


def name_html(name: str, said: Sequence[str] = (), limit: int = NAME_CHARS) -> str:
    """One config's name for a cell: short text, the full name as its tooltip (``nm``: never broken
    inside, at a hyphen)."""
    shown = middle(without(name, said), limit)
    return f'<span class="nm" title="{escape(name)}">{escape(shown)}</span>'


def names_html(names: Sequence[str], said: Sequence[str] = (), prefix: str = "",
               listed: int = LISTED) -> str:
    """A list of names for one cell: the first ``listed`` shortened, then ``+N more``; every full name
    in the cell's tooltip. ``–`` for none."""
    if not names:
        return "–"
    shown = ", ".join(f'<span class="nm">{escape(prefix + middle(without(n, said), NAME_CHARS - len(prefix)))}'
                      "</span>" for n in names[:listed])
    more = f' <span class="nm">+{len(names) - listed} more</span>' if len(names) > listed else ""
    full = escape("\n".join(prefix + n for n in names))
    return f'<span title="{full}">{shown}{more}</span>'


def results_dir(sources: Sequence[str] | None) -> str | None:
    """The one directory holding every result the page was made from (a sweep dir, a landscapes
    dir), absolute: what ``--dir`` takes in the commands the page prints. None when a source is not
    a file of this machine (runs read back from MLflow) -- the page then prints a placeholder."""
    dirs = []
    for source in sources or ():
        path = Path(str(source).split("#", 1)[0])
        if not path.is_file():
            return None
        dirs.append(str(path.resolve().parent))
    return os.path.commonpath(dirs) if dirs else None
