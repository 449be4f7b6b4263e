"""workload.busy_box on real simulator trials (`python -m sweep`, real processes, real /proc):
a box made busy by a CPU-burning process that is not the run's own is refused before any
server starts, or measured and its cells marked (sweep/bench/boxstate.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from _support import free_port
from tests.bench.test_boxstate import burning

FAST = ["workload=smoke", "workload.coding=off", "server.sim.load_seconds=0.2", "mlflow.enabled=false"]


@pytest.fixture
def burner() -> Iterator[int]:
    yield from burning(120)


def sweep(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    out = subprocess.run([sys.executable, "-m", "sweep", *FAST, f"server.port={free_port()}", *args], cwd=tmp_path,
                         capture_output=True, text=True, timeout=180)
    docs = [json.loads(p.read_text()) for p in (tmp_path / "outputs").rglob("result.json")]
    return out, (docs[0] if docs else {})


def test_refuse_fails_the_trial_before_any_server_with_one_line_naming_the_neighbour(
        tmp_path: Path, burner: int) -> None:
    out, doc = sweep(tmp_path, "workload.busy_box=refuse", "workload.busy_wait_s=2", "workload.busy_load=0.1")
    assert out.returncode == 1, out.stderr[-2000:]
    assert doc["status"] == "failed" and doc["failure"]["reason"] == "busy_box"
    line = doc["failure"]["message"]
    assert line.startswith("refused: the box is busy before the trial (workload.busy_box=refuse, waited")
    assert f"pid {burner}" in line
    assert doc["server"] is None and doc["cells"] == []  # no server was touched
    assert doc["box_state"]["busy"] is True and doc["box_state"]["waited_s"] >= 1.0
    assert "refused: the box is busy" in out.stdout + out.stderr


def test_mark_measures_and_marks_every_cell_with_what_was_busy(tmp_path: Path, burner: int) -> None:
    out, doc = sweep(tmp_path, "workload.busy_load=0.1")
    assert out.returncode == 0, out.stderr[-2000:]
    assert doc["status"] == "ok" and doc["box_state"]["policy"] == "mark"
    [cell] = doc["cells"]
    state = cell["box_state"]
    assert state["busy"] is True and state["window_s"] > 0 and state["others_cpu"] >= 0.1
    assert burner in [p["pid"] for p in state["busy_procs"]] and state["why"]


def test_a_bad_policy_is_one_line_and_exit_2(tmp_path: Path) -> None:
    out, doc = sweep(tmp_path, "workload.busy_box=sometimes")
    assert out.returncode == 2 and doc == {}
    assert out.stderr.strip().splitlines()[-1] == ("error: workload.busy_box: must be one of mark, wait, refuse, "
                                                    "got 'sometimes'")


def test_doctor_shows_the_box_state_and_the_policy(tmp_path: Path, burner: int) -> None:
    out = subprocess.run([sys.executable, "-m", "sweep.doctor", "workload=smoke", "workload.busy_load=0.1",
                          "workload.busy_box=wait", f"server.port={free_port()}"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "400"})
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    lines = out.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if "box state" in line)
    rest = [line.split("│")[1:4] for line in lines[first:] if line.startswith("│")]
    row = " ".join(" ".join(" ".join(cells).split()) for cells in rest)  # the row's folded lines, one space each
    assert "warn" in row and f"(pid {burner})" in row and "load average" in row
    assert "workload.busy_box=wait (waits up to 120 s)" in row

