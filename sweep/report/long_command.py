"""A long command as it fits a screen: its program, the flags that differ, and where it is whole.

The study summary printed the best trial's simulator command in full: 1,400
characters, most of them the ``--sim-hardware`` / ``--sim-model`` JSON blobs,
which wrapped over a dozen terminal lines and hid the lines below. On screen a
command keeps its program and, when it does not fit, the flags whose values
differ from the other commands it is compared with (the speculative settings a
search varied), long values shown by their size; without others to compare
with, its head and tail. The files (best.yaml, result.json) keep it whole, and
the shortened line says where.
"""

from __future__ import annotations

import shlex
from typing import Sequence

VALUE_LIMIT = 48  # longer values (JSON blobs, long paths) show as <N chars>
SCREEN_LIMIT = 400  # a command longer than this is shortened


def _units(command: str) -> tuple[list[str], list[tuple[str, ...]]]:
    """The program words (up to the first long flag: ``python -m sweep.sim`` stays one) and the
    flags, each with its values."""
    words = shlex.split(command)
    head: list[str] = []
    units: list[list[str]] = []
    for word in words:
        if word.startswith("--") and len(word) > 2:
            units.append([word])
        elif units:
            units[-1].append(word)
        else:
            head.append(word)
    return head, [tuple(u) for u in units]


def _text(words: Sequence[str], value_limit: int) -> str:
    return " ".join(shlex.quote(w) if len(w) <= value_limit else f"<{len(w):,} chars>" for w in words)


def on_screen(command: str, where: str, others: Sequence[str] = (), *,
              value_limit: int = VALUE_LIMIT, limit: int = SCREEN_LIMIT) -> str:
    """``command`` as the console shows it: unchanged when it fits in ``limit`` characters,
    else its program and the flags that differ from ``others`` (or its head and tail),
    ending with where it is whole (``where``: ``best.yaml``)."""
    flat = " ".join(command.split())
    if len(flat) <= limit:
        return flat
    whole = f"{len(flat):,} chars in full in {where}"
    try:
        head, units = _units(flat)
        other_units = [set(_units(o)[1]) for o in others]
    except ValueError:  # unbalanced quotes: cut the text as it is
        keep = (limit - 5) // 2
        return f"{flat[:keep]} ... {flat[-keep:]}  ({whole})"
    differ = [u for u in units if any(u not in seen for seen in other_units)]
    if differ:
        shown = [_text(u, value_limit) for u in differ]
        return f"{_text(head, value_limit)} ... {' '.join(shown)}  (the flags that differ; {whole})"
    text = f"{_text(head, value_limit)} " + " ".join(_text(u, value_limit) for u in units)
    if len(text) > limit:
        keep = (limit - 5) // 2
        text = f"{text[:keep].rstrip()} ... {text[-keep:].lstrip()}"
    return f"{text}  ({whole})"
