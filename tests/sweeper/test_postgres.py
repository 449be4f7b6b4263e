"""The study in a real PostgreSQL (a throwaway cluster), resumed across runs."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

from .conftest import load

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A PostgreSQL cluster on a unix socket, owned by the postgres user (initdb refuses root)."""
    initdb = shutil.which("initdb") or str(PG_BIN / "initdb")
    pg_ctl = shutil.which("pg_ctl") or str(PG_BIN / "pg_ctl")
    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no postgres user")
    if not Path(initdb).exists() or not shutil.which("runuser"):
        pytest.skip("PostgreSQL server binaries or runuser not installed")
    base = Path(tempfile.mkdtemp(prefix="sweeper-pg-"))
    os.chown(base, pw.pw_uid, pw.pw_gid)
    data, port = base / "data", _free_port()

    def as_pg(*cmd: str) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *cmd], check=True,
                       capture_output=True, timeout=60)

    try:
        as_pg(initdb, "-D", str(data), "-A", "trust", "-U", "postgres")
        as_pg(pg_ctl, "-D", str(data), "-l", str(base / "log"), "-w", "-o",
              f"-k {base} -p {port} -c listen_addresses=''", "start")
        as_pg("psql", "-h", str(base), "-p", str(port), "-U", "postgres", "-c", "CREATE DATABASE optuna")
        yield f"postgresql+psycopg://postgres@/optuna?host={base}&port={port}"
    finally:
        subprocess.run(["runuser", "-u", "postgres", "--", pg_ctl, "-D", str(data), "-m", "immediate",
                        "stop"], capture_output=True, timeout=60)
        time.sleep(0.1)
        shutil.rmtree(base, ignore_errors=True)


def test_postgresql_storage_resumes(run_app, postgres_url: str) -> None:
    run_app("hydra.sweeper.n_trials=2", storage=postgres_url)
    run_app("hydra.sweeper.n_trials=3", storage=postgres_url)
    study = load(postgres_url)
    assert len(study.trials) == 3 and all(t.state.is_finished() for t in study.trials)
    assert study.trials[0].params == {"spec.budget": 8, "spec.topk": 4, "spec.window": 2048}
