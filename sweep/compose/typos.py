"""Every misspelt key or group option of a command line, not only the first.

Hydra stops at the first override it cannot apply, so ``spec.budgit=4
workload.max_tokns=3`` was refused for ``spec.budgit`` alone: the user fixed
it, ran again and met the second. Here the faulty override is set aside and
the rest composed again, until the rest composes (a mistake of another kind is
named too and ends the search): each misspelling is one line, in command-line order.
"""

from __future__ import annotations

from typing import Callable, Sequence

from sweep.errors import ConfigError, ConfigErrors

MAX_TYPOS = 8  # a command line with more is named by its first eight
_TYPO_MARKS = ("no such key", "unknown option")


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~").split("@", 1)[0]


def _position(overrides: Sequence[str], key: str) -> int:
    """Where the override of ``key`` stands on the command line (the lines keep that order)."""
    return next((i for i, o in enumerate(overrides) if _key(o) == key), len(overrides))


def _is_typo(err: ConfigError) -> bool:
    return err.message.startswith(_TYPO_MARKS)


def every_typo(overrides: Sequence[str], first: ConfigError,
               compose: Callable[[list[str]], object]) -> ConfigError:
    """``first`` (a misspelling of one of ``overrides``) with the other misspellings found by
    composing without each faulty override in turn; ``first`` alone if there is no other."""
    if not _is_typo(first):
        return first
    found: list[tuple[int, ConfigError]] = []
    rest = list(overrides)
    err: ConfigError | None = first
    while err is not None and _is_typo(err) and len(found) < MAX_TYPOS:
        at = next((i for i, o in enumerate(rest) if _key(o) == err.key), None)
        if at is None:
            break
        found.append((_position(overrides, err.key), err))
        del rest[at]
        try:
            compose(rest)
            err = None
        except ConfigErrors as more:  # the rest's own search found them all: taken as they are
            found += [(_position(overrides, e.key), e) for e in more.errors]
            err = None
        except ConfigError as more:
            err = more
            if not _is_typo(more):  # a mistake of another kind: named too, and the search ends
                found.append((_position(overrides, more.key), more))
    if len(found) < 2:
        return first
    return ConfigErrors([e for _, e in sorted(found[:MAX_TYPOS], key=lambda pair: pair[0])])
