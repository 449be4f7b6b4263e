"""Ctrl-C, then the same command: it resumes where it stopped -- no ``hydra.sweep.dir`` needed.

End to end on the real simulator (``python -m sweep`` subprocesses, a real SIGINT):

* a grid stopped after its first trial says what will happen next ("1 of 3 trials
  done; run the same command again to resume (results in multirun/...); add --fresh
  to start over"); the same command again runs in that sweep dir, skips the finished
  trial and runs the rest; once finished, the same command measures again in a new
  dir and says so; ``--fresh`` after an interrupt starts over in a new dir;
* a search (``hydra/sweeper=optuna``) stopped the same way continues its study in
  the same dir up to its ``n_trials``;
* ``--fresh`` with an explicit ``hydra.sweep.dir`` is one line, exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_sweep_results import FAST, Running, _wait_for
from test_trial_e2e import sim_pids, sweep

from _support import free_port

pytestmark = pytest.mark.slow


def _ok(root: Path) -> list[Path]:
    out = []
    for path in sorted(root.glob("multirun/*/*/*/result.json")):
        try:
            if json.loads(path.read_text()).get("status") == "ok":
                out.append(path)
        except (OSError, ValueError):
            continue
    return out


def _sweep_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("multirun/*/*") if p.is_dir())


def _interrupt_after_first(tmp_path: Path, *args: str) -> tuple[int, str]:
    run = Running(tmp_path, *args)
    try:
        _wait_for("the first finished trial", lambda: len(_ok(tmp_path)) >= 1, timeout=240, proc=run)
        code = run.interrupt()
    finally:
        run.kill()
    return code, run.text()


def test_the_same_grid_command_after_ctrl_c_resumes_it(tmp_path: Path) -> None:
    port = free_port()
    args = ["-m", "spec.budget=4,6,8", "workload=smoke", "workload.max_tokens=256", *FAST, f"server.port={port}"]
    code, said = _interrupt_after_first(tmp_path, *args)
    assert code == 130, said[-3000:]
    [sweep_dir] = _sweep_dirs(tmp_path)
    shown = sweep_dir.relative_to(tmp_path)
    last = said.strip().splitlines()[-1]
    assert last == (f"interrupted: 1 of 3 trials done; run the same command again to resume (results in "
                    f"{shown}); add --fresh to start over"), said[-2000:]
    [first] = _ok(tmp_path)
    before = first.read_text()

    again = sweep(tmp_path, *args, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert _sweep_dirs(tmp_path) == [sweep_dir]  # the same dir, not a new one
    assert f"resuming {shown}: 1 of 3 trials done" in again.stderr
    assert first.read_text() == before  # the finished trial was not run again
    name = json.loads(before)["trial"]["name"]  # b4's name (with the measured difference, max tokens)
    assert name.startswith("b300-ddtree-b4-t4-w2048-smoke")
    assert f"job 0 {name}: skipped, complete (ok)" in " ".join(again.stderr.split())
    assert again.stderr.count("throughput matrix") == 2  # budgets 6 and 8 ran
    assert len(_ok(tmp_path)) == 3

    # finished: the same command measures again, in a new dir, and says where the old results are
    third = sweep(tmp_path, *args, timeout=300)
    assert third.returncode == 0, third.stderr[-3000:]
    assert f"this command finished before in {shown}; measuring again in a new sweep dir" in third.stderr
    assert len(_sweep_dirs(tmp_path)) == 2 and third.stderr.count("throughput matrix") == 3
    assert sim_pids(port) == []


def test_fresh_after_ctrl_c_starts_over_in_a_new_dir(tmp_path: Path) -> None:
    port = free_port()
    args = ["-m", "spec.budget=4,8", "workload=smoke", "workload.max_tokens=256", *FAST, f"server.port={port}"]
    code, _ = _interrupt_after_first(tmp_path, *args)
    assert code == 130
    [kept] = _sweep_dirs(tmp_path)
    fresh = sweep(tmp_path, "--fresh", *args, timeout=300)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert f"--fresh: starting over in a new sweep dir (the unfinished one stays: {kept.relative_to(tmp_path)})" \
        in fresh.stderr
    dirs = _sweep_dirs(tmp_path)
    assert len(dirs) == 2 and kept in dirs and fresh.stderr.count("throughput matrix") == 2
    assert sim_pids(port) == []


def test_the_same_search_command_after_ctrl_c_continues_its_study(tmp_path: Path) -> None:
    port = free_port()
    args = ["-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=3", "workload=smoke",
            "workload.max_tokens=256", *FAST, f"server.port={port}"]
    code, said = _interrupt_after_first(tmp_path, *args)
    assert code == 130, said[-3000:]
    [sweep_dir] = _sweep_dirs(tmp_path)
    assert "interrupted: 1 of 3 trials done; run the same command again to resume" in said, said[-2000:]
    [first] = _ok(tmp_path)
    before = first.read_text()
    again = sweep(tmp_path, *args, timeout=400)
    assert again.returncode == 0, again.stderr[-3000:]
    assert _sweep_dirs(tmp_path) == [sweep_dir]
    both = again.stdout + again.stderr
    assert "Using an existing study" in both and first.read_text() == before
    assert "has 3 counted trials (n_trials=3)" in both  # 1 before + 2 now, not 3 more
    assert len(_ok(tmp_path)) == 3
    assert sim_pids(port) == []


def test_fresh_with_a_given_sweep_dir_is_one_line(tmp_path: Path) -> None:
    out = sweep(tmp_path, "--fresh", "-m", "spec.budget=4,8", "workload=smoke", "hydra.sweep.dir=mine", timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("error: --fresh: starts over in a new sweep dir, but hydra.sweep.dir=mine is given")
    assert not (tmp_path / "mine").exists()
