"""Run the server as a local process group and keep it only as long as needed.

Why each mechanism is here:

* **Own session / process group** (``start_new_session=True``): SGLang forks
  scheduler and detokenizer processes; stopping means signalling the whole
  group, and Ctrl-C in the terminal (SIGINT to the *foreground* group) must
  not kill the server behind the trial's back -- the trial stops it itself,
  after recording an ``interrupted`` result.
* **PR_SET_PDEATHSIG(SIGTERM)** (Linux, set in the child before exec): if the
  controller is SIGKILLed no ``finally``/atexit runs; the kernel then sends
  SIGTERM to the server so no 590 GB model stays resident on the GPUs.
  Caveats: it fires when the *thread* that started the server exits (call
  :meth:`LocalLauncher.ensure` from the main thread, as Hydra does), it only
  reaches the direct child (SGLang ties its own children to it the same
  way), and it is not set with ``launcher.keep_server=true`` (that server is
  meant to outlive us).
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
  controller using it) is still running. An adopted server is not our child:
  no PR_SET_PDEATHSIG ties it to us (if we are SIGKILLed it stays, and the
  next run adopts it again) and its exit code is unknown.
* **Kept server with secrets**: the redacting pump must outlive us too (a
  pump thread would die with us and leave the server writing into a broken
  pipe), so it is a small process of its own, in its own session.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator

import httpx

from launchers import _state
from launchers.base import LaunchFailure, ServerHandle, ServerLauncher
from launchers.classify import classify, hint, tail
from launchers.readiness import check_health, wait_ready
from sweep.render import MASK

if TYPE_CHECKING:
    from sweep.config import Server
    from sweep.render import Launch

logger = logging.getLogger(__name__)

# Seconds after SIGTERM before the group also gets SIGINT (see LocalLauncher.stop).
FORCE_QUIT_AFTER_S = 3.0
INFO_PATHS = ("/get_server_info", "/server_info")
_SECRET_KEYS = ("api_key", "token", "secret", "password")

# Resolved in the parent: the child between fork and exec must not dlopen/dlsym.
_PR_SET_PDEATHSIG = 1
try:
    _prctl: Any = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
except (OSError, AttributeError):  # pragma: no cover - exotic libc
    _prctl = None


def _pdeathsig_preexec(parent_pid: int) -> Callable[[], None]:
    """A preexec_fn asking the kernel to SIGTERM the child when we die."""

    def preexec() -> None:
        _prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent_pid:  # we died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


# --------------------------------------------------------------- process groups


def _live_members(pgid: int) -> list[int]:
    """Pids of the group's members that are not zombies (Linux /proc scan)."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()  # state ppid pgrp ...
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            out.append(int(entry.name))
    return out


