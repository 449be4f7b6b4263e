"""Run the server as a local process group and keep it only as long as needed.

Why each mechanism is here:

* **Own session / process group** (``start_new_session=True``): SGLang forks
  scheduler and detokenizer processes; stopping means signalling the whole
  group, and Ctrl-C in the terminal (SIGINT to the *foreground* group) must
  not kill the server behind the trial's back -- the trial stops it itself,
  after recording an ``interrupted`` result.
* **A reaper per server** (:mod:`launchers._reaper`): if the controller is
  SIGKILLed no ``finally``/atexit runs, so a small process of its own, tied
  to us by a pipe, stops the server's group and every process carrying its
  ``SPECSWEEP_SERVER_MARK`` (SIGTERM, SIGINT, SIGKILL at
  ``launcher.reap_grace_s``) so no 590 GB model stays resident on the GPUs.
  It is started before the server, also sweeps what escaped the group at a
  normal stop, and is told ``release`` when ``keep_server`` hands the server
  over at a normal end (docs/ARCHITECTURE.md, "Lifecycle").
* **PR_SET_PDEATHSIG(SIGTERM)** (Linux, set in the child before exec) on the
  group leader as well: the kernel's own signal, the same instant. Alone it
  was not enough: it fires when the *thread* that started the server exits,
  it only reaches the direct child, and a server may ignore SIGTERM or wait
  in uvicorn's "Waiting for background tasks to complete". Not set with
  ``launcher.keep_server=true``.
* **server.log in the trial dir**, appended, one redacted header line per
  start; when the launch carries secrets (``--api-key``), output goes through
  a redacting pump thread because SGLang prints its ``ServerArgs`` (key
  included) at startup. ``log_mark``/``log_since`` give one trial's window.
* **Stop**: SIGTERM to the group, ``stop_grace_s``, SIGKILL to the group,
  reap. Members that are already zombies count as gone (a PID 1 that does not
  reap orphans, as in some containers, leaves them forever).
* **A state file per server** (:mod:`launchers._state`,
  ``<launcher.state_dir>/<host>_<port>.json``): a server kept with
  ``keep_server=true`` outlives this process, and the next ``python -m
  sweep`` -- a new process -- finds it there. Same fingerprint and healthy:
  it is *adopted* (reused, no ~150 s restart; ``stop``/``alive``/log windows
  work on it as on our own child). Different fingerprint: it is stopped like
  our own and the new server started. A file whose process is gone, or whose
  pid now belongs to another process (different start time), is stale:
  removed, and nothing it names is ever signalled. A port held by anything
  else stays ``port_in_use``, and so does a server whose recorded owner (the
  controller using it) is still running. An adopted server is not our child
  (its exit code is unknown); a new reaper ties it to us until we hand it
  over again.
* **Kept server with secrets**: the redacting pump must outlive us too (a
  pump thread would die with us and leave the server writing into a broken
  pipe), so it is a small process of its own, in its own session.

Where the code is: process groups, pdeathsig, the stop sequence and the port
check in :mod:`launchers._local_process`; the log pump, marker lines and log
windows in :mod:`launchers._local_log`; state files and adoption of kept
servers in :mod:`launchers._local_kept` (on top of :mod:`launchers._state`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from launchers import _state
from launchers._local_kept import KeptServers
from launchers._local_log import append_note, read_from, start_pump
from launchers._local_process import (  # noqa: F401 - FORCE_QUIT_AFTER_S, group_alive, spawn: public here
    FORCE_QUIT_AFTER_S, group_alive, pgid_of, port_in_use, run_tied, signals_deferred, spawn, terminate_group)
from launchers._reaper import MARK_ENV, Reaper
from launchers.base import LaunchFailure, ServerHandle, ServerLauncher
from launchers.classify import classify, hint, said, tail
from launchers.readiness import check_health, fetch_info, health_paths, wait_ready
from sweep import secrets
from sweep.io.atomic import now_iso

if TYPE_CHECKING:
    from sweep.launch import Endpoint, Launch, LauncherSettings

logger = logging.getLogger(__name__)
# server.port unset and the group's port in use: the next free one within this many
PORT_SPAN = 100

# --------------------------------------------------------------- the launcher


class LocalLauncher(ServerLauncher):
    """Owns at most one local server process group at a time."""

    def __init__(self, settings: LauncherSettings) -> None:
        super().__init__(settings)
        self._lock = threading.RLock()
        self._kept = KeptServers(settings)  # state files: servers kept across runs
        # our child, or a kept server an earlier run started (adopted)
        self._proc: subprocess.Popen[bytes] | _state.AdoptedProcess | None = None
        self._pump_thread: threading.Thread | None = None
        self._pump_proc: subprocess.Popen[bytes] | None = None
        self._announced_pid: int | None = None
        self._launch: Launch | None = None
        self._server: Endpoint | None = None
        self._log_path: Path | None = None
        self._info: dict[str, Any] = {}
        self._mark: str | None = None  # SPECSWEEP_SERVER_MARK of the server's processes
        self._reaper: Reaper | None = None  # stops the server if this process dies

    @staticmethod
    def _health_paths(server: Endpoint) -> tuple[str, ...]:
        return health_paths(server.health_path)

    # ---- contract

    def ensure(self, launch: Launch, server: Endpoint, trial_dir: Path) -> ServerHandle:
        """Reuse the running server if its fingerprint matches and it is healthy, else (re)start."""
        with self._lock:
            self._secrets |= set(launch.secrets)
            if (self.alive() and self._launch is not None and self._server is not None
                    and self._launch.fingerprint == launch.fingerprint
                    and self._server.base_url == server.base_url):
                if check_health(server.base_url, health_paths=self._health_paths(server),
                                api_key=server.api_key):
                    if self._proc is not None and (self._reaper is None or not self._reaper.alive()):
                        # handed off at an earlier stop_all (keep_server): ours again now
                        self._arm_reaper(self._mark, pgid_of(self._proc), self._log_path)
                    return self._handle(reused=True, startup_s=0.0)
                self._note("reused server failed its health check: restarting")
            self.stop()
            adopted = self._adopt_kept(launch, server)
            if adopted is not None:
                return adopted
            return self._start(launch, server, Path(trial_dir))

    def pick_port(self, host: str, preferred: int) -> int:
        """``preferred``, or the next port a server of ours can listen on (``server.port`` unset).

        In this order, within ``PORT_SPAN`` ports from ``preferred``: the port of the server this
        launcher runs now (the next job of a grid reuses it when its launch is unchanged, or
        restarts on the same port), the port of a server an earlier run kept that this run may
        take over (adopted or stopped by ``ensure``), the first port nothing listens on. None of
        those: ``preferred`` (``ensure`` then fails ``port_in_use``, naming what holds it).
        """
        span = range(int(preferred), min(int(preferred) + PORT_SPAN, 65536))
        with self._lock:
            server = self._server
            if self.alive() and server is not None and server.host == host and server.port in span:
                return int(server.port)
        directory = _state.state_dir(self.settings)
        for port in span:
            try:
                kept = _state.read_state(_state.state_path(directory, host, port))
            except ValueError:
                continue
            if kept is not None and kept.is_running() and (kept.owned_by_me() or not kept.owner_alive()):
                return port
        for port in span:
            if not port_in_use(host, port):
                return port
        return int(preferred)

    def announce_kept(self) -> str | None:
        """Log (once per server) that the server stays up and how to stop it; the line or None.

        Called by ``launchers.stop_all`` when ``keep_server`` leaves this server running.
        """
        with self._lock:
            proc, server = self._proc, self._server
            if proc is None or proc.poll() is not None:
                return None
            pgid = pgid_of(proc)
            line = (f"keep_server: the server stays up after this run (pid {proc.pid}"
                    + (f", {server.base_url}" if server is not None else "")
                    + "); the next run with the same launch reuses it; "
                    f"stop it with: kill -TERM -- -{pgid}")
            if self._announced_pid != proc.pid:
                self._announced_pid = proc.pid
                logger.warning("%s", line)
                self._note(f"left running (keep_server); stop it with: kill -TERM -- -{pgid}")
            if self._reaper is not None:  # handed over: this run's death no longer stops it
                self._reaper.release()
                self._reaper = None
            return line

    def log_mark(self) -> tuple[Path | None, int]:
        with self._lock:
            path = self._log_path
        if path is None:
            return (None, 0)
        try:
            return (path, path.stat().st_size)
        except OSError:
            return (path, 0)

    def log_since(self, mark: Any) -> str:
        path, offset = mark if mark else (None, 0)
        if path is None:
            return ""
        return self._redact(read_from(Path(path), int(offset)))

    def alive(self) -> bool:
        proc = self._proc
        return proc is not None and proc.poll() is None

    def stop(self) -> None:
        """SIGTERM the group, then SIGINT, then SIGKILL at ``stop_grace_s``; reap. Idempotent.

        Why SIGINT in between: :func:`launchers._local_process.terminate_group`.
        """
        with self._lock:
            proc = self._proc
            if proc is None:  # a Ctrl-C between spawn and bookkeeping: the reaper knows its mark
                self._disarm_reaper()
                return
            pgid = pgid_of(proc)
            if self._reaper is not None:  # it knows the tree before the group's leader goes
                self._reaper.snapshot()
            try:
                terminate_group(proc, pgid, self.settings.stop_grace_s)
            finally:
                self._finish_stop(proc)

    # ---- internals

    def _finish_stop(self, proc: subprocess.Popen[bytes] | _state.AdoptedProcess) -> None:
        try:
            proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - unkillable (D state)
            pass
        self._disarm_reaper()  # what escaped the group (a setsid'd grandchild) goes too
        if self._pump_thread is not None:
            self._pump_thread.join(timeout=5.0)
            self._pump_thread = None
        if self._pump_proc is not None:  # reads until the server's side of the pipe closes
            try:
                self._pump_proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:  # pragma: no cover - a member kept the pipe open
                self._pump_proc.kill()
                self._pump_proc.wait()
            self._pump_proc = None
        if isinstance(proc, _state.AdoptedProcess):
            self._note(f"stopped (kept server pid {proc.pid}, started by an earlier run)")
        else:
            self._note(f"stopped (exit code {proc.returncode})")
        self._kept.forget(proc.pid)
        self._proc = None
        self._launch = None
        self._server = None
        self._info = {}

    def _note(self, what: str) -> None:
        """Append a marker line to the current server log."""
        append_note(self._log_path, what)

    def _arm_reaper(self, mark: str | None, pgid: int | None, log_path: Path | None) -> None:
        """Start the reaper that stops the server if this process dies (:mod:`launchers._reaper`).

        ``pgid`` None: the server is about to be spawned (``watch`` follows).
        """
        self._disarm_reaper()
        try:
            self._reaper = Reaper.start(mark=mark, grace_s=self.settings.reap_grace_s,
                                        log_path=log_path)
        except OSError as exc:  # pragma: no cover - we just ran this interpreter
            logger.warning("no reaper for the server (%s): if this process is killed, only "
                           "PR_SET_PDEATHSIG stops it", exc)
            return
        if pgid is not None:
            self._reaper.watch(pgid, _state.start_ticks(pgid))

    def _disarm_reaper(self) -> None:
        if self._reaper is not None:
            self._reaper.stop(timeout=self.settings.reap_grace_s + 10.0)
            self._reaper = None

    def _handle(self, *, reused: bool, startup_s: float) -> ServerHandle:
        assert self._launch is not None and self._server is not None and self._proc is not None
        return ServerHandle(base_url=self._server.base_url, fingerprint=self._launch.fingerprint,
                            reused=reused, startup_s=startup_s, log_path=self._log_path,
                            pid=self._proc.pid, info=dict(self._info))

    def _adopt_kept(self, launch: Launch, server: Endpoint) -> ServerHandle | None:
        """Adopt (same fingerprint, healthy) or stop the server an earlier run kept on this port.

        Returns the handle of the adopted server, or None when the caller must
        start one (:class:`launchers._local_kept.KeptServers` decides what may be taken over).
        """
        kept = self._kept.find(server)
        if kept is None:
            return None
        self._proc = _state.AdoptedProcess(kept)
        self._launch, self._server, self._log_path, self._info = launch, server, Path(kept.log_path), {}
        # Ours now: if this run dies before it hands the server over again, the server goes
        # (and stopping it below also sweeps what escaped its group).
        self._mark = kept.mark
        self._arm_reaper(kept.mark, kept.pgid, self._log_path)
        why = self._kept.why_not_reused(kept, launch, server)
        if why:
            logger.info("kept server pid %s on %s:%s: %s; stopping it", kept.pid, server.host,
                        server.port, why)
            self._note(f"kept server: {why}: stopping it")
            self.stop()
            return None
        self._kept.hand_over(kept)
        self._info = fetch_info(server.base_url, server.api_key, self._secrets, server.info_paths)
        self._note(f"adopted by specsweep pid {os.getpid()}: kept server pid {kept.pid} "
                   f"(started {kept.started}) reused, fingerprint={launch.fingerprint}")
        logger.info("reusing the server kept by an earlier run: pid %s at %s (started %s; "
                    "stop it with: %s)", kept.pid, server.base_url, kept.started, kept.stop_command())
        return self._handle(reused=True, startup_s=0.0)

    def _start(self, launch: Launch, server: Endpoint, trial_dir: Path) -> ServerHandle:
        if port_in_use(server.host, server.port):
            raise LaunchFailure("port_in_use", self._kept.port_in_use_message(server))
        trial_dir.mkdir(parents=True, exist_ok=True)
        log_path = trial_dir / "server.log"
        keep = self.settings.keep_server
        # The mark finds the server's processes wherever they go (its reaper, docs/ARCHITECTURE.md).
        mark = uuid.uuid4().hex
        env = {**os.environ, **launch.env, MARK_ENV: mark}
        self._arm_reaper(mark, None, log_path)  # first: a death from here on is covered
        # The server's output is pumped through the masking when it could print a secret.
        masked = set(launch.secrets) | secrets.known()
        with open(log_path, "ab") as log:
            log.write(f"===== specsweep {now_iso()} start fingerprint={launch.fingerprint}: "
                      f"{launch.shell_line(redact=True)} =====\n".encode())
            log.flush()
            start_offset = log.tell()
            t0 = time.monotonic()
            with signals_deferred():  # a Ctrl-C in the fork hooks is acted on below, not lost
                try:
                    proc = spawn(launch.argv, env=env, pdeathsig=not keep,
                                 stdout=subprocess.PIPE if masked else log)
                except OSError as exc:
                    self._disarm_reaper()
                    msg = f"cannot start {launch.redact(launch.argv[0])}: {exc.strerror or exc}"
                    log.write(f"specsweep: {msg}\n".encode())
                    raise LaunchFailure("crashed", msg, msg) from None
                # Owned from this line on: stop()/stop_all() can find it whatever happens next.
                self._proc, self._launch, self._server, self._log_path = proc, launch, server, log_path
                self._mark, self._info = mark, {}
                if self._reaper is not None:
                    self._reaper.watch(proc.pid, _state.start_ticks(proc.pid))
                self._kept.record(proc, launch, server, log_path, mark)
            if masked:
                self._pump_thread, self._pump_proc = start_pump(proc, log_path, masked, outlive_us=keep)
        try:
            with self._progress(server) as on_wait:
                wait_ready(server.base_url, health_paths=self._health_paths(server),
                           timeout_s=self.settings.ready_timeout_s,
                           poll_s=self.settings.poll_interval_s,
                           poll_max_s=self.settings.poll_max_s,
                           alive=self.alive, api_key=server.api_key, on_wait=on_wait)
        except LaunchFailure as exc:
            raise self._failure(exc, log_path, start_offset) from None
        except BaseException:
            self.stop()
            raise
        startup_s = time.monotonic() - t0
        self._info = fetch_info(server.base_url, server.api_key, self._secrets, server.info_paths)
        self._note(f"ready after {startup_s:.1f} s (pid {proc.pid})")
        return self._handle(reused=False, startup_s=startup_s)

    def _failure(self, exc: LaunchFailure, log_path: Path, offset: int) -> LaunchFailure:
        """Stop what is left, mine this start's log section, build the user-facing failure.

        A timeout keeps a more specific reason when the log has one: SGLang's
        HTTP process can keep answering 503 after its scheduler died of OOM.
        """
        assert self._proc is not None
        code = self._proc.poll()
        self.stop()
        text = self._redact(read_from(log_path, offset))
        if exc.reason == "timeout":
            found = classify(text, exited=False)
            reason = "timeout" if found == "unknown" else found
            what = exc.message
        else:
            reason = classify(text, exited=True)
            what = f"server exited with code {code} before it was ready"
        words = said(text, reason)  # the server's own message (vLLM's config error, the missing path)
        return LaunchFailure(reason, f"{what}: {words}; {hint(reason)} (log: {log_path})" if words else
                             f"{what}; {hint(reason)} (log: {log_path})", tail(text, self.settings.log_tail_lines))

    @staticmethod
    @contextlib.contextmanager
    def _progress(server: Endpoint) -> Iterator[Callable[[float], None] | None]:
        """A 'waiting for the server' spinner on an interactive stderr (loads take minutes)."""
        if not sys.stderr.isatty():
            yield None
            return
        from rich.console import Console

        what = f"waiting for {server.name} at {server.base_url}"
        with Console(stderr=True).status(what) as status:
            yield lambda elapsed: status.update(f"{what}: {elapsed:.0f} s")
