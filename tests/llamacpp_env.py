"""Find the llama.cpp server and weights that `python -m sweep.engines llamacpp` installed.

Tests of the real engine skip with this reason only when the engine is not
installed on this machine; under CI (``CI=true``, where .ci/run installs it)
a missing engine is a failure, so CI can never pass by skipping them.
"""

from __future__ import annotations

import os
import socket
from functools import lru_cache
from pathlib import Path

import pytest

REASON = "llama.cpp is not installed here: run `python -m sweep.engines llamacpp` (.ci/run does)"


@lru_cache(maxsize=1)
def installed() -> dict[str, Path] | None:
    """{server, model, draft} paths when everything is installed, else None."""
    from sweep.engines import missing, paths, resolve

    install, model = resolve("llamacpp", [])
    return None if missing(install, model) else paths(install, model)


def require() -> dict[str, Path]:
    """The paths, or skip (fail under CI) with a reason that says how to install."""
    found = installed()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the real engine: " + REASON)
        pytest.skip(REASON)
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