def group_alive(pgid: int) -> bool:
    """Whether any non-zombie process of group ``pgid`` remains."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if sys.platform.startswith("linux"):
        return bool(_live_members(pgid))
    return True


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_group(proc: subprocess.Popen[bytes], pgid: int, timeout: float) -> bool:
    """Wait until the leader is reaped and no member is alive; False on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None and not group_alive(pgid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def port_in_use(host: str, port: int) -> bool:
    """Whether something already listens on ``host:port``.

    Binds with SO_REUSEADDR (like uvicorn) so sockets in TIME_WAIT from the
    server we just stopped do not count, and also tries to connect, for a
    listener on another address of the same port.
    """
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror:
        infos = []
    for family, kind, proto, _, addr in infos:
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(addr)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return True
    probe = "127.0.0.1" if host in ("", "0.0.0.0", "::", "localhost") else host
    try:
        with socket.create_connection((probe, port), timeout=0.3):
            return True
    except OSError:
        return False


# --------------------------------------------------------------- log handling


def _pump(src: IO[bytes], dst: IO[bytes], redact: Callable[[str], str]) -> None:
    """Copy server output to the log line by line, masking secrets."""
    with src:
        for line in iter(src.readline, b""):
            text = redact(line.decode("utf-8", "surrogateescape"))
            dst.write(text.encode("utf-8", "surrogateescape"))
            dst.flush()


# The redacting pump of a kept server, as a process (stdlib only; secrets come in the
# environment, never on a command line; argv[1] is the log file).
_PUMP_PROCESS = r"""
import json, os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
secrets = sorted((s for s in json.loads(os.environ.pop("SPECSWEEP_REDACT")) if s), key=len, reverse=True)
with open(sys.argv[1], "ab", buffering=0) as dst:
    for line in iter(sys.stdin.buffer.readline, b""):
        text = line.decode("utf-8", "surrogateescape")
        for s in secrets:
            text = text.replace(s, "***")
        dst.write(text.encode("utf-8", "surrogateescape"))
"""


def _read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() < offset:  # truncated or replaced: read it all
                offset = 0
            f.seek(offset)
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _redact_info(value: Any, redact: Callable[[str], str], key: str = "") -> Any:
    """Mask secrets in /get_server_info (it echoes every server arg, api_key too)."""
    if isinstance(value, dict):
        return {k: _redact_info(v, redact, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_info(v, redact) for v in value]
    if isinstance(value, str):
        if value and any(s in key.lower() for s in _SECRET_KEYS):
            return MASK
        return redact(value)
    return value


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# --------------------------------------------------------------- the launcher


class LocalLauncher(ServerLauncher):
    """Owns at most one local server process group at a time."""

    def __init__(self, settings: Any) -> None:
        super().__init__(settings)
        self._lock = threading.RLock()
        # our child, or a kept server an earlier run started (adopted)
        self._proc: subprocess.Popen[bytes] | _state.AdoptedProcess | None = None
        self._pump_thread: threading.Thread | None = None
        self._pump_proc: subprocess.Popen[bytes] | None = None
        self._state_path: Path | None = None
        self._port_note = ""  # what the state dir said about a busy port (for port_in_use)
        self._announced_pid: int | None = None
        self._launch: Launch | None = None
        self._server: Server | None = None
        self._log_path: Path | None = None
        self._info: dict[str, Any] = {}

    @staticmethod
    def _health_paths(server: Server) -> tuple[str, ...]:
        return tuple(dict.fromkeys([server.health_path or "/health", "/health"]))

    # ---- contract

    def ensure(self, launch: Launch, server: Server, trial_dir: Path) -> ServerHandle:
        """Reuse the running server if its fingerprint matches and it is healthy, else (re)start."""
        with self._lock:
            self._secrets |= set(launch.secrets)
            if (self.alive() and self._launch is not None and self._server is not None
                    and self._launch.fingerprint == launch.fingerprint
                    and self._server.base_url == server.base_url):
                if check_health(server.base_url, health_paths=self._health_paths(server),
                                api_key=server.api_key):
                    return self._handle(reused=True, startup_s=0.0)
                self._note("reused server failed its health check: restarting")
            self.stop()
            adopted = self._adopt_kept(launch, server)
            if adopted is not None:
                return adopted
            return self._start(launch, server, Path(trial_dir))

    def announce_kept(self) -> str | None:
        """Log (once per server) that the server stays up and how to stop it; the line or None.

        Called by ``launchers.stop_all`` when ``keep_server`` leaves this server running.
        """
        with self._lock:
            proc, server = self._proc, self._server
            if proc is None or proc.poll() is not None:
                return None
            pgid = self._pgid(proc)
            line = (f"keep_server: the server stays up after this run (pid {proc.pid}"
                    + (f", {server.base_url}" if server is not None else "")
                    + "); the next run with the same launch reuses it; "
                    f"stop it with: kill -TERM -- -{pgid}")
            if self._announced_pid != proc.pid:
                self._announced_pid = proc.pid
                logger.warning("%s", line)
                self._note(f"left running (keep_server); stop it with: kill -TERM -- -{pgid}")
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
        return self._redact(_read_from(Path(path), int(offset)))

    def alive(self) -> bool:
        proc = self._proc
        return proc is not None and proc.poll() is None

    def stop(self) -> None:
        """SIGTERM the group, then SIGINT, then SIGKILL at ``stop_grace_s``; reap. Idempotent.

        SGLang and the sim serve through uvicorn, whose SIGTERM shutdown waits
        for open connections to close: after an interrupted benchmark the
        controller's abandoned streams would hold the server for the whole
        grace period and end in SIGKILL (skipping SGLang's own cleanup of its
        children). A SIGINT after FORCE_QUIT_AFTER_S is uvicorn's "second
        Ctrl-C": it quits without waiting, cleanly. A second Ctrl-C of ours
        while waiting skips the grace period but still kills the group before
        the KeyboardInterrupt propagates.
        """
        with self._lock:
            proc = self._proc
            if proc is None:
                return
            pgid = self._pgid(proc)
            grace = self._num("stop_grace_s", 30.0)
            nudge = min(FORCE_QUIT_AFTER_S, grace / 2)
            try:
                _signal_group(pgid, signal.SIGTERM)
                _signal_group(pgid, signal.SIGCONT)  # a stopped (SIGSTOP/^Z) member acts on it
                if not _wait_group(proc, pgid, nudge):
                    _signal_group(pgid, signal.SIGINT)
                    if not _wait_group(proc, pgid, grace - nudge):
                        _signal_group(pgid, signal.SIGKILL)
                        _wait_group(proc, pgid, 10.0)
            except BaseException:
                _signal_group(pgid, signal.SIGKILL)
                _wait_group(proc, pgid, 5.0)
                raise
            finally:
                self._finish_stop(proc)

    # ---- internals

    @staticmethod
    def _pgid(proc: subprocess.Popen[bytes] | _state.AdoptedProcess) -> int:
        if isinstance(proc, _state.AdoptedProcess):
            return proc.state.pgid
        return proc.pid  # leader of its own session: pgid == pid

    def _finish_stop(self, proc: subprocess.Popen[bytes] | _state.AdoptedProcess) -> None:
        try:
            proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - unkillable (D state)
            pass
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
        _state.remove_state(self._state_path, proc.pid)
        self._state_path = None
        self._proc = None
        self._launch = None
        self._server = None
        self._info = {}

    # ---- servers kept by an earlier run (state files)

    def _state_file(self, server: Server) -> Path:
        return _state.state_path(_state.state_dir(self.settings), server.host, server.port)

    def _adopt_kept(self, launch: Launch, server: Server) -> ServerHandle | None:
        """Adopt (same fingerprint, healthy) or stop the server an earlier run kept on this port.

        Returns the handle of the adopted server, or None when the caller must
        start one. A stale state file is removed; its pid is never signalled.
        ``self._port_note`` says what was found, for a ``port_in_use`` message.
        """
        self._port_note = ""
        path = self._state_file(server)
        try:
            kept = _state.read_state(path)
        except ValueError as exc:
            path.unlink(missing_ok=True)
            self._port_note = f"an unreadable state file was removed: {exc}"
            logger.warning("%s", self._port_note)
            return None
        if kept is None:
            return None
        if not kept.is_running():
            _state.remove_state(path, kept.pid)
            self._port_note = (f"a stale state file {path} was found and removed: pid {kept.pid} "
                               "is gone or is now another process")
            logger.info("%s", self._port_note)
            return None
        if kept.owner_alive() and not kept.owned_by_me():
            self._port_note = (f"it is the specsweep server pid {kept.pid} that the still-running "
                               f"specsweep process {kept.owner_pid} uses (state file {path})")
            return None
        # Ours, and nobody else's any more: take it over.
        self._proc = _state.AdoptedProcess(kept)
        self._launch, self._server = launch, server
        self._log_path = Path(kept.log_path)
        self._state_path = path
        self._info = {}
        why = ""
        if kept.fingerprint != launch.fingerprint or kept.base_url != server.base_url:
            why = (f"its launch changed (fingerprint {kept.fingerprint} -> {launch.fingerprint})"
                   if kept.fingerprint != launch.fingerprint
                   else f"its URL changed ({kept.base_url} -> {server.base_url})")
        elif not check_health(server.base_url, health_paths=self._health_paths(server),
                              api_key=server.api_key):
            why = "it failed its health check"
        if why:
            logger.info("kept server pid %s on %s:%s: %s; stopping it", kept.pid, server.host,
                     server.port, why)
            self._note(f"kept server: {why}: stopping it")
            self.stop()
            return None
        keep = bool(self.settings.get("keep_server", False))
        try:
            me, my_ticks = _state.own_identity()
            kept.owner_pid, kept.owner_start_ticks, kept.keep_server = me, my_ticks, keep
            _state.write_state(path, kept)
        except OSError as exc:  # the server is usable; only the hand-over record failed
            logger.warning("could not update %s: %s", path, exc)
        self._info = self._fetch_info(server, launch)
        self._note(f"adopted by specsweep pid {os.getpid()}: kept server pid {kept.pid} "
                   f"(started {kept.started}) reused, fingerprint={launch.fingerprint}")
        logger.info("reusing the server kept by an earlier run: pid %s at %s (started %s; "
                 "stop it with: %s)", kept.pid, server.base_url, kept.started, kept.stop_command())
        return self._handle(reused=True, startup_s=0.0)

    def _record_state(self, proc: subprocess.Popen[bytes], launch: Launch, server: Server,
                      log_path: Path, keep: bool) -> None:
        """Describe the server we just spawned (best effort: a read-only home must not fail a trial)."""
        path = self._state_file(server)
        me, my_ticks = _state.own_identity()
        state = _state.ServerState(
            host=server.host, port=server.port, base_url=server.base_url, pid=proc.pid,
            pgid=proc.pid, start_ticks=_state.start_ticks(proc.pid), boot_id=_state.boot_id(),
            fingerprint=launch.fingerprint, log_path=str(log_path.resolve()),
            command=launch.shell_line(redact=True), started=_now(), keep_server=keep,
            owner_pid=me, owner_start_ticks=my_ticks)
        try:
            _state.write_state(path, state)
        except OSError as exc:
            logger.warning("could not record the server in %s (%s): a kept server will not be "
                        "reused by the next run", path, exc)
            return
        self._state_path = path

    def _port_in_use_message(self, server: Server) -> str:
        where = f"{server.host}:{server.port}"
        if self._port_note:
            found = self._port_note
        else:
            directory = _state.state_dir(self.settings)
            others = [f"{p.name} names pid {st.pid} ({st.host}); stop it with: {st.stop_command()}"
                      for p, st in _state.states_on_port(directory, server.port) if st.is_running()]
            found = ("; ".join(others) if others
                     else f"no specsweep state file for it in {directory}")
        return (f"{where} is already in use by a process this launcher did not start ({found}); "
                + hint("port_in_use"))

    def _note(self, what: str) -> None:
        """Append a marker line to the current server log."""
        if self._log_path is None:
            return
        try:
            with open(self._log_path, "ab") as f:
                f.write(f"===== specsweep {_now()} {what} =====\n".encode())
        except OSError:
            pass

    def _handle(self, *, reused: bool, startup_s: float) -> ServerHandle:
        assert self._launch is not None and self._server is not None and self._proc is not None
        return ServerHandle(base_url=self._server.base_url, fingerprint=self._launch.fingerprint,
                            reused=reused, startup_s=startup_s, log_path=self._log_path,
                            pid=self._proc.pid, info=dict(self._info))

    def _start(self, launch: Launch, server: Server, trial_dir: Path) -> ServerHandle:
        if port_in_use(server.host, server.port):
            raise LaunchFailure("port_in_use", self._port_in_use_message(server))
        trial_dir.mkdir(parents=True, exist_ok=True)
        log_path = trial_dir / "server.log"
        keep = bool(self.settings.get("keep_server", False))
        preexec = _pdeathsig_preexec(os.getpid()) if _prctl is not None and not keep else None
        env = {**os.environ, **launch.env}
        with open(log_path, "ab") as log:
            log.write(f"===== specsweep {_now()} start fingerprint={launch.fingerprint}: "
                      f"{launch.shell_line(redact=True)} =====\n".encode())
            log.flush()
            start_offset = log.tell()
            t0 = time.monotonic()
            try:
                proc = subprocess.Popen(
                    launch.argv, stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE if launch.secrets else log, stderr=subprocess.STDOUT,
                    env=env, start_new_session=True, preexec_fn=preexec, close_fds=True)
            except OSError as exc:
                msg = f"cannot start {launch.redact(launch.argv[0])}: {exc.strerror or exc}"
                log.write(f"specsweep: {msg}\n".encode())
                raise LaunchFailure("crashed", msg, msg) from None
            # Owned from this line on: stop()/stop_all() can find it whatever happens next.
            self._proc, self._launch, self._server, self._log_path = proc, launch, server, log_path
            self._info = {}
            self._record_state(proc, launch, server, log_path, keep)
            if launch.secrets:
                assert proc.stdout is not None
                if keep:
                    self._start_pump_process(proc, launch, log_path)
                else:
                    pump_log = open(log_path, "ab")  # owned by the pump thread
                    self._pump_thread = threading.Thread(
                        target=self._run_pump, args=(proc.stdout, pump_log, launch.redact),
                        name=f"server-log-{proc.pid}", daemon=True)
                    self._pump_thread.start()
        try:
            with self._progress(server) as on_wait:
                wait_ready(server.base_url, health_paths=self._health_paths(server),
                           timeout_s=self._num("ready_timeout_s", 900.0),
                           poll_s=self._num("poll_interval_s", 0.5),
                           poll_max_s=self._num("poll_max_s", 5.0),
                           alive=self.alive, api_key=server.api_key, on_wait=on_wait)
        except LaunchFailure as exc:
            raise self._failure(exc, log_path, start_offset) from None
        except BaseException:
            self.stop()
            raise
        startup_s = time.monotonic() - t0
        self._info = self._fetch_info(server, launch)
        self._note(f"ready after {startup_s:.1f} s (pid {proc.pid})")
        return self._handle(reused=False, startup_s=startup_s)

    def _start_pump_process(self, proc: subprocess.Popen[bytes], launch: Launch, log_path: Path) -> None:
        """The redacting pump of a kept server: a process in its own session that outlives us."""
        assert proc.stdout is not None
        env = {**os.environ, "SPECSWEEP_REDACT": json.dumps(sorted(launch.secrets))}
        try:
            self._pump_proc = subprocess.Popen(
                [sys.executable, "-c", _PUMP_PROCESS, str(log_path)], stdin=proc.stdout,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                start_new_session=True, close_fds=True)
        except OSError as exc:  # pragma: no cover - we just ran this interpreter
            logger.warning("no pump process (%s): the server log is pumped by a thread that ends "
                        "with this run", exc)
            pump_log = open(log_path, "ab")
            self._pump_thread = threading.Thread(
                target=self._run_pump, args=(proc.stdout, pump_log, launch.redact),
                name=f"server-log-{proc.pid}", daemon=True)
            self._pump_thread.start()
            return
        proc.stdout.close()  # the pump owns the read end now

    @staticmethod
    def _run_pump(src: IO[bytes], dst: IO[bytes], redact: Callable[[str], str]) -> None:
        with dst:
            _pump(src, dst, redact)

    def _failure(self, exc: LaunchFailure, log_path: Path, offset: int) -> LaunchFailure:
        """Stop what is left, mine this start's log section, build the user-facing failure.

        A timeout keeps a more specific reason when the log has one: SGLang's
        HTTP process can keep answering 503 after its scheduler died of OOM.
        """
        assert self._proc is not None
        code = self._proc.poll()
        self.stop()
        text = self._redact(_read_from(log_path, offset))
        if exc.reason == "timeout":
            found = classify(text, exited=False)
            reason = "timeout" if found == "unknown" else found
            what = exc.message
        else:
            reason = classify(text, exited=True)
            what = f"server exited with code {code} before it was ready"
        n = int(self._num("log_tail_lines", 60))
        return LaunchFailure(reason, f"{what}; {hint(reason)} (log: {log_path})", tail(text, n))

    def _fetch_info(self, server: Server, launch: Launch) -> dict[str, Any]:
        """Version and server args from /get_server_info (or /server_info); {} if neither works."""
        headers = {"Authorization": f"Bearer {server.api_key}"} if server.api_key else {}
        try:
            with httpx.Client(timeout=5.0, headers=headers, trust_env=False) as client:
                for path in INFO_PATHS:
                    try:
                        r = client.get(server.base_url + path)
                        data = r.json() if r.status_code == 200 else None
                    except (httpx.HTTPError, ValueError):
                        continue
                    if isinstance(data, dict):
                        return _redact_info(data, self._redact)
        except Exception:  # info is a nicety: never fail a ready server over it
            pass
        return {}

    @staticmethod
    @contextlib.contextmanager
    def _progress(server: Server) -> Iterator[Callable[[float], None] | None]:
        """A 'waiting for the server' spinner on an interactive stderr (loads take minutes)."""
        if not sys.stderr.isatty():
            yield None
            return
        from rich.console import Console

        what = f"waiting for {server.name} at {server.base_url}"
        with Console(stderr=True).status(what) as status:
            yield lambda elapsed: status.update(f"{what}: {elapsed:.0f} s")
