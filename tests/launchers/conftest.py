"""Fixtures for the launcher tests (helpers live in launcher_helpers.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

# The helpers sit beside this file; tests/launchers has no __init__.py on purpose
# (a package named "launchers" would shadow the real one), so make them importable
# under any --import-mode.
sys.path.insert(0, str(Path(__file__).parent))
from launcher_helpers import free_port, settings  # noqa: E402

from launchers.local import LocalLauncher


@pytest.fixture(autouse=True)
def private_state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Server state files (launchers._state) go to a temp dir, never the user's ~/.local/state.

    Through the environment, so controller subprocesses started by a test inherit it.
    """
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))


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
