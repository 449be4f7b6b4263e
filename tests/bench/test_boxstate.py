"""The box's state (sweep/bench/boxstate.py, gpustate.py): read from this machine's real /proc,
with a real CPU-burning process that is not ours made busy on purpose; the NVIDIA part on
hand-written nvidia-smi text and a stand-in nvidia-smi script (no GPU runs here)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from sweep.bench import boxstate, gpustate
from sweep.record.result import Cell

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi"
BURN = "import os, time\nos.sched_setaffinity(0, {0})\nt = time.time()\nwhile time.time() - t < %s: pass\n"


def ahead_burn(seconds: float) -> str:
    """Python that burns any core for ``seconds``, at nice -10 where it may (root, as CI runs)."""
    return "import os\ntry: os.nice(-10)\nexcept OSError: pass\n" + (BURN % seconds).replace(
        "{0}", "os.sched_getaffinity(0)")


def orphan_burner(seconds: float) -> int:
    """A process burning a core that is NOT in our process tree (its parent, a shell, exits at once:
    it is re-parented away from us), as another user's job would be. Its pid."""
    # On any core, and (as root, as CI runs) ahead of the suite's other workers and their engines:
    # pinned to a core they also pin to, at their priority, it can starve below the listing floor.
    code = ahead_burn(seconds)
    out = subprocess.run(["sh", "-c", f"{sys.executable} -c '{code}' >/dev/null 2>&1 & echo $!"],
                         capture_output=True, text=True, check=True)
    return int(out.stdout)


def burning(seconds: float) -> Iterator[int]:
    """An orphan burner for the length of a test (killed after it)."""
    pid = orphan_burner(seconds)
    time.sleep(0.3)
    yield pid
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass


