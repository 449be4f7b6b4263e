"""Find an engine that `python -m sweep.engines <engine>` installed, or skip (fail under CI).

Tests of a real engine skip only when it is not installed on this machine;
under CI (``CI=true``, where .ci/run installs every engine) a missing engine is
a failure, so CI can never pass by skipping them.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

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
