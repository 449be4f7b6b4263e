"""Process-group mechanics of the local launcher (see :mod:`launchers.local` for the why).

* :func:`spawn`: the server leads its own session (so the terminal's Ctrl-C
  does not reach it) and, unless it is kept, carries PR_SET_PDEATHSIG(SIGTERM)
  so the kernel stops it if the controller is SIGKILLed.
* :func:`signals_deferred`: a Ctrl-C during a spawn is acted on after it, not lost.
* :func:`terminate_group`: SIGTERM -> SIGINT (after ``FORCE_QUIT_AFTER_S``)
  -> SIGKILL (at the grace period) to the whole group.
* :func:`group_alive`: zombie members count as gone.
* :func:`port_in_use`: is something else already listening there.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from typing import IO, Any, Callable, Iterator, Mapping, Sequence, Union

from launchers import _state

# Seconds after SIGTERM before the group also gets SIGINT (see terminate_group).
FORCE_QUIT_AFTER_S = 3.0

# A server process: our child, or a kept server an earlier run started (adopted).
Proc = Union["subprocess.Popen[bytes]", _state.AdoptedProcess]

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


def run_tied(cmd: list[str], *, timeout: float | None = None, stop_grace_s: float = 90.0, **popen: Any) -> int:
    """Run a child command (a ``python -m sweep`` trial a controller drives) tied to this process:
    the kernel SIGTERMs it the moment we die, however (PR_SET_PDEATHSIG: a SIGKILLed controller
    too); a Ctrl-C or exception here sends it SIGTERM -- it records itself interrupted and stops its
    own server -- and SIGKILL after ``stop_grace_s``; past ``timeout`` the same, then TimeoutExpired.
    Its exit status."""
    preexec = _pdeathsig_preexec(os.getpid()) if _prctl is not None else None
    proc = subprocess.Popen(cmd, preexec_fn=preexec, **popen)  # noqa: PLW1509 - prctl only, no allocation
    try:
        return proc.wait(timeout=timeout)
    except BaseException:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=stop_grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        raise


_DEFERRED = ("SIGINT", "SIGTERM", "SIGHUP")


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold Ctrl-C / SIGTERM / SIGHUP until the block ends, then act on them.

    Why: a ``preexec_fn`` makes CPython run the ``os.register_at_fork``
    hooks around the fork (logging registers one), and an exception a signal
    handler raises inside such a hook is printed as "ignored" and dropped
    (``PyErr_WriteUnraisable``). A Ctrl-C that lands while a server is being
    spawned was lost that way: the trial went on as if nothing happened. So
    the handlers are swapped for ones that only note the signal, and the
    noted signals go to the original handlers once the spawn and its
    bookkeeping are done (KeyboardInterrupt then starts from a known state).
    Handlers can only be set from the main thread; elsewhere Python handlers
    never run, so nothing is swallowed and nothing is changed.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    saved = {}
    for name in _DEFERRED:
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        saved[sig] = signal.getsignal(sig)
        signal.signal(sig, lambda signum, _frame: noted.append(signum))
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(noted):
            handler = saved.get(signum)
            if callable(handler):
                handler(signum, None)
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), signum)


def spawn(argv: Sequence[str], *, env: Mapping[str, str], stdout: int | IO[bytes],
          pdeathsig: bool) -> subprocess.Popen[bytes]:
    """Start ``argv`` as the leader of a new session (pgid == pid), stderr into ``stdout``.

    ``pdeathsig``: tie it to this process (not for a kept server; no-op off
    Linux). Raises OSError when the program cannot be started.
    """
    preexec = _pdeathsig_preexec(os.getpid()) if _prctl is not None and pdeathsig else None
    return subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.STDOUT,
        env=env, start_new_session=True, preexec_fn=preexec, close_fds=True)


def pgid_of(proc: Proc) -> int:
    """The process group to signal for ``proc``."""
    if isinstance(proc, _state.AdoptedProcess):
        return proc.state.pgid
    return proc.pid  # leader of its own session: pgid == pid


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


def _wait_group(proc: Proc, pgid: int, timeout: float) -> bool:
    """Wait until the leader is reaped and no member is alive; False on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None and not group_alive(pgid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def terminate_group(proc: Proc, pgid: int, grace: float) -> None:
    """SIGTERM the group, then SIGINT, then SIGKILL at ``grace`` seconds; the caller reaps.

    SGLang and the sim serve through uvicorn, whose SIGTERM shutdown waits
    for open connections to close: after an interrupted benchmark the
    controller's abandoned streams would hold the server for the whole
    grace period and end in SIGKILL (skipping SGLang's own cleanup of its
    children). A SIGINT after FORCE_QUIT_AFTER_S is uvicorn's "second
    Ctrl-C": it quits without waiting, cleanly. A second Ctrl-C of ours
    while waiting skips the grace period but still kills the group before
    the KeyboardInterrupt propagates.
    """
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


# --------------------------------------------------------------- ports


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
