"""A tracking server that accepts connections and never answers (issue 11, section 6).

``HangingServer`` is a real TCP listener that accepts and then holds every
connection without reading or answering, like a wedged MLflow behind a live
port. Runs are real ``python -m sweep`` multiruns on the simulator: a plain
grid (every job in one process) and a host pool (an Optuna search whose
trials run in two worker processes). After the first timeout
(``mlflow.timeout_s``) tracking is off for the rest of the sweep with one
warning: the hanging server sees exactly one connection however many trials
follow, in whichever process. The results stay on disk and
``python -m sweep.sync`` uploads them to a store that answers.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _support import free_port, subprocess_env

from faults.fault_runs import HangingServer, Run, sweep

pytestmark = pytest.mark.slow

WARNING = "MLflow tracking is off for the rest of this sweep"


def _tracking_was_asked_once(run: Run, hang: HangingServer, trials: int) -> None:
    try:
        assert run.proc.returncode == 0, run.proc.stderr[-3000:]
        assert "Traceback" not in run.output
        assert hang.connections == 1  # the first probe; nothing after it
        assert sum(WARNING in line for line in run.output.splitlines()) == 1, run.output[-3000:]
        assert (run.out_dir / "mlflow_off.json").is_file()
        assert [d["status"] for d in run.results] == ["ok"] * trials, [d["failure"] for d in run.results]
        assert all(d["mlflow"]["run_id"] is None and d["mlflow"]["synced"] is False for d in run.results)
        assert run.orphans() == {} and run.secrets_found() == []
    finally:
        run.cleanup()


def _sync(run: Run) -> subprocess.CompletedProcess[str]:
    store = f"sqlite:///{run.cwd / 'later.db'}"
    return subprocess.run([sys.executable, "-m", "sweep.sync", str(run.out_dir), "--tracking-uri", store],
                          cwd=run.cwd, env=subprocess_env(), capture_output=True, text=True, timeout=300)


def test_a_hanging_server_is_asked_once_per_sweep_and_sync_uploads_later(tmp_path: Path) -> None:
    with HangingServer() as hang:
        run = sweep(tmp_path, "mlflow.enabled=true", f"mlflow.tracking_uri={hang.url}", "mlflow.timeout_s=1",
                    "workload.max_tokens=16,24", multirun=True)
        _tracking_was_asked_once(run, hang, trials=2)
        # sync against the hanging server the sweep recorded (sync's default is the current URI):
        # one timeout, then the other files are not tried
        stuck = subprocess.run([sys.executable, "-m", "sweep.sync", str(run.out_dir), "--recorded-uri"], cwd=tmp_path,
                               env=subprocess_env(), capture_output=True, text=True, timeout=300)
    assert stuck.returncode == 1 and stuck.stderr.count("not tried: ") == 1, stuck.stderr[-3000:]
    assert hang.connections == 2
    synced = _sync(run)
    assert synced.returncode == 0, synced.stderr[-3000:]
    assert "2 uploaded" in synced.stderr and "parent" in synced.stderr


def test_the_switch_holds_across_the_workers_of_a_host_pool(tmp_path: Path) -> None:
    hosts = ",".join(f"{{server_port: {free_port()}}}" for _ in range(2))
    with HangingServer() as hang:
        run = sweep(tmp_path, "hydra/sweeper=optuna", f"launcher.hosts=[{hosts}]", "hydra.sweeper.n_trials=2",
                    "hydra/sweeper/sampler=grid", "~hydra/sweeper/space", "spec.budget=4,8", "spec.topk=1",
                    "spec.window=1024", "hydra.sweeper.plots.enabled=false", "mlflow.enabled=true",
                    f"mlflow.tracking_uri={hang.url}", "mlflow.timeout_s=1", multirun=True)
        _tracking_was_asked_once(run, hang, trials=2)  # run by the workers: none of them asked MLflow
