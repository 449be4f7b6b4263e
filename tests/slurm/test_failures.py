"""What happens to a search when SLURM (or the user) stops its jobs, each on the real cluster.

* a job cancelled (``scancel``) or lost with its node (``scontrol update state=down``)
  fails its trial ``preempted`` and its config runs again; lost a second time it is
  ``job_lost`` (counted, not run again); the study still ends with exactly n_trials;
* the time limit's early signal stops the trial with its finished cells
  (result.json ``interrupted``), told ``time_limit``;
* a SIGKILLed controller: its guard cancels the jobs, no process of theirs is left,
  Optuna's own ``fail_stale_trials`` (another client, PostgreSQL heartbeats) fails its
  trials, and the next controller records them ``stale`` and runs their configs again;
* Ctrl-C on the controller cancels its jobs, their trials are ``interrupted``, exit 130.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from _support.slurm_cluster import Cluster

from .conftest import (FAST, SPACE, job_processes, jobs, run_controller, start_controller,
                       wait_for)


def _sqlite_ready(db: Path) -> bool:
    """The controller has finished creating Optuna's tables (it stamps alembic_version last).

    Opening the file earlier with Optuna would make this poll create the tables too, racing the
    controller's own creation ("table trial_heartbeats already exists" ends the controller)."""
    if not db.exists():
        return False
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as con:
            return con.execute("SELECT count(*) FROM alembic_version").fetchone()[0] > 0
    except sqlite3.Error:
        return False


def _trials(storage: str, study: str) -> list[FrozenTrial]:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if storage.startswith("sqlite:///") and not _sqlite_ready(Path(storage[len("sqlite:///"):])):
        return []  # the controller has not created it yet
    try:
        return optuna.load_study(study_name=study, storage=storage).get_trials(deepcopy=False)
    except KeyError:
        return []


def _mid_trial(storage: str, study: str, sweep_dir: Path, cluster: Cluster, name: str,
               exclude: set[int] = frozenset(), **attrs: object) -> tuple[FrozenTrial, str, str] | None:  # type: ignore[assignment]
    """A RUNNING trial whose job runs on a node and whose server is starting."""
    ours = jobs(cluster, name)
    for t in _trials(storage, study):
        jid = t.user_attrs.get("slurm_job_id")
        if t.state != TrialState.RUNNING or t.number in exclude or jid not in ours:
            continue
        if any(t.user_attrs.get(k) != v for k, v in attrs.items()):
            continue
        if ours[jid][1] == "RUNNING" and (sweep_dir / str(t.number) / "server.log").exists():
            return t, jid, ours[jid][2]
    return None


def _slurm(cluster: Cluster, *cmd: str) -> None:
    subprocess.run(list(cmd), env={**os.environ, **cluster.env}, check=True, capture_output=True,
                   timeout=30)


def test_a_lost_job_runs_its_config_again_once_then_fails(
        slurm: Cluster, tmp_path: Path, job_name: str, cleanup_jobs: None) -> None:
    sweep_dir = tmp_path / "sweep"
    storage = f"sqlite:///{sweep_dir}/optuna.db"
    proc = start_controller(slurm, tmp_path, *SPACE, *FAST, "server.sim.load_seconds=12",
                            "hydra.sweeper.n_jobs=3", "hydra.sweeper.n_trials=4",
                            "hydra.sweeper.study_name=lost", "launcher.max_requeue=1",
                            "mlflow.enabled=false", f"launcher.job_name={job_name}",
                            f"hydra.sweep.dir={sweep_dir}")
    log = tmp_path / "controller.log"
    down: str | None = None
    try:
        first, jid, _ = wait_for("a trial mid-start", lambda: _mid_trial(
            storage, "lost", sweep_dir, slurm, job_name), 240, proc, log)
        _slurm(slurm, "scancel", jid)
        # The same config again (lost=1): cancelled once more, it is not run a third time.
        again, jid2, _ = wait_for("the requeued config mid-start", lambda: _mid_trial(
            storage, "lost", sweep_dir, slurm, job_name, requeued_from=first.number), 240, proc, log)
        _slurm(slurm, "scancel", jid2)
        # Another trial's node goes down.
        other, _, node = wait_for("another trial mid-start", lambda: _mid_trial(
            storage, "lost", sweep_dir, slurm, job_name,
            exclude={first.number, again.number}), 240, proc, log)
        down = node
        _slurm(slurm, "scontrol", "update", f"nodename={node}", "state=down", "reason=specsweep-test")
        rc = proc.wait(timeout=400)
    finally:
        if down:
            subprocess.run(["scontrol", "update", f"nodename={down}", "state=resume"],
                           env={**os.environ, **slurm.env}, capture_output=True)
        if proc.poll() is None:
            proc.kill()
    out = log.read_text()
    assert rc == 0, out[-6000:]
    trials = {t.number: t for t in _trials(storage, "lost")}
    assert trials[first.number].user_attrs["failure_reason"] == "preempted"
    assert trials[first.number].user_attrs["slurm_state"] == "CANCELLED"
    lost = trials[again.number]
    assert lost.state == TrialState.FAIL and lost.user_attrs["failure_reason"] == "job_lost"
    assert lost.params == trials[first.number].params and lost.user_attrs["lost"] == 1
    node_failed = trials[other.number]
    assert node_failed.user_attrs["failure_reason"] == "preempted"
    assert node_failed.user_attrs["slurm_state"] == "NODE_FAIL"
    rerun = [t for t in trials.values() if t.user_attrs.get("requeued_from") == other.number]
    assert len(rerun) == 1 and rerun[0].state == TrialState.COMPLETE
    assert rerun[0].params == node_failed.params
    # Not counted: the two preempted trials; counted: exactly n_trials.
    counted = [t for t in trials.values() if t.user_attrs.get("failure_reason") != "preempted"]
    assert len(counted) == 4, [(t.number, t.state, t.user_attrs) for t in trials.values()]
    assert not [t for t in trials.values() if t.params == lost.params and t.number > lost.number]
    ids = {t.user_attrs["slurm_job_id"] for t in trials.values()}
    time.sleep(1)
    assert job_processes(ids) == []


