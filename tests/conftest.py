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
# The commands print to a pipe at $COLUMNS (what the reader said their screen is); pytest-xdist's
# workers inherit COLUMNS=80 from their terminal, which wrapped the lines tests read. Every command
# the tests start sees 120 columns, a test of another width says so in its own env.
os.environ["COLUMNS"] = "120"
# llama.cpp decodes on every core by default, and its threads spin at each step's barrier: where
# four workers share two cores, a descheduled thread stalls the other while it burns its core
# (measured: docs/llamacpp.md's grid beside three busy processes took 259 s and 245 CPU-s on two
# threads, 67 s and 42 CPU-s on one). Every llama-server the suite starts, the docs' commands
# included, runs one thread through llama.cpp's own env for -t (a rendered --threads still wins).
os.environ.setdefault("LLAMA_ARG_THREADS", "1")

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


# Under pytest-xdist (`-n N --dist loadgroup`, the README's test command), the tests of a
# group run in one worker, one after another: the SLURM tests share one cluster's three
# nodes, and each real engine wants the CPUs (its README section or docs page joins its group:
# tests/test_readme.py marks each README section's and each docs page's commands, which build
# on each other's output).
SERIAL_GROUPS = {"tests/slurm/": "slurm", "tests/engines/test_llamacpp": "llamacpp",
                 "tests/engines/test_vllm": "vllm"}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks into the node ids
def pytest_collection_modifyitems(config: Any, items: list[pytest.Item]) -> None:
    root = Path(__file__).resolve().parents[1]
    for item in items:
        rel = Path(str(item.path)).resolve().relative_to(root).as_posix()
        for prefix, group in SERIAL_GROUPS.items():
            if rel.startswith(prefix):
                item.add_marker(pytest.mark.xdist_group(group))


_UNGROUPED: dict[str, str] = {}


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """In an xdist worker under loadgroup, every grouped test must carry its group in its id
    (how xdist tells the scheduler): a pytest that ignores it runs a group across workers,
    in any order, and its tests fail for reasons that have nothing to do with them. Such
    a test fails at setup with this reason instead."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    for item in session.items:
        if item.get_closest_marker("xdist_group") and "@" not in item.nodeid:
            _UNGROUPED[item.nodeid] = (
                f"pytest-xdist's --dist loadgroup did not group this test (no @group in its id; "
                f"pytest {pytest.__version__}): install pytest<9.2 (pyproject.toml), and mark "
                "groups in a tryfirst collection hook")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.nodeid in _UNGROUPED:
        pytest.fail(_UNGROUPED[item.nodeid], pytrace=False)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect each README command's time (reported by the test, in whichever worker ran it)."""
    if report.when == "call":
        import readme_blocks

        readme_blocks.TIMES.extend(tuple(v) for k, v in report.user_properties  # type: ignore[misc]
                                   if k == "readme_time")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """How long each command of the README and the docs pages took (tests/test_readme.py), when any ran."""
    import readme_blocks

    if readme_blocks.TIMES:
        terminalreporter.section("README and docs commands (tests/test_readme.py)")
        for line in readme_blocks.times_table():
            terminalreporter.write_line(line)
