"""Shared fixtures.

``sim_server``: a factory that starts the real simulator process from config
overrides (compose -> validate -> render, exactly like a trial), on a free
ephemeral port with a 0.2 s emulated load, waits for /health 200 and kills
every process group it started at teardown::

    def test_x(sim_server):
        sim = sim_server("hardware=b300", "spec.budget=4")
        httpx.get(sim.base_url + "/health")
        sim.log_text()            # the server's stderr so far
        sim_server("spec.budget=16", wait=False).wait_exit()  # startup faults
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

# The local launcher records the servers it starts under $XDG_STATE_HOME; tests
# (and the `python -m sweep` subprocesses they start) keep that out of ~.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="specsweep-test-state-")

from sweep.sim.launch import SimProcess, start_sim


@pytest.fixture
def sim_server(tmp_path: Path) -> Iterator[Callable[..., SimProcess]]:
    started: list[SimProcess] = []

    def start(*overrides: str, **kwargs: Any) -> SimProcess:
        kwargs.setdefault("log_dir", tmp_path / "sim-logs")
        sim = start_sim(*overrides, **kwargs)
        started.append(sim)
        return sim

    yield start
    for sim in started:
        sim.stop()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """How long each README command took (tests/test_readme.py), when any ran."""
    import readme_blocks

    if readme_blocks.TIMES:
        terminalreporter.section("README commands (tests/test_readme.py)")
        for line in readme_blocks.times_table():
            terminalreporter.write_line(line)