def test_the_time_limit_keeps_the_finished_cells(slurm: Cluster, tmp_path: Path, job_name: str,
                                                 cleanup_jobs: None) -> None:
    sweep_dir = tmp_path / "sweep"
    many_cells = "workload.concurrency=[" + ",".join(str(c) for c in range(1, 25)) + "]"
    r = run_controller(slurm, tmp_path, *SPACE, *FAST, many_cells, "workload.max_tokens=64",
                       "workload.min_requests=2", "server.sim.time_scale=10",
                       "hydra.sweeper.n_trials=1", "hydra.sweeper.study_name=limit",
                       "launcher.sbatch.time=2", "launcher.signal_s=40",
                       "mlflow.enabled=false", f"launcher.job_name={job_name}",
                       f"hydra.sweep.dir={sweep_dir}", timeout=400)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]  # interrupted is not failed
    trial = _trials(f"sqlite:///{sweep_dir}/optuna.db", "limit")[0]
    assert trial.state == TrialState.FAIL
    assert trial.user_attrs["failure_reason"] == "time_limit", trial.user_attrs
    assert trial.user_attrs["status"] == "interrupted"
    doc = json.loads((sweep_dir / "0" / "result.json").read_text())
    assert doc["status"] == "interrupted" and 1 <= len(doc["cells"]) < 24, len(doc["cells"])
    assert (sweep_dir / "0" / "slurm" / "signals").read_text().split() == ["time_limit"]
    assert job_processes({trial.user_attrs["slurm_job_id"]}) == []


def _two_mid_trials(storage: str, study: str, sweep_dir: Path, cluster: Cluster, name: str):  # type: ignore[no-untyped-def]
    first = _mid_trial(storage, study, sweep_dir, cluster, name)
    if first is None:
        return None
    second = _mid_trial(storage, study, sweep_dir, cluster, name, exclude={first[0].number})
    return (first, second) if second else None


