"""Fixtures of the SLURM tests: a real single-host cluster (tests/_support/slurm_cluster.py).

The cluster is started once per session, or reused when it is already up
(``.ci/run`` starts it). Without SLURM installed the tests skip -- except under
CI (``CI=true``), where ``.ci/run`` installs it, so a missing cluster fails.
Controllers run as real ``python -m sweep`` processes with ``SLURM_CONF``
pointing at the cluster; their trials run as real SLURM jobs on n1..n3.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from _support import subprocess_env
from _support.slurm_cluster import Cluster, missing, start

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")

# Every trial a distinct config (a server start), quick on the simulator: one tiny cell.
SPACE = ["hydra/sweeper/sampler=grid", "~hydra/sweeper/space", "spec.budget=choice(4,6,8)",
         "spec.topk=choice(1,2)", "spec.window=choice(512,1024)"]
FAST = ["workload=smoke", "workload.coding=off", "workload.concurrency=[1]",
        "workload.max_tokens=16", "workload.min_requests=1", "server.sim.load_seconds=1",
        "hydra.sweeper.plots.enabled=false", "hydra.sweeper.heartbeat_interval=1"]


@pytest.fixture(scope="session")
def slurm() -> Cluster:
    gone = missing()
    if gone:
        if os.environ.get("CI"):
            pytest.fail(f"SLURM is not installed ({', '.join(gone)}): .ci/run installs it")
        pytest.skip(f"SLURM not installed ({', '.join(gone)}): apt-get install slurmctld slurmd "
                    "slurm-client munge")
    return start()


@pytest.fixture
def job_name() -> str:
    """A job name of this test's own (squeue and the process checks filter on it)."""
    return "t" + uuid.uuid4().hex[:8]


def env(cluster: Cluster) -> dict[str, str]:
    e = subprocess_env(MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT="true", **cluster.env)
    e.pop("MLFLOW_TRACKING_URI", None)
    return e


def argv(*overrides: str) -> list[str]:
    return [sys.executable, "-m", "sweep", "-m", "hydra/sweeper=optuna", "launcher=slurm", *overrides]


def start_controller(cluster: Cluster, cwd: Path, *overrides: str) -> subprocess.Popen[str]:
    log = open(cwd / "controller.log", "w")
    return subprocess.Popen(argv(*overrides), cwd=cwd, env=env(cluster), stdout=log,
                            stderr=subprocess.STDOUT, text=True)


def run_controller(cluster: Cluster, cwd: Path, *overrides: str,
                   timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv(*overrides), cwd=cwd, env=env(cluster), capture_output=True,
                          text=True, timeout=timeout)


def jobs(cluster: Cluster, name: str) -> dict[str, tuple[str, str, str]]:
    """job id -> (job name, state, node) of this test's jobs (finished ones included)."""
    out = subprocess.run(["squeue", "-h", "--states=all", "-o", "%i|%j|%T|%N"], capture_output=True,
                         text=True, env={**os.environ, **cluster.env}, timeout=30).stdout
    found = {}
    for line in out.splitlines():
        jid, jname, state, node = line.strip().split("|")
        if jname.startswith(name + "-"):
            found[jid] = (jname, state, node)
    return found


def job_spans(cluster: Cluster, ids: set[str]) -> list[tuple[float, float]]:
    """(start, end) epoch seconds of these jobs, as SLURM recorded them (whole seconds)."""
    from datetime import datetime

    out = subprocess.run(["squeue", "-h", "--states=all", "-o", "%i|%S|%e"], capture_output=True,
                         text=True, env={**os.environ, **cluster.env}, timeout=30).stdout
    spans = []
    for line in out.splitlines():
        jid, start, end = line.strip().split("|")
        if jid in ids:
            spans.append((datetime.fromisoformat(start).timestamp(), datetime.fromisoformat(end).timestamp()))
    return spans


def job_processes(job_ids: set[str]) -> list[tuple[int, str]]:
    """Live processes started by any of these jobs (SLURM_JOB_ID in their environment)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                envb = f.read().split(b"\0")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2:][:1] in (b"Z", b"X"):
            continue
        for item in envb:
            if item.startswith(b"SLURM_JOB_ID=") and item[13:].decode() in job_ids:
                found.append((int(pid), cmd[:160]))
    return found


def wait_for(what: str, check, timeout: float, proc: subprocess.Popen[str] | None = None,  # type: ignore[no-untyped-def]
             log: Path | None = None, every: float = 0.3):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the controller exited ({proc.returncode}) before {what}:\n"
                                 + (log.read_text()[-5000:] if log else ""))
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}" + (":\n" + log.read_text()[-5000:] if log else ""))


@pytest.fixture
def cleanup_jobs(slurm: Cluster, job_name: str) -> Iterator[None]:
    """Whatever a test leaves behind, its jobs are cancelled."""
    yield
    ids = [j for j, (_, state, _) in jobs(slurm, job_name).items()
           if state in ("PENDING", "RUNNING", "COMPLETING")]
    if ids:
        subprocess.run(["scancel", *ids], env={**os.environ, **slurm.env}, capture_output=True)


@pytest.fixture(scope="session")
def pg() -> Iterator[object]:
    from _support.services import postgres_cluster

    with postgres_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def mlflow_url(pg: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from _support.services import mlflow_server

    backend = pg.create_database("mlflow_slurm")  # type: ignore[attr-defined]
    with mlflow_server(backend, tmp_path_factory.mktemp("mlflow")) as url:
        yield url
