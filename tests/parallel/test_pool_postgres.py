"""The done-when check: three workers on PostgreSQL and a real MLflow server, one killed.

Three simulated hosts (simulators on three free ports) search one study in a
throwaway PostgreSQL database; every worker logs to one ``mlflow server``
(itself on PostgreSQL). One worker is SIGKILLed while its server is starting.
The study must still end with exactly n_trials counted trials, unique trial
numbers, the killed trial FAIL (stale), one MLflow child run per counted
trial under one parent, and no host running two trials at once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import optuna
from optuna.trial import TrialState

from .conftest import env as _env
from .conftest import hosts_override, start_sweep
from .conftest import sweep_argv as _sweep_argv

N_TRIALS = 9
STUDY = "pool-e2e"
# 3 x 2 x 3 = 18 grid points, all feasible on b300 (budget <= 8, topk <= budget).
SPACE = ["spec.budget=choice(4,6,8)", "spec.topk=choice(1,2)", "spec.window=choice(512,1024,2048)"]


def _study(storage: str) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.load_study(study_name=STUDY, storage=storage)


def _kill_a_worker_mid_trial(storage: str, sweep_dir: Path, proc: subprocess.Popen[str],
                             log: Path) -> tuple[int, int]:
    """SIGKILL the worker of a running trial (not trial 0) once its server is starting."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-4000:]
        try:
            running = _study(storage).get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        except KeyError:  # the controller has not created the study yet
            running = []
        for t in running:
            owner = t.system_attrs.get("specsweep:owner") or {}
            if t.number >= 1 and owner.get("pid") and (sweep_dir / str(t.number) / "server.log").exists():
                os.kill(int(owner["pid"]), signal.SIGKILL)
                return t.number, int(owner["pid"])
        time.sleep(0.05)
    raise AssertionError("no trial reached its server start: " + log.read_text()[-4000:])


def test_three_workers_on_postgresql_survive_a_killed_worker(
        tmp_path: Path, study_db: str, mlflow_url: str, ports: list[int]) -> None:
    sweep_dir = tmp_path / "sweep"
    proc = start_sweep(
        tmp_path, hosts_override(ports[:3]), "~hydra/sweeper/space", *SPACE,
        "hydra/sweeper/sampler=grid", f"hydra.sweeper.n_trials={N_TRIALS}",
        f"hydra.sweeper.study_name={STUDY}", f"hydra.sweeper.storage='{study_db}'",
        "hydra.sweeper.heartbeat_interval=1", "hydra.sweeper.stale_after=20",
        "hydra.sweeper.plots.enabled=false", f"hydra.sweep.dir={sweep_dir}",
        "workload=smoke", "server.sim.load_seconds=1.5", f"mlflow.tracking_uri={mlflow_url}",
        "mlflow.experiment=pool-e2e")
    log = tmp_path / "controller.log"
    killed, killed_pid = _kill_a_worker_mid_trial(study_db, sweep_dir, proc, log)
    try:
        rc = proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = log.read_text()
    assert rc == 0, out[-6000:]
    assert f"pid {killed_pid}) was killed by SIGKILL" in out

    trials = _study(study_db).get_trials(deepcopy=False)
    assert all(t.state.is_finished() for t in trials), [(t.number, t.state) for t in trials]
    numbers = [t.number for t in trials]
    assert len(numbers) == len(set(numbers))

    dead = next(t for t in trials if t.number == killed)
    assert dead.state == TrialState.FAIL and dead.user_attrs["failure_reason"] == "stale"
    assert "SIGKILL" in dead.user_attrs["failure_message"] or \
        "is gone" in dead.user_attrs["failure_message"]

    counted = [t for t in trials if t.user_attrs.get("failure_reason") not in ("stale", "interrupted")]
    assert len(counted) == N_TRIALS, [(t.number, t.state, t.user_attrs) for t in trials]
    assert all(t.state == TrialState.COMPLETE for t in counted)
    # Every counted trial ran once, each on its own config (the grid), the killed config again.
    configs = [tuple(sorted(t.params.items())) for t in counted]
    assert len(set(configs)) == N_TRIALS
    assert tuple(sorted(dead.params.items())) in configs
    assert all("duplicate_of" not in t.user_attrs for t in counted)

    # One trial per host at a time; all three hosts worked.
    labels = {f"local:{p}" for p in ports[:3]}
    by_host: dict[str, list[optuna.trial.FrozenTrial]] = {}
    for t in trials:
        assert t.user_attrs.get("host") in labels, t.user_attrs
        by_host.setdefault(t.user_attrs["host"], []).append(t)
    assert set(by_host) == labels
    for host, ts in by_host.items():
        ts.sort(key=lambda t: t.datetime_start)
        for a, b in zip(ts, ts[1:]):
            assert a.datetime_complete <= b.datetime_start, (host, a.number, b.number)

    # MLflow: one parent for the sweep, one complete child run per counted trial, none for
    # the killed one.
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_url)
    exp = client.get_experiment_by_name("pool-e2e")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("specsweep.kind") == "sweep"]
    children = [r for r in runs if r.data.tags.get("specsweep.kind") == "trial"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    parent_id = parents[0].info.run_id
    assert len(children) == N_TRIALS
    assert all(r.data.tags.get("mlflow.parentRunId") == parent_id for r in children)
    assert all(r.data.tags.get("specsweep.complete") == "true" for r in children)
    run_numbers = sorted(int(r.data.tags["optuna.trial_number"]) for r in children)
    assert run_numbers == sorted(t.number for t in counted)
    by_run = {r.info.run_id: r for r in children}
    for t in counted:
        run = by_run[t.user_attrs["mlflow_run_id"]]
        assert run.data.tags["optuna.trial_number"] == str(t.number)
        assert run.data.tags["optuna.study_name"] == STUDY

    # Nothing left running: every simulated host's port is free again.
    import socket

    for p in ports[:3]:
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", p)) != 0, f"a server still listens on {p}"


def test_a_password_in_the_storage_url_reaches_no_file_and_no_output(tmp_path: Path, study_db: str) -> None:
    """The storage URL is printed (resume, optuna-dashboard) and written (best.yaml,
    optimization_results.yaml): its password was written in clear to both files."""
    password = "pgS3cret-" + os.urandom(4).hex()
    url = study_db.replace("postgres@", f"postgres:{password}@", 1)  # trust auth: any password works
    assert password in url
    sweep_dir = tmp_path / "sweep"
    proc = subprocess.run([*_sweep_argv(), "hydra.sweeper.n_trials=1", f"hydra.sweeper.storage='{url}'",
                           "hydra.sweeper.plots.enabled=false", f"hydra.sweep.dir={sweep_dir}",
                           "workload=smoke", "server.sim.load_seconds=0.2", "mlflow.enabled=false"],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert password not in proc.stdout + proc.stderr
    assert "postgres:***@" in (sweep_dir / "optimization_results.yaml").read_text()
    assert "postgres:***@" in (sweep_dir / "best.yaml").read_text()
    leaked = [p for p in tmp_path.rglob("*") if p.is_file() and password.encode() in p.read_bytes()]
    assert leaked == []
    study = optuna.load_study(study_name=None, storage=url)  # the study is in that database
    assert [t.state for t in study.trials] == [TrialState.COMPLETE]
