"""Run ``python -m sweep`` into a fault and read what it left (not a test module).

Shared by the ``tests/faults/test_*`` modules of issue 11, sections 4-7, and by
``benchmarks/fault_matrix.py``, so the tests and the matrix drive the very
same runs: a real ``python -m sweep`` subprocess, on the real simulator or on
``stand_in.py`` (a stand-in server started through the normal launcher with
``server.executable=[python, tests/faults/stand_in.py]`` and
``+server.extra_env.STAND_IN_MODE=<mode>``). Every run carries a secret
canary (``HF_TOKEN`` in the controller's environment, handed to the server as
``+server.extra_env.HF_TOKEN=${oc.env:HF_TOKEN}``) so each one also answers
"did a secret reach a file or the terminal", and its server's processes are
found from outside the project's bookkeeping (``orphan_scenarios.Server``: the
``--port N`` on their command line, a per-run token in their environment).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from _support import free_port, subprocess_env

from faults.orphan_scenarios import TOKEN_ENV, Server

STAND_IN = str(Path(__file__).with_name("stand_in.py"))
CANARY_ENV = "HF_TOKEN"
FAST = ["workload=smoke", "server.sim.load_seconds=0.2", "launcher.stop_grace_s=5"]


@dataclass
class Run:
    """One finished ``python -m sweep`` and where to look."""

    proc: subprocess.CompletedProcess[str]
    cwd: Path
    out_dir: Path  # hydra.run.dir, or hydra.sweep.dir of a multirun
    server: Server
    canary: str
    seconds: float
    results: list[dict[str, Any]] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # job dirs without a readable result.json

    @property
    def output(self) -> str:
        return self.proc.stdout + self.proc.stderr

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.proc.stderr.splitlines() if line.startswith("error:")]

    def orphans(self, wait_s: float = 10.0) -> dict[int, str]:
        """The server's processes still alive ``wait_s`` after the run ended (at most)."""
        deadline = time.monotonic() + wait_s
        while (left := self.server.processes()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return left

    def secrets_found(self) -> list[str]:
        """Files under the run's directory, and its stdout/stderr, that hold the canary."""
        found = [str(p.relative_to(self.cwd)) for p in sorted(self.cwd.rglob("*"))
                 if p.is_file() and self.canary.encode() in p.read_bytes()]
        return found + [name for name, text in (("stdout", self.proc.stdout), ("stderr", self.proc.stderr))
                        if self.canary in text]

    def cleanup(self) -> None:
        self.server.kill_all()


def _read_results(out_dir: Path, multirun: bool) -> tuple[list[dict[str, Any]], list[str]]:
    jobs = sorted((d for d in out_dir.iterdir() if d.is_dir() and d.name.isdigit()), key=lambda d: int(d.name)) \
        if multirun and out_dir.is_dir() else [out_dir]
    docs, lost = [], []
    for job in jobs:
        try:
            docs.append(json.loads((job / "result.json").read_text()))
        except (OSError, ValueError):
            lost.append(str(job))
    return docs, lost


def sweep(cwd: Path, *overrides: str, multirun: bool = False, stand_in: str | None = None,
          port: int | None = None, env: dict[str, str] | None = None,
          preexec_fn: Callable[[], None] | None = None, during: Callable[[Path], object] | None = None,
          timeout: float = 300) -> Run:
    """``python -m sweep`` in ``cwd`` on a free port (``stand_in``: that mode of stand_in.py).

    ``during(out_dir)`` runs in a thread while the controller runs (to freeze a
    server, fill a disk ...). The run's output dir is ``cwd/run`` (``cwd/sweep`` for
    a multirun).
    """
    cwd.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    server = Server([port])
    canary = f"hf_canary_{uuid.uuid4().hex}"
    out_dir = cwd / ("sweep" if multirun else "run")
    args = [*(["-m"] if multirun else []), *FAST, "mlflow.enabled=false", f"server.port={port}",
            f"launcher.state_dir={cwd / 'state'}", f"+server.extra_env.{TOKEN_ENV}={server.token}",
            f"+server.extra_env.{CANARY_ENV}=${{oc.env:{CANARY_ENV}}}",
            f"hydra.sweep.dir={out_dir}" if multirun else f"hydra.run.dir={out_dir}"]
    if stand_in is not None:
        args += [f"server.executable=[{sys.executable},{STAND_IN}]",
                 f"+server.extra_env.STAND_IN_MODE={stand_in}"]
    full_env = subprocess_env(**{CANARY_ENV: canary, "COLUMNS": "200", **(env or {})})
    full_env.pop("MLFLOW_TRACKING_URI", None)
    thread = threading.Thread(target=during, args=(out_dir,), daemon=True) if during else None
    if thread is not None:
        thread.start()
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "sweep", *args, *overrides], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout, preexec_fn=preexec_fn)
    seconds = time.monotonic() - t0
    if thread is not None:
        thread.join(timeout=30)
    run = Run(proc, cwd, out_dir, server, canary, seconds)
    run.results, run.lost = _read_results(out_dir, multirun)
    return run


