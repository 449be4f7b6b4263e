"""One sweep per sweep dir at a time: an exclusive lock on ``<sweep dir>/.specsweep.lock``.

Two grids started on the same ``hydra.sweep.dir`` at once wrote the same job
dirs (``0/``, ``1/`` ...): the second silently overwrote the first's results.
The first multirun now holds an ``flock`` on a file in the sweep dir for as
long as it runs (the kernel drops it when the process dies, however it
dies, so a killed sweep never leaves a stale lock); a second one is refused
at once, in one line naming the dir and who holds it. The lock file is removed
when the lock is released (a killed sweep's stays, and is simply taken again). Rerunning a finished or
killed sweep on its dir (resume) takes the free lock as before. A host
pool's workers run inside their controller's sweep and take no lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path

from sweep.errors import StorageError

FILENAME = ".specsweep.lock"
KEY = "hydra.sweep.dir"


def try_flock(path: Path) -> int | None:
    """An open fd holding ``flock`` on ``path`` (made if missing), or None while another holds it.

    Lock files are removed when released (:func:`unflock`): a 0-byte
    ``study.db.specsweep-lock`` stayed in the user's working directory and in
    ``git status``. A file unlinked by its releaser may still be open here, and
    locking it would lock nothing anyone else sees: the path must still name
    the inode this fd locked, else the try starts over on the new file.
    """
    for _ in range(8):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # released and removed while we opened it: lock the file that is there now
    return None


def unflock(path: Path, fd: int) -> None:
    """Remove ``path`` while still holding it, then release: no empty lock file stays behind."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only dir: the file stays, the lock is still released
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class SweepDirLock:
    """Held while a multirun runs; :meth:`release` (or the process's end) frees it."""

    def __init__(self, sweep_dir: Path, fd: int) -> None:
        self.sweep_dir = sweep_dir
        self._fd: int | None = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            unflock(self.sweep_dir / FILENAME, fd)


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return "another process"
    if not isinstance(info, dict):
        return "another process"
    since = info.get("since")
    when = time.strftime(" since %H:%M:%S", time.localtime(since)) if isinstance(since, (int, float)) else ""
    return f"pid {info.get('pid', '?')} on {info.get('host', '?')}{when}"


def acquire(sweep_dir: str | os.PathLike[str], *, key: str = KEY, who: str = "another sweep",
            hint: str = "wait for it to end, or give this one its own hydra.sweep.dir") -> SweepDirLock:
    """Lock ``sweep_dir`` (made if missing) for this process; StorageError if another sweep holds it.
    ``key``, ``who`` and ``hint``: how the refusal names the argument, the holder and the way out
    (``python -m sweep.verify_dynamic`` locks its ``--dir`` the same way)."""
    folder = Path(sweep_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / FILENAME
        fd = try_flock(path)
    except OSError as exc:
        raise StorageError(key, f"{folder}: {exc.strerror or exc}") from None
    if fd is None:
        raise StorageError(key, f"{folder} is in use by {who} ({_holder(path)}): {hint}") from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                  "since": time.time()}).encode(), 0)
    except OSError:
        pass  # who holds it is a courtesy; the lock itself is what counts
    return SweepDirLock(folder, fd)
