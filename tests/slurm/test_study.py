"""The done-when check: a 6-trial study, three SLURM jobs at a time, on PostgreSQL and MLflow.

The controller asks, submits each trial as one job (SLURM places it on n1..n3),
and tells each result as its job ends -- a new job submitted at once. The study
must end with exactly 6 trials, one job each on the cluster's nodes, never more
than 3 out at once (and several at once: it is not sequential), one MLflow child
run per trial under one parent, Optuna's own heartbeat recorded for the running
trials (PostgreSQL), and no process of any job left.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import optuna
from optuna.trial import TrialState

from _support.slurm_cluster import NODES, Cluster

from .conftest import FAST, SPACE, job_processes, job_spans, jobs, start_controller

N_TRIALS = 6
STUDY = "slurm-e2e"


def _heartbeats(storage: str) -> set[int]:
    """Trial ids with a row in Optuna's own heartbeat table."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(storage)
    try:
        with engine.connect() as conn:
            return {int(r[0]) for r in conn.execute(sqlalchemy.text(
                "SELECT trial_id FROM trial_heartbeats"))}
    except sqlalchemy.exc.ProgrammingError:  # the table is created with the study
        return set()
    finally:
        engine.dispose()


def test_six_trials_three_jobs_at_a_time(slurm: Cluster, tmp_path: Path, pg: object,
                                         mlflow_url: str, job_name: str, cleanup_jobs: None) -> None:
    storage = pg.create_database("slurm_study")  # type: ignore[attr-defined]
    sweep_dir = tmp_path / "sweep"
    proc = start_controller(
        slurm, tmp_path, *SPACE, *FAST, "hydra.sweeper.n_jobs=3", f"hydra.sweeper.n_trials={N_TRIALS}",
        f"hydra.sweeper.study_name={STUDY}", f"hydra.sweeper.storage='{storage}'",
        f"launcher.job_name={job_name}", f"hydra.sweep.dir={sweep_dir}",
        f"mlflow.tracking_uri={mlflow_url}", "mlflow.experiment=slurm-e2e")
    log = tmp_path / "controller.log"
    try:
        rc = proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = log.read_text()
    assert rc == 0, out[-6000:]

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    trials = optuna.load_study(study_name=STUDY, storage=storage).get_trials(deepcopy=False)
    assert len(trials) == N_TRIALS, [(t.number, t.state, t.user_attrs) for t in trials]
    assert all(t.state == TrialState.COMPLETE for t in trials), [(t.number, t.user_attrs) for t in trials]
    assert len({tuple(sorted(t.params.items())) for t in trials}) == N_TRIALS

    # One SLURM job per trial, placed by SLURM on the cluster's nodes.
    ours = jobs(slurm, job_name)
    ids = {t.user_attrs["slurm_job_id"] for t in trials}
    assert len(ids) == N_TRIALS and ids <= set(ours)
    assert all(ours[i][1] == "COMPLETED" for i in ids), ours
    nodes = {t.user_attrs["slurm_node"] for t in trials}
    assert nodes <= set(NODES) and len(nodes) >= 2, nodes
    assert {ours[t.user_attrs["slurm_job_id"]][2] for t in trials} == nodes

    # At most three jobs out at once, and more than one: the study is asynchronous. Timed by
    # SLURM itself (job start and end; a trial's own span inside its job is a few seconds
    # after a Python start-up that, on a loaded box, takes longer than the trial).
    for t in trials:
        doc = json.loads((sweep_dir / str(t.number) / "result.json").read_text())
        assert doc["status"] == "ok" and doc["trial"]["job_num"] == t.number
    spans = job_spans(slurm, ids)
    assert len(spans) == N_TRIALS, (spans, ids)
    most = max(sum(1 for a, b in spans if a <= s < b) for s, _ in spans)
    assert 2 <= most <= 3, spans

    # Optuna's own heartbeat was recorded for every trial while its job ran (the table
    # keeps the last beat of each trial).
    assert _heartbeats(storage) == {t._trial_id for t in trials}

    # MLflow: one parent, one finished child per trial, each the trial's own run.
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_url)
    exp = client.get_experiment_by_name("slurm-e2e")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("specsweep.kind") == "sweep"]
    children = [r for r in runs if r.data.tags.get("specsweep.kind") == "trial"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(children) == N_TRIALS
    assert all(r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id for r in children)
    by_run = {r.info.run_id: r for r in children}
    for t in trials:
        assert by_run[t.user_attrs["mlflow_run_id"]].data.tags["optuna.trial_number"] == str(t.number)

    # No process of any job is left (servers, reapers, the app).
    time.sleep(1)
    assert job_processes(ids) == []
