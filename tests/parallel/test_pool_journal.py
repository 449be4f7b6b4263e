"""One controller machine: the pool on its default storage (Optuna's journal file).

A grid multirun written like the basic sweeper's (``spec.budget=4,8``) runs
each point exactly once across the hosts; Ctrl-C stops every worker cleanly
(trials interrupted and queued again, servers stopped) and the rerun resumes.
"""

from __future__ import annotations

import signal
import socket
import time
from itertools import product
from pathlib import Path

import optuna
from optuna.storages.journal import JournalFileBackend, JournalStorage
from optuna.trial import TrialState

from .conftest import hosts_override, run_sweep, start_sweep

GRID = ["hydra/sweeper/sampler=grid", "~hydra/sweeper/space", "spec.budget=4,8",
        "spec.topk=1,2", "spec.window=1024"]
POINTS = {(("spec.budget", b), ("spec.topk", k)) for b, k in product((4, 8), (1, 2))}


def _trials(sweep_dir: Path) -> list[optuna.trial.FrozenTrial]:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = JournalStorage(JournalFileBackend(str(sweep_dir / "optuna.journal")))
    (name,) = optuna.get_all_study_names(storage)
    return optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)


def _config(t: optuna.trial.FrozenTrial) -> tuple[tuple[str, object], ...]:
    return tuple(sorted(t.params.items()))


def _common(sweep_dir: Path, load_s: float) -> list[str]:
    return [f"hydra.sweep.dir={sweep_dir}", "hydra.sweeper.plots.enabled=false",
            "workload=smoke", f"server.sim.load_seconds={load_s}", "mlflow.enabled=false"]


def test_grid_multirun_uses_the_pool_each_point_once(tmp_path: Path, ports: list[int]) -> None:
    sweep_dir = tmp_path / "sweep"
    proc = run_sweep(tmp_path, hosts_override(ports[:2]), *GRID, "hydra.sweeper.n_trials=50",
                     *_common(sweep_dir, 0.2))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "the grid is exhausted after 4 trials" in (sweep_dir / "workers" /
                                                      f"local_{ports[0]}.log").read_text()
    trials = _trials(sweep_dir)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 4
    assert {_config(t) for t in trials} == POINTS
    assert {t.user_attrs["host"] for t in trials} == {f"local:{p}" for p in ports[:2]}
    # spec.window=1024 is a fixed override: every job got it.
    assert all("spec.window=1024" in (Path(t.user_attrs["job_dir"]) / ".hydra" / "overrides.yaml")
               .read_text() for t in trials)


def test_ctrl_c_stops_every_worker_and_the_rerun_resumes(tmp_path: Path, ports: list[int]) -> None:
    sweep_dir = tmp_path / "sweep"
    args = [hosts_override(ports[:2]), *GRID, "hydra.sweeper.n_trials=4"]
    proc = start_sweep(tmp_path, *args, *_common(sweep_dir, 2.0))
    log = tmp_path / "controller.log"
    deadline = time.monotonic() + 90
    while True:
        assert proc.poll() is None, log.read_text()[-4000:]
        assert time.monotonic() < deadline, "the workers never started their servers"
        starting = [d for d in sweep_dir.glob("[0-9]*") if (d / "server.log").exists()]
        if len(starting) >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == 130, log.read_text()[-4000:]
    out = log.read_text()
    assert "interrupted: resume with the same command" in out

    trials = _trials(sweep_dir)
    stopped = [t for t in trials if t.state == TrialState.FAIL]
    assert len(stopped) == 2, [(t.number, t.state, t.user_attrs) for t in trials]
    assert all(t.user_attrs["failure_reason"] == "interrupted" for t in stopped)
    waiting = [t for t in trials if t.state == TrialState.WAITING]
    assert sorted(t.user_attrs["requeued_from"] for t in waiting) == sorted(t.number for t in stopped)
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    for p in ports[:2]:  # each worker stopped its server
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", p)) != 0

    again = run_sweep(tmp_path, *args, *_common(sweep_dir, 0.2))
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-4000:]
    trials = _trials(sweep_dir)
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    assert {_config(t) for t in done} == POINTS and len(done) == 4
    assert all(t.state.is_finished() for t in trials)