@pytest.fixture
def burner(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    # A CI box runs the suite's other workers and their engines beside this test: they may outburn
    # the orphan (a busy core shares itself out thinly), so every other process is listed here.
    monkeypatch.setattr(boxstate, "TOP_PROCS", 10_000)
    monkeypatch.setattr(boxstate, "PROC_FLOOR", 0.0)
    yield from burning(30)


def test_reads_this_machine_and_tells_our_tree_from_others(burner: int) -> None:
    # ours burns like the orphan (any core, ahead of the suite's other workers): pinned to one core at
    # their priority it got 0.03 of a core in a CI run, below what this test can tell from nothing
    ours = subprocess.Popen([sys.executable, "-c", ahead_burn(30)])
    try:
        time.sleep(0.3)
        state = boxstate.Watch(busy_load=0.1).now(1.5)
    finally:
        ours.kill()
        ours.wait()
    assert state["cpus"] == os.cpu_count() and 0 in state["cores"]
    # (a shared box: each burner gets what the other users leave it, so the bounds are low)
    assert state["own_cpu"] >= 0.1                    # our child's burn is ours
    assert state["others_cpu"] >= 0.1                 # the orphan's is not
    assert burner in [p["pid"] for p in state["busy_procs"]]
    assert ours.pid not in [p["pid"] for p in state["busy_procs"]]
    assert state["load_avg"] == pytest.approx(float(Path("/proc/loadavg").read_text().split()[0]), abs=2)
    assert state["load_beyond_own"] is not None and state["load_beyond_own"] >= 0
    assert state["steal"] is not None and 0 <= state["steal"] <= 1
    assert state["busy"] is True and f"pid {burner}" in state["why"][0]
    assert "workload.busy_load 0.1" in boxstate.describe(state)
    Cell.from_dict({"context": 1, "concurrency": 1, "box_state": state})  # the result type holds it


def test_refuse_waits_its_bound_then_says_what_was_busy(burner: int) -> None:
    t0 = time.monotonic()
    with pytest.raises(boxstate.Busy) as got:
        boxstate.settle(boxstate.Watch(busy_load=0.1), "refuse", 2.0, window_s=0.5)
    assert 1.5 <= time.monotonic() - t0 < 6
    assert got.value.line.startswith("refused: the box is busy before the trial (workload.busy_box=refuse, waited")
    assert f"pid {burner}" in got.value.line and got.value.state["policy"] == "refuse"
    marked = boxstate.settle(boxstate.Watch(busy_load=0.1), "mark", 60, window_s=0.5)
    assert marked["busy"] is True and marked["waited_s"] < 2  # mark never waits


def test_a_box_quiet_by_the_threshold_is_not_busy() -> None:
    state = boxstate.judge({"others_cpu": 0.2, "busy_procs": [], "steal": 0.0}, busy_load=0.5)
    assert state["busy"] is False and state["why"] == []
    assert boxstate.judge({"others_cpu": None}, 0.5)["busy"] is None  # nothing read: unknown, not quiet


def test_repeats_combine_to_the_worst_and_state_key_blocks_busy_cells() -> None:
    quiet = boxstate.judge({"others_cpu": 0.1, "load_avg": 1.5, "window_s": 2}, 0.5)
    busy = boxstate.judge({"others_cpu": 1.2, "load_avg": 6.2, "window_s": 2}, 0.5)
    both = boxstate.combine([quiet, busy])
    assert both is not None and both["busy"] is True and both["load_avg"] == 6.2 and both["window_s"] == 4
    assert boxstate.state_key({"box_state": both}) == "busy"
    assert boxstate.state_key(Cell.from_dict({"context": 1, "concurrency": 1, "box_state": quiet})) is None
    assert boxstate.state_key({"context": 1}) is None  # a cell from before the state was recorded


def test_nvidia_smi_text_parses_and_names_other_jobs_and_slowdowns() -> None:
    gpus = gpustate.parse_gpus((FIXTURES / "query-gpu.csv").read_text())
    apps = gpustate.parse_apps((FIXTURES / "query-compute-apps.csv").read_text())
    assert [g["index"] for g in gpus] == [0, 1, 2]
    assert gpus[1]["throttle"] == ["sw_power_cap", "hw_thermal"] and gpus[1]["temp_c"] == 91
    assert gpus[2]["sm_mhz"] is None and gpus[2]["throttle"] == []
    part = gpustate.state(gpus, apps, own={4242})
    assert part["gpu_others"] == [{"gpu": 1, "pid": 777, "name": "train", "memory_mib": 40960}]
    state = boxstate.judge({"others_cpu": 0.0, **part}, 0.5)
    assert state["busy"] is True
    assert "another process on GPU 1: train (pid 777, 40960 MiB)" in state["why"]
    assert any(w.startswith("GPU 1 held down: hw_thermal (SM 1410.0 of 1965.0 MHz") for w in state["why"])


def _stand_in(tmp_path: Path, body: str) -> str:
    """A stand-in ``nvidia-smi`` (fake: no GPU here) answering the two queries gpustate sends."""
    exe = tmp_path / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


def test_a_stand_in_nvidia_smi_is_called_with_the_queries_and_a_hung_one_is_bounded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    smi = _stand_in(tmp_path, f'case "$1" in --query-gpu=index,uuid,name,clocks.sm,*) cat {FIXTURES}/query-gpu.csv;;\n'
                              f'--query-compute-apps=gpu_uuid,pid,*) cat {FIXTURES}/query-compute-apps.csv;;\n'
                              'esac\n')
    got = boxstate.Watch(busy_load=64, roots=(4242,), smi=smi).now(0.2)
    assert [g["index"] for g in got["gpus"]] == [0, 1, 2] and [a["pid"] for a in got["gpu_others"]] == [777]
    assert got["busy"] is True
    hung = _stand_in(tmp_path / "..", "sleep 30\n")
    monkeypatch.setattr(gpustate, "TIMEOUT_S", 0.5)
    t0 = time.monotonic()
    assert gpustate.read([], smi=hung) is None
    assert time.monotonic() - t0 < 5
