"""Find an engine that `python -m sweep.engines <engine>` installed, or skip (fail under CI).

Tests of a real engine skip only when it is not installed on this machine;
under CI (``CI=true``, where .ci/run installs every engine) a missing engine is
a failure, so CI can never pass by skipping them.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Iterator

import pytest


def reason(engine: str) -> str:
    return f"{engine} is not installed here: run `python -m sweep.engines {engine}` (.ci/run does)"


@lru_cache(maxsize=None)
def installed(engine: str) -> dict[str, Path] | None:
    """The engine's paths (server, model, ...) when everything is installed, else None."""
    from sweep.engines import missing, paths, resolve

    install, model = resolve(engine, [])
    return None if missing(install, model) else paths(install, model)


def require(engine: str) -> dict[str, Path]:
    """The paths, or skip (fail under CI) with a reason that says how to install."""
    found = installed(engine)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the real engine: " + reason(engine))
        pytest.skip(reason(engine))
    return found


# Real engines spin the CPUs (llama.cpp's thread, vLLM's OpenMP threads), and the suite runs
# four xdist workers on two cores: beside them, the tests that time the real-time simulator
# (TPOT against an SLO, repeat-to-repeat noise) measured the engines' load instead. Engines
# run at this niceness during their tests: the same work, done in the gaps.
ENGINE_NICE = 5


def yield_the_cpu() -> None:
    """Raise this process's niceness to ENGINE_NICE (a ``preexec_fn`` for engine commands)."""
    os.setpriority(os.PRIO_PROCESS, 0, max(os.getpriority(os.PRIO_PROCESS, 0), ENGINE_NICE))


@contextmanager
def yielding_the_cpu() -> Iterator[None]:
    """This process (and what it starts) at ENGINE_NICE for the block; back after it where
    allowed (lowering niceness needs root: elsewhere the worker stays nicer)."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    yield_the_cpu()
    try:
        yield
    finally:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, before)
        except PermissionError:
            pass
