"""``hydra/launcher=submitit_slurm`` (hydra-submitit-launcher 1.2.0) runs a plain grid on the cluster.

Hydra's basic sweeper hands the whole grid to submitit, which submits it as one
job array and waits for all of it (batch-synchronous, hydra #3091); each job
unpickles the app's task on a node and runs one trial. The grid varies
``server.port``: the test cluster's three nodes share one host (docs/cluster.md).
Also here: bad launcher=slurm input is one line and exit 2 before any job exists.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from _support import free_port
from _support.slurm_cluster import NODES, PARTITION, Cluster

from .conftest import FAST, SPACE, env, jobs, run_controller


def _array_tasks(cluster: Cluster, name: str) -> list[tuple[str, str, str]]:
    """(job id, state, node) of the job array tasks named ``name``."""
    import os

    out = subprocess.run(["squeue", "-h", "--states=all", "-r", "-n", name, "-o", "%i|%T|%N"],
                         capture_output=True, text=True, env={**os.environ, **cluster.env},
                         timeout=30).stdout
    return [tuple(line.split("|")) for line in out.split()]  # type: ignore[misc]


def test_a_plain_grid_through_submitit(slurm: Cluster, tmp_path: Path, job_name: str) -> None:
    sweep_dir = tmp_path / "grid"
    ports = [free_port(), free_port()]
    cmd = [sys.executable, "-m", "sweep", "-m", f"server.port={ports[0]},{ports[1]}",
           "hydra/launcher=submitit_slurm", f"hydra.launcher.partition={PARTITION}",
           "hydra.launcher.timeout_min=10", f"hydra.launcher.name={job_name}",
           *[o for o in FAST if not o.startswith("hydra.sweeper")], "mlflow.enabled=false",
           f"hydra.sweep.dir={sweep_dir}"]
    r = subprocess.run(cmd, cwd=tmp_path, env=env(slurm), capture_output=True, text=True,
                       timeout=400)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    docs = [json.loads((sweep_dir / str(i) / "result.json").read_text()) for i in (0, 1)]
    assert [d["status"] for d in docs] == ["ok", "ok"]
    assert sorted(d["config"]["server"]["port"] for d in docs) == sorted(ports)
    # Each ran as a task of one SLURM job array, placed on the cluster's nodes.
    tasks = _array_tasks(slurm, job_name)
    assert len(tasks) == 2 and len({jid.split("_")[0] for jid, _, _ in tasks}) == 1, tasks
    assert all(state == "COMPLETED" and node in NODES for _, state, node in tasks), tasks


def test_bad_slurm_input_submits_nothing(slurm: Cluster, tmp_path: Path, job_name: str) -> None:
    r = run_controller(slurm, tmp_path, *SPACE, *FAST, "launcher.sbatch.partiton=gpu",
                       f"launcher.job_name={job_name}", timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1].startswith("error: launcher.sbatch.partiton: ")
    r = run_controller(slurm, tmp_path, *SPACE, *FAST, "launcher.sbatch.partition=nosuch",
                       f"launcher.job_name={job_name}", timeout=120)
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert "error: launcher.sbatch: SLURM refuses these job options" in r.stderr
    assert "partition" in r.stderr.lower()
    assert jobs(slurm, job_name) == {}
