"""Fixtures for the launcher tests (helpers live in launcher_helpers.py)."""

from __future__ import annotations

from typing import Iterator

import pytest
from launcher_helpers import free_port, settings

from launchers.local import LocalLauncher


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def launcher() -> Iterator[LocalLauncher]:
    lau = LocalLauncher(settings())
    try:
        yield lau
    finally:
        lau.stop()