def wait_for_server(out_dir: Path, timeout: float = 120) -> int | None:
    """The pid of the server once a run's server log says it is ready (None: it never was)."""
    import re

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            m = re.search(r"ready after [\d.]+ s \(pid (\d+)\)", (out_dir / "server.log").read_text(errors="replace"))
        except OSError:
            m = None
        if m:
            return int(m.group(1))
        time.sleep(0.05)
    return None


def freeze_when_ready(out_dir: Path) -> int | None:
    """SIGSTOP a run's whole server once it is ready (a hung box); its pid, None if it never was."""
    import signal

    pid = wait_for_server(out_dir)
    if pid is not None:
        os.killpg(pid, signal.SIGSTOP)
    return pid


def file_limit_1024() -> None:
    """A ``preexec_fn``: the controller may open 1024 files, so the in-flight cap bites on any box."""
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


class HangingServer:
    """A real TCP listener that accepts every connection and never answers (an MLflow that hangs).

    ``connections`` counts what it accepted: tracking that is off asks no more.
    """

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.connections = 0
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            self._held.append(conn)  # read nothing, answer nothing, close nothing

    def __enter__(self) -> HangingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for conn in self._held:
            conn.close()
        self.sock.close()


def free_disk_mount(target: Path, size: str = "2m") -> bool:
    """Mount a tmpfs of ``size`` on ``target`` (root only); False when this box cannot."""
    target.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(target)],
                         capture_output=True, text=True)
    return res.returncode == 0


def unmount(target: Path) -> None:
    subprocess.run(["umount", "-l", str(target)], capture_output=True)


def fill(directory: Path) -> str:
    """Write zeros into ``directory`` until its filesystem is full; the error that stopped it."""
    with open(directory / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as exc:
            return str(exc)


def server_recorded(out_dir: Path, timeout: float = 120) -> bool:
    """True once a run's result.json records its server (it is up and the benchmark begins)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if json.loads((out_dir / "result.json").read_text()).get("server"):
                return True
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    return False


def controller_pid(out_dir: Path) -> int | None:
    """The pid of the ``python -m sweep`` writing into ``out_dir``."""
    needle = f"hydra.run.dir={out_dir}".encode()
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and needle in Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0"):
                return int(name)
        except OSError:
            continue
    return None


# The ways a result file can be broken (section 7): each one must be named and counted as failed.
BROKEN = {
    "truncated": lambda good: good[: len(good) // 2],
    "empty": lambda good: b"",
    "not an object": lambda good: b"[1, 2, 3]\n",
    "no status": lambda good: json.dumps({k: v for k, v in json.loads(good).items() if k != "status"}).encode(),
    "unknown status": lambda good: json.dumps({**json.loads(good), "status": "weird"}).encode(),
    "binary": lambda good: b"\x00\xff\xfe garbage \x80",
}


def broken_sweep(sweep_dir: Path) -> list[Path]:
    """Two good trials (jobs 0, 1; ``record.result_docs``: built the way the trial builds them),
    then one broken file per kind of ``BROKEN`` and a directory named result.json; the broken paths."""
    from record.result_docs import make_result

    job, _ = make_result(sweep_dir, 0, 8)
    make_result(sweep_dir, 1, 4)
    good = (job / "result.json").read_bytes()
    bad = []
    for i, (_, corrupt) in enumerate(BROKEN.items(), start=2):
        path = sweep_dir / str(i) / "result.json"
        path.parent.mkdir(parents=True)
        path.write_bytes(corrupt(good))
        bad.append(path)
    folder = sweep_dir / str(2 + len(BROKEN)) / "result.json"
    folder.mkdir(parents=True)  # a directory where the file should be
    return bad + [folder]
