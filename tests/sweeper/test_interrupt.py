"""Ctrl-C and a killed sweeper: the rerun resumes the same study, nothing stays RUNNING."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from optuna.trial import TrialState

from .conftest import app_argv, env, load

PRODUCTION = {"spec.budget": 8, "spec.topk": 4, "spec.window": 2048}


def start_blocked(tmp_path: Path, storage: str) -> subprocess.Popen[str]:
    """A sweep whose first job (trial 0) hangs until the block file is removed."""
    block = tmp_path / "block"
    block.touch()
    proc = subprocess.Popen(app_argv(tmp_path / "sweep", storage, "hydra.sweeper.n_trials=4",
                                     f"block_file={block}"), cwd=tmp_path, env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    marker = tmp_path / "sweep" / "0" / "blocked"
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, "trial 0 never started"
        time.sleep(0.05)
    block.unlink()  # the rerun's jobs run normally
    return proc


def test_ctrl_c_then_rerun_resumes(run_app, tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path}/study.db"
    proc = start_blocked(tmp_path, storage)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert "interrupted: resume with the same command" in out
    study = load(storage)
    t0 = study.trials[0]
    assert t0.state == TrialState.FAIL and t0.user_attrs["failure_reason"] == "interrupted"
    waiting = [t for t in study.trials if t.state == TrialState.WAITING]
    assert len(waiting) == 1 and waiting[0].user_attrs["requeued_from"] == 0

    run_app("hydra.sweeper.n_trials=4", storage=storage)
    study = load(storage)
    assert not [t for t in study.trials if not t.state.is_finished()]
    counted = [t for t in study.trials if t.user_attrs.get("failure_reason") != "interrupted"]
    assert len(counted) == 4  # n_trials counts the whole study, interrupted trials excluded
    again = [t for t in counted if t.params == PRODUCTION]
    assert len(again) == 1 and again[0].state == TrialState.COMPLETE


def test_killed_sweeper_leaves_stale_trial_marked_fail_on_rerun(run_app, tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path}/study.db"
    proc = start_blocked(tmp_path, storage)
    proc.kill()  # SIGKILL: no cleanup at all
    proc.communicate(timeout=30)
    assert load(storage).trials[0].state == TrialState.RUNNING

    rerun = run_app("hydra.sweeper.n_trials=4", storage=storage)
    assert "marked FAIL (stale)" in rerun.stdout + rerun.stderr
    study = load(storage)
    t0 = study.trials[0]
    assert t0.state == TrialState.FAIL and t0.user_attrs["failure_reason"] == "stale"
    assert "is gone" in t0.user_attrs["failure_message"]
    assert all(t.state.is_finished() for t in study.trials)
    counted = [t for t in study.trials if t.user_attrs.get("failure_reason") != "stale"]
    assert len(counted) == 4
    assert [t.state for t in counted if t.params == PRODUCTION] == [TrialState.COMPLETE]
