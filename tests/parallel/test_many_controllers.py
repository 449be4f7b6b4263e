"""Many controllers, one study: a plain controller and a 2-host pool on one PostgreSQL study.

They stand for two people's machines (separate sweep dirs, separate
simulators) feeding one study name. The study must end with exactly
n_trials counted trials, unique trial numbers, and no config run twice.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import optuna
from optuna.trial import TrialState

from .conftest import env, hosts_override, sweep_argv

N_TRIALS = 8
STUDY = "shared-study"


def test_two_controllers_feed_one_study_without_duplicates(
        tmp_path: Path, study_db: str, ports: list[int]) -> None:
    common = [f"hydra.sweeper.n_trials={N_TRIALS}", f"hydra.sweeper.study_name={STUDY}",
              f"hydra.sweeper.storage='{study_db}'", "hydra.sweeper.plots.enabled=false",
              "hydra.sweeper.heartbeat_interval=1", "workload=smoke",
              "server.sim.load_seconds=0.3", "mlflow.enabled=false"]
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir()
    b_dir.mkdir()
    procs = [
        subprocess.Popen(sweep_argv(*common, f"server.port={ports[0]}",
                                    f"hydra.sweep.dir={a_dir / 'sweep'}"),
                         cwd=a_dir, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True),
        subprocess.Popen(sweep_argv(*common, hosts_override(ports[1:3]),
                                    f"hydra.sweep.dir={b_dir / 'sweep'}"),
                         cwd=b_dir, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True),
    ]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=200)[0])
        finally:
            if p.poll() is None:
                p.kill()
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-5000:]

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    trials = optuna.load_study(study_name=STUDY, storage=study_db).get_trials(deepcopy=False)
    assert all(t.state.is_finished() for t in trials), [(t.number, t.state) for t in trials]
    assert len({t.number for t in trials}) == len(trials)
    # Counted as the loop counts: not an interrupted/stale trial, nor a proposal outside the
    # valid space (told FAIL "invalid" without a job: the sampler's miss, not a trial).
    rejected = [t for t in trials if t.user_attrs.get("failure_reason") == "invalid"]
    assert all(t.state == TrialState.FAIL and "job_dir" not in t.user_attrs
               and "result_path" not in t.user_attrs for t in rejected)
    counted = [t for t in trials if t.user_attrs.get("failure_reason") not in ("stale", "interrupted", "invalid")]
    assert len(counted) == N_TRIALS, [(t.number, t.state.name, t.user_attrs) for t in trials]

    ran = [t for t in counted if "duplicate_of" not in t.user_attrs]
    configs = [tuple(sorted(t.params.items())) for t in ran]
    assert len(configs) == len(set(configs)), "a config ran twice"
    # The production config is queued by both controllers but stands in the study once.
    production = (("spec.budget", 8), ("spec.topk", 4), ("spec.window", 2048))
    assert configs.count(production) == 1
    # Both machines worked on it: job dirs under both sweep dirs.
    dirs = {Path(t.user_attrs["job_dir"]).parent for t in ran if "job_dir" in t.user_attrs}
    assert dirs == {(a_dir / "sweep").absolute(), (b_dir / "sweep").absolute()}, dirs
    assert {t.user_attrs.get("host") for t in ran} >= {f"local:{p}" for p in ports[1:3]}
    assert sum(1 for t in trials if t.state == TrialState.RUNNING) == 0
