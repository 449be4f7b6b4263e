"""Row names that fit a terminal table and still tell its rows apart.

Why: a trial's name repeats the box, the workload and the load list
(``b300-ddtree-b8-t4-w2048-seed``, ``cpu-ngram-b4-bind1-...-cpu-ctx64.256-c1.2.4-mt64``),
and rich cut names at the end -- the part that differs between rows -- so two
configs printed the same ``cpu-ngram-b16-ngr…``. Every terminal table (the
report, a sweep's closing table, the schedule) names its rows here: the
``-``-separated tokens every row shares are left out (the table's title says
them once), what is left is shortened *from the middle* (the head and the
end kept, ``…`` between) only as far as every name stays distinct, and two
configs whose names are equal get their config id's start. ``--full-names``
and ``--format json`` give the full names and config ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

ELLIPSIS = "…"
SEP = "-"


@dataclass(frozen=True)
class ShortNames:
    """The names as a table shows them (in the order given) and the tokens every row shared."""

    names: list[str]
    common: list[str] = field(default_factory=list)

    def note(self) -> str:
        """What the title says once instead of every row: ``names without b300, seed``."""
        return f"names without {', '.join(self.common)}" if self.common else ""


def _common_tokens(split: Sequence[list[str]]) -> list[str]:
    """Tokens every name holds, in the first name's order (none for a single row: nothing to compare)."""
    if len(split) < 2:
        return []
    shared = set(split[0]).intersection(*map(set, split[1:]))
    return list(dict.fromkeys(t for t in split[0] if t in shared))


def _distinct(names: Sequence[str], full: Sequence[str]) -> bool:
    """Names told apart as well as the full names were (leaving tokens out can only merge names)."""
    return len(set(names)) == len(set(full))


def middle(name: str, width: int, head: int | None = None) -> str:
    """``name`` in ``width`` characters: its first ``head`` (a third by default) and its end, ``…`` between."""
    if len(name) <= width:
        return name
    if width <= 1:
        return name[-width:] if width > 0 else ""
    keep = width - 1
    h = min(keep, max(0, keep // 3 if head is None else head))
    return name[:h] + ELLIPSIS + name[len(name) - (keep - h):]


def _fit(names: list[str], width: int) -> list[str]:
    """Shortened from the middle to ``width`` where every name stays distinct; wider where it would not."""
    want = len(set(names))
    for w in range(max(1, width), max(map(len, names), default=0) + 1):
        third = (w - 1) // 3  # the head a third, the end two thirds; else the nearest cut that tells them apart
        for head in sorted(range(2 * third + 1), key=lambda h: (abs(h - third), h)):  # the end: a third at least
            cut = [middle(n, w, head) for n in names]
            if len(set(cut)) == want:
                return cut
    return names


def short_names(full: Sequence[str], width: int | None = None, ids: Sequence[str] | None = None) -> ShortNames:
    """Each row's name for a table: the shared tokens left out, then shortened from the middle to ``width``.

    ``ids``: each row's config id; two rows whose names are equal get ``#<id start>`` so different
    configs never print the same name."""
    split = [n.split(SEP) for n in full]
    common = _common_tokens(split)
    names = [SEP.join(t for t in parts if t not in common) for parts in split]
    if common and (not all(names) or not _distinct(names, full)):
        common, names = [], list(full)
    if ids is not None and len(set(zip(names, ids))) > len(set(names)):
        seen: dict[str, set[str]] = {}
        for n, i in zip(names, ids):
            seen.setdefault(n, set()).add(i)
        names = [f"{n}#{i[:6]}" if len(seen[n]) > 1 else n for n, i in zip(names, ids)]
    if width is not None and names:
        names = _fit(names, width)
    return ShortNames(names, common)


def renamed(text: str, names: dict[str, str]) -> str:
    """``text`` with each full name of ``names`` replaced by its short one (the lines under a table
    name its rows as the table does); a name inside a longer name is left alone."""
    import re

    pairs = {full: short for full, short in names.items() if full and full != short}
    if not pairs:
        return text
    pattern = re.compile(r"(?<![\w.=-])(" + "|".join(re.escape(f) for f in sorted(pairs, key=len, reverse=True))
                         + r")(?![\w.=-])")
    return pattern.sub(lambda m: pairs[m.group(1)], text)
