"""The local server's log file: redacting pump, marker lines, reading a window.

When a launch carries secrets (``--api-key``) the server's output goes
through a pump that masks them (SGLang prints its ``ServerArgs``, key
included, at startup): a thread for a server that ends with us, a small
process in its own session for a kept server (a thread would die with us and
leave the server writing into a broken pipe).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Callable, Iterable

from sweep.result import now_iso

# Records keep the logger name they had before this module was split out of launchers.local.
logger = logging.getLogger("launchers.local")


def _pump(src: IO[bytes], dst: IO[bytes], redact: Callable[[str], str]) -> None:
    """Copy server output to the log line by line, masking secrets."""
    with src:
        for line in iter(src.readline, b""):
            text = redact(line.decode("utf-8", "surrogateescape"))
            dst.write(text.encode("utf-8", "surrogateescape"))
            dst.flush()


def _run_pump(src: IO[bytes], dst: IO[bytes], redact: Callable[[str], str]) -> None:
    with dst:
        _pump(src, dst, redact)


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


def _pump_thread(proc: subprocess.Popen[bytes], log_path: Path,
                 redact: Callable[[str], str]) -> threading.Thread:
    assert proc.stdout is not None
    pump_log = open(log_path, "ab")  # owned by the pump thread
    thread = threading.Thread(target=_run_pump, args=(proc.stdout, pump_log, redact),
                              name=f"server-log-{proc.pid}", daemon=True)
    thread.start()
    return thread


def start_pump(proc: subprocess.Popen[bytes], log_path: Path, secrets: Iterable[str],
               redact: Callable[[str], str], *, outlive_us: bool,
               ) -> tuple[threading.Thread | None, subprocess.Popen[bytes] | None]:
    """Pump ``proc``'s stdout into ``log_path`` with secrets masked: (thread, process), one set.

    ``outlive_us`` (a kept server): a process in its own session, falling
    back to a thread if it cannot be started.
    """
    assert proc.stdout is not None
    if not outlive_us:
        return _pump_thread(proc, log_path, redact), None
    env = {**os.environ, "SPECSWEEP_REDACT": json.dumps(sorted(secrets))}
    try:
        pump_proc = subprocess.Popen(
            [sys.executable, "-c", _PUMP_PROCESS, str(log_path)], stdin=proc.stdout,
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
