"""Where runs go: the tracking URI, pinned to the launch dir, and a reachability probe.

The URI follows MLflow's own default, with local paths made absolute
against the directory the user launched from (Hydra may have changed cwd),
so ``mlflow ui`` run there shows every trial. Network stores get one quick
TCP connect first: MLflow's own retries would otherwise hold a trial for
minutes against a closed port.

``safe_uri`` is the URI as it is recorded: without user:password.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

NETWORK_PORTS = {"http": 80, "https": 443, "postgresql": 5432, "mysql": 3306, "mssql": 1433}


def launch_dir() -> Path:
    """The directory the user launched from, even after Hydra changed cwd."""
    if "hydra" in sys.modules:
        try:
            from hydra.utils import get_original_cwd

            return Path(get_original_cwd())
        except (ImportError, ValueError):  # ValueError: Hydra is not running
            pass
    return Path(os.getcwd())


def _has_file_store(mlruns: Path) -> bool:
    """MLflow keeps ``./mlruns`` as its default when that holds a file store."""
    try:
        return any(p.is_dir() and p.name.isdigit() and (p / "meta.yaml").exists()
                   for p in mlruns.iterdir())
    except OSError:
        return False


def resolve_tracking_uri(configured: str | None = None, base: Path | None = None) -> str:
    """configured > $MLFLOW_TRACKING_URI > MLflow's default; local paths made
    absolute against ``base`` (the launch dir) so every job writes one store."""
    base = Path(base) if base else launch_dir()
    uri = str(configured or os.environ.get("MLFLOW_TRACKING_URI") or "")
    if not uri:
        # Only here: importing mlflow takes seconds, and a down server must fail fast.
        from mlflow.store.tracking import DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH, DEFAULT_TRACKING_URI

        legacy = base / DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH
        uri = legacy.resolve().as_uri() if _has_file_store(legacy) else DEFAULT_TRACKING_URI
    scheme = urlsplit(uri).scheme
    if scheme == "sqlite" and uri.startswith("sqlite:///"):
        path, sep, query = uri[len("sqlite:///"):].partition("?")
        if path and path != ":memory:" and not os.path.isabs(path):
            return f"sqlite:///{(base / path).resolve()}{sep}{query}"
        return uri
    if scheme == "" or (len(scheme) == 1 and os.name == "nt"):
        return (base / uri).resolve().as_uri()
    return uri


class Problem(str):
    """Why a tracking store cannot be used. ``timed_out``: it never answered (or never let us
    connect) within the timeout -- every later call would wait as long (sweep.record._tracking_off)."""

    timed_out: bool = False

    @classmethod
    def of(cls, text: str, *, timed_out: bool = False) -> Problem:
        out = cls(text)
        out.timed_out = timed_out
        return out


def probe(uri: str, timeout: float = 3.0) -> Problem | None:
    """None if ``uri`` is local, or its host accepts a TCP connection and (HTTP) answers a
    request within ``timeout``; else why not. A server that accepts and hangs is caught here,
    in ``timeout`` seconds, instead of in MLflow's retry loop (minutes per trial)."""
    parts = urlsplit(uri)
    scheme = parts.scheme.split("+")[0]
    if scheme not in NETWORK_PORTS or not parts.hostname:
        return None
    port = parts.port or NETWORK_PORTS[scheme]
    if scheme in ("http", "https"):
        import urllib.request

        if urllib.request.getproxies().get(scheme) and not urllib.request.proxy_bypass(parts.hostname):
            return None  # reached through a proxy: let MLflow's client try
    try:
        sock = socket.create_connection((parts.hostname, port), timeout=timeout)
    except TimeoutError:
        return Problem.of(f"cannot connect to {parts.hostname}:{port} within {timeout:g} s", timed_out=True)
    except OSError as exc:
        return Problem.of(f"cannot connect to {parts.hostname}:{port} ({exc.strerror or exc})")
    if scheme != "http":
        sock.close()
        return None
    return _answers(sock, parts.hostname, port, parts.path.rstrip("/") + "/health", timeout)


def _answers(sock: socket.socket, host: str, port: int, path: str, timeout: float) -> Problem | None:
    """Any HTTP status line within ``timeout`` is an answer (MLflow decides what it means)."""
    try:
        with sock:
            sock.settimeout(timeout)
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
            first = sock.recv(16)
    except TimeoutError:
        return Problem.of(f"{host}:{port} accepted the connection but did not answer within {timeout:g} s",
                          timed_out=True)
    except OSError:
        return None  # reset, refused...: MLflow's own client reports it
    return None if first else Problem.of(f"{host}:{port} closed the connection without an answer")


def safe_uri(uri: str) -> str:
    """The URI without user:password (what is stored in files and tags)."""
    parts = urlsplit(uri)
    if not (parts.username or parts.password) or not parts.hostname:
        return uri
    netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