def test_a_killed_controller_leaves_no_job_and_its_trials_are_taken_over(
        slurm: Cluster, tmp_path: Path, pg: object, job_name: str, cleanup_jobs: None) -> None:
    storage = pg.create_database("slurm_killed")  # type: ignore[attr-defined]
    sweep_dir = tmp_path / "sweep"
    common = [*SPACE, *FAST, "hydra.sweeper.n_jobs=2", "hydra.sweeper.n_trials=2",
              "hydra.sweeper.study_name=killed", f"hydra.sweeper.storage='{storage}'",
              "hydra.sweeper.stale_after=600", "mlflow.enabled=false",
              f"launcher.job_name={job_name}", f"hydra.sweep.dir={sweep_dir}"]
    proc = start_controller(slurm, tmp_path, *common, "server.sim.load_seconds=30")
    log = tmp_path / "controller.log"
    try:
        both = wait_for("two trials mid-start", lambda: _two_mid_trials(
            storage, "killed", sweep_dir, slurm, job_name), 240, proc, log)
        ids = {both[0][1], both[1][1]}
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        # The guard cancels both jobs; SLURM ends every process of theirs.
        wait_for("the jobs to be cancelled", lambda: all(
            jobs(slurm, job_name)[i][1] == "CANCELLED" for i in ids), 30, every=0.5)
        wait_for("no process of the jobs", lambda: job_processes(ids) == [], 30, every=0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert {t.state for t in _trials(storage, "killed")} == {TrialState.RUNNING}
    # Another Optuna client fails them by their (Optuna) heartbeat, after its grace period.
    from optuna.storages import RDBStorage, fail_stale_trials

    other = optuna.load_study(study_name="killed", storage=RDBStorage(
        storage, heartbeat_interval=1, grace_period=2))
    time.sleep(3)
    fail_stale_trials(other)
    assert {t.state for t in _trials(storage, "killed")} == {TrialState.FAIL}
    # The next controller records them stale and runs their configs again.
    r = run_controller(slurm, tmp_path, *common, timeout=400)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    from hydra_plugins.specsweep_optuna_sweeper._storage import failure_reason

    trials = _trials(storage, "killed")
    stale = [t for t in trials if t.state == TrialState.FAIL]
    assert {t.number for t in stale} == {both[0][0].number, both[1][0].number}
    assert {failure_reason(t) for t in stale} == {"stale"}  # read so: Optuna failed them
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(done) == 2 and {t.user_attrs.get("requeued_from") for t in done} == {t.number for t in stale}


def test_ctrl_c_cancels_the_jobs(slurm: Cluster, tmp_path: Path, job_name: str,
                                 cleanup_jobs: None) -> None:
    sweep_dir = tmp_path / "sweep"
    storage = f"sqlite:///{sweep_dir}/optuna.db"
    proc = start_controller(slurm, tmp_path, *SPACE, *FAST, "server.sim.load_seconds=30",
                            "hydra.sweeper.n_jobs=2", "hydra.sweeper.n_trials=4",
                            "hydra.sweeper.study_name=ctrlc", "mlflow.enabled=false",
                            f"launcher.job_name={job_name}", f"hydra.sweep.dir={sweep_dir}")
    log = tmp_path / "controller.log"
    try:
        both = wait_for("two trials mid-start", lambda: _two_mid_trials(
            storage, "ctrlc", sweep_dir, slurm, job_name), 240, proc, log)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=90)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    out = log.read_text()
    assert rc == 130, out[-5000:]
    assert "interrupted: resume with" in out and took < 60
    ids = {both[0][1], both[1][1]}
    assert all(jobs(slurm, job_name)[i][1] == "CANCELLED" for i in ids)
    trials = [t for t in _trials(storage, "ctrlc") if t.state != TrialState.WAITING]
    assert {t.user_attrs.get("failure_reason") for t in trials} == {"interrupted"}, \
        [(t.number, t.state, t.user_attrs) for t in trials]
    for t in trials:
        doc = json.loads((sweep_dir / str(t.number) / "result.json").read_text())
        assert doc["status"] in ("interrupted", "failed"), doc["status"]
    assert job_processes(ids) == []


def test_a_job_that_ends_failed_without_a_result_fails_the_search(slurm: Cluster, tmp_path: Path,
                                                                   job_name: str, cleanup_jobs: None) -> None:
    """Exit statuses mean the same with and without SLURM (issue 32): a job that ends FAILED before its
    trial wrote anything leaves a failed result.json (job_failed, the log's tail), and a search whose
    every trial failed exits 1 -- as it does when its trials fail in the controller's own process."""
    sweep_dir = tmp_path / "sweep"
    r = run_controller(slurm, tmp_path, *SPACE, *FAST, "hydra.sweeper.n_trials=1", "hydra.sweeper.study_name=dead",
                       "launcher.setup=['echo the setup failed >&2', 'exit 3']", "mlflow.enabled=false",
                       f"launcher.job_name={job_name}", f"hydra.sweep.dir={sweep_dir}", timeout=300)
    assert r.returncode == 1, r.stdout[-4000:] + r.stderr[-4000:]
    doc = json.loads((sweep_dir / "0" / "result.json").read_text())
    assert doc["status"] == "failed" and doc["failure"]["reason"] == "job_failed", doc
    assert "the setup failed" in doc["failure"]["log_tail"]
    trial = _trials(f"sqlite:///{sweep_dir}/optuna.db", "dead")[0]
    assert trial.state == TrialState.FAIL and trial.user_attrs["failure_reason"] == "job_failed"
