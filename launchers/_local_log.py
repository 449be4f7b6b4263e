"""The local server's log file: masking pump, marker lines, reading a window.

When a launch could print a secret (``--api-key``, a token in its
environment, a secret-named variable of ours) the server's output goes
through a pump that masks it with :mod:`sweep.secrets` (SGLang prints its
``ServerArgs``, key included, at startup): a thread for a server that ends
with us, a small process in its own session for a kept server (a thread
would die with us and leave the server writing into a broken pipe).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Callable, Iterable

from sweep import secrets
from sweep.io.atomic import DiskFull, no_room, now_iso

# Records keep the logger name they had before this module was split out of launchers.local.
logger = logging.getLogger("launchers.local")
_SECRETS_ENV = "SPECSWEEP_REDACT"  # the pump process's values to mask (never on a command line)
_ROOT = str(Path(__file__).resolve().parent.parent)  # where ``launchers`` and ``sweep`` import from


def _pump(src: IO[bytes], dst: IO[bytes], redact: Callable[[str], str]) -> None:
    """Copy server output to the log line by line, masking secrets.

    A log that cannot be written (a full disk) loses its further lines, said
    once; the pipe is still drained, or the server would block writing to it.
    """
    out: IO[bytes] | None = dst
    with src:
        for line in iter(src.readline, b""):
            if out is None:
                continue
            text = redact(line.decode("utf-8", "surrogateescape"))
            try:
                out.write(text.encode("utf-8", "surrogateescape"))
                out.flush()
            except OSError as exc:
                _close_quietly(out)
                out = None
                why = DiskFull(dst.name, exc).describe() if no_room(exc) else f"{dst.name}: {exc}"
                logger.warning("server log: %s; its further lines are dropped", why)


def _close_quietly(f: IO[bytes]) -> None:
    try:
        f.close()
    except OSError:
        pass


def _run_pump(src: IO[bytes], dst: IO[bytes], redact: Callable[[str], str]) -> None:
    try:
        _pump(src, dst, redact)
    finally:
        _close_quietly(dst)


def pump_process_main(log_path: str) -> None:
    """The pump of a kept server, as a process: stdin -> ``log_path``, secrets masked."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    values = json.loads(os.environ.pop(_SECRETS_ENV, "[]"))
    with open(log_path, "ab", buffering=0) as dst:
        _pump(sys.stdin.buffer, dst, secrets.Redactor(values).text)


def _pump_thread(proc: subprocess.Popen[bytes], log_path: Path,
                 redact: Callable[[str], str]) -> threading.Thread:
    assert proc.stdout is not None
    pump_log = open(log_path, "ab")  # owned by the pump thread
    thread = threading.Thread(target=_run_pump, args=(proc.stdout, pump_log, redact),
                              name=f"server-log-{proc.pid}", daemon=True)
    thread.start()
    return thread


def start_pump(proc: subprocess.Popen[bytes], log_path: Path, values: Iterable[str], *,
               outlive_us: bool) -> tuple[threading.Thread | None, subprocess.Popen[bytes] | None]:
    """Pump ``proc``'s stdout into ``log_path`` with ``values`` masked: (thread, process), one set.

    ``outlive_us`` (a kept server): a process in its own session, falling
    back to a thread if it cannot be started.
    """
    assert proc.stdout is not None
    values = sorted(set(values))
    redact = secrets.Redactor(values).text
    if not outlive_us:
        return _pump_thread(proc, log_path, redact), None
    env = {**os.environ, _SECRETS_ENV: json.dumps(values),
           "PYTHONPATH": os.pathsep.join(p for p in (_ROOT, os.environ.get("PYTHONPATH")) if p)}
    code = "import sys; from launchers._local_log import pump_process_main; pump_process_main(sys.argv[1])"
    try:
        pump_proc = subprocess.Popen(
            [sys.executable, "-c", code, str(log_path)], stdin=proc.stdout,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
            start_new_session=True, close_fds=True)
    except OSError as exc:  # pragma: no cover - we just ran this interpreter
        logger.warning("no pump process (%s): the server log is pumped by a thread that ends "
                       "with this run", exc)
        return _pump_thread(proc, log_path, redact), None
    proc.stdout.close()  # the pump owns the read end now
    return None, pump_proc


def append_note(log_path: Path | None, what: str) -> None:
    """Append a ``===== specsweep <time> <what> =====`` marker line to the server log."""
    if log_path is None:
        return
    try:
        with open(log_path, "ab") as f:
            f.write(f"===== specsweep {now_iso()} {what} =====\n".encode())
    except OSError:
        pass


def read_from(path: Path, offset: int) -> str:
    """The log from byte ``offset`` on (all of it if the file shrank); "" if unreadable."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() < offset:  # truncated or replaced: read it all
                offset = 0
            f.seek(offset)
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""
