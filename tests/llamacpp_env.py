"""Find the llama.cpp server and weights that `python -m sweep.engines llamacpp` installed.

Tests of the real engine skip with this reason only when the engine is not
installed on this machine; under CI (``CI=true``, where .ci/run installs it)
a missing engine is a failure, so CI can never pass by skipping them.
"""

from __future__ import annotations

import socket
from pathlib import Path

from _support import engine_env

REASON = engine_env.reason("llamacpp")


def installed() -> dict[str, Path] | None:
    """{server, model, draft} paths when everything is installed, else None."""
    return engine_env.installed("llamacpp")


def require() -> dict[str, Path]:
    """The paths, or skip (fail under CI) with a reason that says how to install."""
    return engine_env.require("llamacpp")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
