"""Start a real sim process from config overrides (tests and benchmarks).

The same path as a trial: compose the Hydra config, validate it, render
argv + env from YAML, start that command as a subprocess (own process
group, stderr to a log file) on a free ephemeral port. Not the launcher
(launchers/ owns reuse and failure classification); a small, dependable
helper for code that needs "a sim on this config, now".
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import httpx


def free_port() -> int:
    """An ephemeral port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class SimProcess:
    """A running (or exited) sim started by :func:`start_sim`."""

    base_url: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def wait_ready(self, timeout: float = 30.0, path: str = "/health") -> None:
        """Poll ``path`` until 200; raise with the log tail if the process dies or time runs out."""
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"sim exited with {self.proc.returncode}:\n{self.log_text()[-3000:]}")
                try:
                    if client.get(self.base_url + path).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)
        raise TimeoutError(f"sim not ready after {timeout}s:\n{self.log_text()[-3000:]}")

    def wait_exit(self, timeout: float = 30.0) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        """Kill this sim's process group (idempotent)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass


def render_overrides(overrides: Sequence[str]) -> tuple[list[str], dict[str, str], str]:
    """(argv, extra env, base_url) of the server a config with these overrides starts."""
    from sweep.compose.config import from_omegaconf
    from sweep.compose.cmdline import compose
    from sweep.compose.render import render

    cfg = from_omegaconf(compose(list(overrides)))
    launch = render(cfg)
    return launch.argv, dict(launch.env), cfg.server.base_url


def start_sim(*overrides: str, log_dir: Path, wait: bool = True, load_seconds: float = 0.2,
              timeout: float = 30.0) -> SimProcess:
    """Start ``server=sim`` with ``overrides`` on a free port; wait for /health unless ``wait=False``.

    The sim gets SIGTERM when the thread that started it ends (Linux's parent-death
    signal follows the thread): start it from a thread that outlives it, as the
    benchmarks and tests do (their main thread)."""
    port = free_port()
    argv, env, base_url = render_overrides(
        ["server=sim", f"server.port={port}", f"server.sim.load_seconds={load_seconds}", *overrides])
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"sim-{port}.log"
    full_env = {**os.environ, **env}
    from launchers.local import spawn

    with open(log_path, "wb") as log:  # dies with this process (PR_SET_PDEATHSIG), as a trial's does
        proc = spawn(argv, env=full_env, stdout=log, pdeathsig=True)
    sim = SimProcess(base_url=base_url, proc=proc, log_path=log_path, argv=argv, env=env)
    if wait:
        try:
            sim.wait_ready(timeout)
        except Exception:
            sim.stop()
            raise
    return sim
