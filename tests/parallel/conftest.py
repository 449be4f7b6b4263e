"""Fixtures of the host-pool tests: one PostgreSQL cluster and one MLflow server per session.

The MLflow server keeps its runs in the same cluster (database ``mlflow``), as
docs/parallel.md recommends; each test gets a database of its own for its
study. Sweeps run as real ``python -m sweep`` processes from a temp dir.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from _support import free_port, subprocess_env
from _support.services import PostgresCluster, mlflow_server, postgres_cluster
_db_numbers = itertools.count()

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")


def env() -> dict[str, str]:
    """PYTHONPATH=repo root: Hydra finds hydra_plugins/ through sys.path."""
    e = subprocess_env(MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT="true")
    e.pop("MLFLOW_TRACKING_URI", None)
    return e


def sweep_argv(*overrides: str) -> list[str]:
    return [sys.executable, "-m", "sweep", "-m", "hydra/sweeper=optuna", *overrides]


def hosts_override(ports: list[int]) -> str:
    return "launcher.hosts=[" + ",".join(f"{{server_port: {p}}}" for p in ports) + "]"


def run_sweep(cwd: Path, *overrides: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(sweep_argv(*overrides), cwd=cwd, env=env(), capture_output=True,
                          text=True, timeout=timeout)


def start_sweep(cwd: Path, *overrides: str) -> subprocess.Popen[str]:
    log = open(cwd / "controller.log", "w")
    return subprocess.Popen(sweep_argv(*overrides), cwd=cwd, env=env(), stdout=log,
                            stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="session")
def pg() -> Iterator[PostgresCluster]:
    with postgres_cluster() as cluster:
        yield cluster


@pytest.fixture
def study_db(pg: PostgresCluster) -> str:
    """A fresh database for one test's study (SQLAlchemy URL, psycopg 3 driver)."""
    return pg.create_database(f"study_{next(_db_numbers)}")


@pytest.fixture(scope="session")
def mlflow_url(pg: PostgresCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    backend = pg.create_database("mlflow")
    with mlflow_server(backend, tmp_path_factory.mktemp("mlflow")) as url:
        yield url


@pytest.fixture
def ports() -> list[int]:
    """Distinct free loopback ports for simulated hosts (never the default 30123)."""
    out: list[int] = []
    while len(out) < 4:
        p = free_port()
        if p not in out and p != 30123:
            out.append(p)
    return out
