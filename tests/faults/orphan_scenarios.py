"""Kill a controller at a chosen stage and watch its server die (not a test module).

Shared by ``tests/faults/test_orphans.py`` (which asserts the bound) and
``benchmarks/orphan_reaping.py`` (which times it), so both drive the very
same scenarios: ``python -m sweep`` -- or a host pool of two simulated
hosts -- as a real subprocess on the real simulator, or on
``stubborn_server.py`` (the sim under a parent that ignores
SIGTERM/SIGINT/SIGHUP, plus two ``setsid``'d grandchildren, one with an empty
environment) started through the normal launcher with
``server.executable=[python, tests/faults/stubborn_server.py]``. A run is
followed to a stage through its server log and result.json (never a fixed
sleep), then the controller (or a pool worker) gets SIGKILL.

"A process of the server" is found from outside the project's bookkeeping:
its command line carries the server's ``--port N`` (the sim) or
``stubborn-orphan-N`` (the stubborn grandchildren), or its environment
carries a per-run token passed as ``+server.extra_env`` (whatever the server
started without clearing its environment).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _support import free_port, subprocess_env

STUBBORN = str(Path(__file__).with_name("stubborn_server.py"))
STAGE_TIMEOUT_S = 120.0  # generous: a loaded 2-core box
TOKEN_ENV = "SPECSWEEP_ORPHAN_TEST"


class ScenarioError(AssertionError):
    """The run did not get where the scenario needs it (with the controller's log)."""


def port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _read(path: str | Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _stat(pid: int) -> list[bytes] | None:
    raw = _read(f"/proc/{pid}/stat")
    return raw[raw.rfind(b")") + 2:].split() if raw else None


Identity = tuple[int, bytes]  # (pid, start time): one process, never a recycled pid


def still_running(identities: set[Identity]) -> set[int]:
    alive = set()
    for pid, ticks in identities:
        st = _stat(pid)
        if st is not None and len(st) > 19 and st[19] == ticks and st[0] not in (b"Z", b"X"):
            alive.add(pid)
    return alive


@dataclass
class Server:
    """How to recognise the processes of the server(s) of one run."""

    ports: list[int]
    token: str | None = field(default_factory=lambda: uuid.uuid4().hex)  # None: by port only

    def processes(self, at_least: int = 0) -> dict[int, str]:
        """Live (non-zombie) processes of the server: pid -> command line ({} if fewer than
        ``at_least``)."""
        needles = [f"\0--port\0{p}\0".encode() for p in self.ports]
        needles += [f"stubborn-orphan-{p}".encode() for p in self.ports]
        env_needle = f"{TOKEN_ENV}={self.token}".encode() if self.token else None
        found = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            cmd = _read(f"/proc/{pid}/cmdline")
            ours = any(n in b"\0" + cmd for n in needles) or (
                env_needle is not None and env_needle in _read(f"/proc/{pid}/environ").split(b"\0"))
            st = _stat(pid)
            if ours and st is not None and st[0] not in (b"Z", b"X"):
                found[pid] = cmd.replace(b"\0", b" ").decode(errors="replace")[:200]
        return found if len(found) >= at_least else {}

    def identities(self) -> set[Identity]:
        out = set()
        for pid in self.processes():
            st = _stat(pid)
            if st is not None and len(st) > 19:
                out.add((pid, st[19]))
        return out

    def kill_all(self) -> None:
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@dataclass
class Controller:
    """A ``python -m sweep`` process (its own session: signals reach it alone)."""

    proc: subprocess.Popen[bytes]
    log: Path
    server: Server

    @classmethod
    def start(cls, workdir: Path, server: Server, *args: str) -> Controller:
        workdir.mkdir(parents=True, exist_ok=True)
        log = workdir / "controller.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "sweep", *args], cwd=workdir,
                                    env=subprocess_env(), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        return cls(proc, log, server)

    def wait_for(self, what: str, pred: Callable[[], Any], timeout: float = STAGE_TIMEOUT_S) -> Any:
        """Poll ``pred`` until it is truthy; ScenarioError if the controller exits first."""
        deadline = time.monotonic() + timeout
        while True:
            value = pred()
            if value:
                return value
            if self.proc.poll() is not None:
                raise ScenarioError(f"the controller exited ({self.proc.returncode}) before "
                                    f"{what}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise ScenarioError(f"timed out waiting for {what}:\n{self.tail()}")
            time.sleep(0.05)

    def tail(self) -> str:
        return _read(self.log).decode(errors="replace")[-3000:]

    def sigkill(self) -> float:
        """SIGKILL the controller process alone (not its group); the time it died."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        return time.monotonic()

    def cleanup(self) -> None:
        """Whatever a failed scenario left behind."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.server.kill_all()


def common(workdir: Path, server: Server, *, load_s: float, time_scale: float = 1.0,
           stubborn: bool = False) -> list[str]:
    args = ["workload=smoke", "mlflow.enabled=false", f"server.sim.load_seconds={load_s}",
            f"server.sim.time_scale={time_scale}", f"launcher.state_dir={workdir / 'state'}",
            f"+server.extra_env.{TOKEN_ENV}={server.token}"]
    if stubborn:
        args.append(f"server.executable=[{sys.executable},{STUBBORN}]")
    return args


def result(run_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((run_dir / "result.json").read_text())
    except (OSError, ValueError):
        return None


def server_log(run_dir: Path) -> str:
    return _read(run_dir / "server.log").decode(errors="replace")


def time_until_gone(server: Server, since: float, limit: float) -> float | None:
    """Seconds from ``since`` until no process of ``server`` is left; None past ``limit``."""
    while server.processes():
        if time.monotonic() - since > limit:
            return None
        time.sleep(0.02)
    return time.monotonic() - since


def time_until_dead(identities: set[Identity], since: float, limit: float) -> float | None:
    while still_running(identities):
        if time.monotonic() - since > limit:
            return None
        time.sleep(0.02)
    return time.monotonic() - since


def logged(run_dir: Path, what: str, timeout: float) -> bool:
    """``what`` appears in the server log within ``timeout`` (the reaper writes when done)."""
    deadline = time.monotonic() + timeout
    while what not in server_log(run_dir):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# --------------------------------------------------------------- one controller, each stage


def _loading(run_dir: Path) -> bool:
    """The server is loading: its log is there, result.json has no server yet."""
    doc = result(run_dir)
    return bool(doc and doc["server"] is None and "Load weight begin" in server_log(run_dir))


def _coding(run_dir: Path) -> bool:
    """Requests of the coding eval are in flight (server ready, no coding result yet)."""
    doc = result(run_dir)
    return bool(doc and doc["server"] is not None and doc["coding"] is None
                and "Prefill batch" in server_log(run_dir))


def _matrix(run_dir: Path) -> bool:
    """The coding eval is recorded, the matrix is running (no cells recorded yet)."""
    doc = result(run_dir)
    return bool(doc and doc["coding"] is not None and doc["cells"] == [] and doc["status"] == "running")


# stage -> (reached?, knobs, extra overrides)
STAGES: dict[str, tuple[Callable[[Path], bool], dict[str, float], list[str]]] = {
    "startup": (_loading, {"load_s": 60.0}, []),  # killed while "loading weights"
    # real speed (the five-problem eval takes a few seconds): killed right after its first
    # request starts, the sim without a reaper stayed in uvicorn's "Waiting for background
    # tasks to complete" -- the issue's hang -- in about half the runs
    "coding": (_coding, {"load_s": 0.2, "time_scale": 1.0}, []),
    # a fast eval, then a matrix cell of 40 requests at 2x slower tokens
    "matrix": (_matrix, {"load_s": 0.2, "time_scale": 2.0}, ["workload.min_requests=40"]),
}


@dataclass
class Outcome:
    reaped_s: float | None  # SIGKILL -> last server process gone (None: not within the limit)
    before: dict[int, str]  # the server's processes at the kill
    left: dict[int, str]  # what outlived the limit
    run_dir: Path
    ports: list[int]


def kill_at_stage(workdir: Path, stage: str, *, stubborn: bool, limit: float,
                  extra: tuple[str, ...] = ()) -> Outcome:
    """Run ``python -m sweep`` to ``stage``, SIGKILL it, time its server's end."""
    reached, knobs, overrides = STAGES[stage]
    port = free_port()
    server = Server([port])
    run_dir = workdir / "run"
    ctl = Controller.start(workdir, server, *common(workdir, server, stubborn=stubborn, **knobs),
                           *overrides, *extra, f"server.port={port}", f"hydra.run.dir={run_dir}")
    try:
        ctl.wait_for(f"the {stage} stage", lambda: reached(run_dir))
        expected = 4 if stubborn else 1  # stubborn: itself, the sim, two setsid'd grandchildren
        before = ctl.wait_for("every server process", lambda: server.processes(expected))
        reaped = time_until_gone(server, ctl.sigkill(), limit)
        return Outcome(reaped, before, server.processes(), run_dir, server.ports)
    finally:
        ctl.cleanup()


# --------------------------------------------------------------- the host pool


def _pool_args(workdir: Path, server: Server) -> list[str]:
    hosts = ",".join(f"{{server_port: {p}}}" for p in server.ports)
    # A grid of configs the sim's b300 quirks never crash (budget 24+ fails CUDA-graph capture).
    return ["-m", "hydra/sweeper=optuna", f"launcher.hosts=[{hosts}]", "hydra.sweeper.n_trials=4",
            "hydra/sweeper/sampler=grid", "~hydra/sweeper/space", "spec.budget=4,8", "spec.topk=1,2",
            "spec.window=1024", "hydra.sweeper.plots.enabled=false",
            "hydra.sweeper.pool.max_restarts=1", f"hydra.sweep.dir={workdir / 'sweep'}",
            *common(workdir, server, load_s=0.2, time_scale=10.0, stubborn=True)]


def worker_pids(controller: int) -> set[Identity]:
    """The controller's live children: the pool's workers."""
    out = set()
    for name in os.listdir("/proc"):
        st = _stat(int(name)) if name.isdigit() else None
        if st is not None and len(st) > 19 and int(st[1]) == controller and st[0] not in (b"Z", b"X"):
            out.add((int(name), st[19]))
    return out


def port_of_worker(pid: int) -> int:
    """The ``server.port=N`` override the pool gave this worker."""
    for arg in _read(f"/proc/{pid}/cmdline").split(b"\0"):
        if arg.startswith(b"server.port="):
            return int(arg.split(b"=", 1)[1])
    raise ScenarioError(f"no server.port= in worker {pid}'s command line")


@dataclass
class PoolOutcome(Outcome):
    workers: set[Identity] = field(default_factory=set)  # at the kill
    # victim "controller": workers still running 60 s later (none should be);
    # victim "worker": the *other* worker right after the kill (it should run on)
    workers_after: set[int] = field(default_factory=set)


def kill_in_pool(workdir: Path, victim: str, *, limit: float) -> PoolOutcome:
    """A pool of two stubborn hosts, both serving; SIGKILL the controller or one worker.

    ``victim="worker"``: the pool's restart logic may start a new server on the
    same port, so the old server is followed by (pid, start time); the run is
    then ended with Ctrl-C.
    """
    server = Server([free_port(), free_port()])
    ctl = Controller.start(workdir, server, *_pool_args(workdir, server))
    sweep_dir = workdir / "sweep"

    def serving() -> bool:
        up = [d for d in sweep_dir.glob("[0-9]*") if "Prefill batch" in server_log(d)]
        return len(up) >= 2 and len(server.processes()) >= 4 * len(server.ports)

    try:
        ctl.wait_for("both hosts serving", serving)
        workers = worker_pids(ctl.proc.pid)
        if len(workers) != 2:
            raise ScenarioError(f"expected 2 workers, found {workers}")
        if victim == "controller":
            before = server.processes()
            reaped = time_until_gone(server, ctl.sigkill(), limit)
            time_until_dead(workers, time.monotonic(), 60.0)  # interrupted trials, exit 130
            return PoolOutcome(reaped, before, server.processes(), sweep_dir, server.ports,
                               workers, still_running(workers))
        target = min(workers)
        doomed = Server([port_of_worker(target[0])], token=None)
        before, old = doomed.processes(), doomed.identities()
        os.kill(target[0], signal.SIGKILL)
        reaped = time_until_dead(old, time.monotonic(), limit)
        left = {pid: before.get(pid, "?") for pid in still_running(old)}
        others = still_running(workers - {target})
        ctl.proc.send_signal(signal.SIGINT)  # end the run: workers stop their servers, exit
        ctl.proc.wait(timeout=180)
        return PoolOutcome(reaped, before, left, sweep_dir, doomed.ports, workers, others)
    finally:
        ctl.cleanup()
