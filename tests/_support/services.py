"""Real services for the tests: a throwaway PostgreSQL cluster and an ``mlflow server``.

The cluster uses Debian's initdb/pg_ctl, run as the ``postgres`` user when we
are root (initdb refuses root), and listens on a free loopback TCP port, like
a real deployment an MLflow server or an Optuna study connects to. Both
helpers are context managers so a session fixture can share one cluster and
one server between tests.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from _support import free_port


def _pg_bin(tool: str) -> str | None:
    found = shutil.which(tool)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{tool}"),
                        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return candidates[-1] if candidates else None


class PostgresCluster:
    """A running cluster: ``url(db)`` gives a SQLAlchemy URL on loopback TCP."""

    def __init__(self, base: Path, port: int, run_as: list[str]) -> None:
        self.base, self.port, self._run_as = base, port, run_as

    def url(self, db: str, driver: str = "postgresql+psycopg") -> str:
        return f"{driver}://postgres@127.0.0.1:{self.port}/{db}"

    def create_database(self, name: str) -> str:
        psql = _pg_bin("psql") or "psql"
        subprocess.run([*self._run_as, psql, "-h", "127.0.0.1", "-p", str(self.port), "-U",
                        "postgres", "-c", f"CREATE DATABASE {name}"], check=True,
                       capture_output=True, timeout=60)
        return self.url(name)


@contextlib.contextmanager
def postgres_cluster() -> Iterator[PostgresCluster]:
    """initdb + pg_ctl start in a temp dir (trust auth, loopback only); removed at exit."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL server binaries not installed (apt-get install postgresql)")
    run_as: list[str] = []
    owner: pwd.struct_passwd | None = None
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no postgres user for initdb")
        if not shutil.which("runuser"):
            pytest.skip("running as root without runuser")
        run_as = ["runuser", "-u", "postgres", "--"]
    base = Path(tempfile.mkdtemp(prefix="parallel-pg-"))
    if owner is not None:
        os.chown(base, owner.pw_uid, owner.pw_gid)
    data, port = base / "data", free_port()

    def run(*cmd: str) -> None:
        subprocess.run([*run_as, *cmd], check=True, capture_output=True, timeout=120)

    try:
        run(initdb, "-D", str(data), "-A", "trust", "-U", "postgres")
        run(pg_ctl, "-D", str(data), "-l", str(base / "log"), "-w", "-o",
            f"-k {base} -p {port} -c listen_addresses=127.0.0.1 -c max_connections=200 "
            "-c fsync=off", "start")
        yield PostgresCluster(base, port, run_as)
    finally:
        subprocess.run([*run_as, pg_ctl, "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=60)
        time.sleep(0.1)
        shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def mlflow_server(backend_store_uri: str, root: Path) -> Iterator[str]:
    """``mlflow server`` on a free loopback port (proxied artifacts under ``root``)."""
    port = free_port()
    root.mkdir(parents=True, exist_ok=True)
    mlflow_bin = Path(sys.executable).with_name("mlflow")
    cmd = [str(mlflow_bin) if mlflow_bin.exists() else "mlflow", "server",
           "--backend-store-uri", backend_store_uri,
           "--artifacts-destination", str(root / "artifacts"),
           "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
    with open(root / "server.log", "wb") as log:
        proc = subprocess.Popen(cmd, cwd=root, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited ({proc.returncode}): "
                                   f"{(root / 'server.log').read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("mlflow server not healthy after 180 s: "
                                   f"{(root / 'server.log').read_text()[-3000:]}")
            time.sleep(0.3)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
