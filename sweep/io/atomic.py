"""Files that readers never see half-written, and the one clock format they carry.

``write_atomic`` is how every JSON record reaches disk (result files, the
sweep's MLflow record, the local launcher's server state files): a temporary
file in the same directory, fsync, rename. A write that fails leaves the
previous file as it was, so a full disk mid-trial loses nothing written
before; it raises :class:`DiskFull`, whose one line says which file and how
much room is left (``python -m sweep`` prints that line and exits 1, never a
traceback).

The file ends with the mode any other file the user writes gets
(``0666 & ~umask``: 0644 under the usual umask 022), as ``open()`` would
make it: ``mkstemp`` creates its temporary file 0600, and a report.html or
result.json renamed from it stayed unreadable to a colleague on a shared
box. ``private=True`` keeps 0600 for the few files that are meant to be the
user's alone (the local launcher's server state files).
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Any, Callable, Mapping

from sweep.errors import EXIT_FAILED, SweepError

TMP_PREFIX = ".result-"  # the temporary file beside the one being written
# No space, quota exceeded, or past the file size limit (RLIMIT_FSIZE): no room either way.
NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class DiskFull(SweepError, OSError):
    """A write failed for lack of room on its filesystem (exit 1: what was written before stays)."""

    exit_code = EXIT_FAILED

    def __init__(self, path: str | Path, cause: OSError) -> None:
        OSError.__init__(self, cause.errno, cause.strerror or str(cause), str(path))
        self.path = Path(path)

    def describe(self) -> str:
        if self.errno == errno.EFBIG:  # not the disk: this process's file size limit
            import resource

            limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
            shown = "unlimited" if limit == resource.RLIM_INFINITY else _size(limit)
            return f"file size limit: cannot write {self.path} (RLIMIT_FSIZE {shown}; {self.strerror})"
        free, mount = room(self.path)
        where = f"{_size(free)} free on {mount}" if free is not None else "free space unknown"
        return f"disk full: cannot write {self.path} ({where}; {self.strerror})"

    def one_line(self) -> str:
        return f"error: {self.describe()}; the results written before are intact"


def no_room(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in NO_ROOM


def room(path: str | Path) -> tuple[int | None, str]:
    """(free bytes, mount point) of the filesystem ``path`` is (or would be) on."""
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    mount = p
    while not os.path.ismount(mount) and mount != mount.parent:
        mount = mount.parent
    try:
        return shutil.disk_usage(p).free, str(mount)
    except OSError:
        return None, str(mount)


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def quiet_log_errors() -> None:
    """Once the disk is full, every log file on it fails too: no "--- Logging error ---"
    traceback per record (the one line about the full disk says it all)."""
    logging.raiseExceptions = False


def now_iso() -> str:
    """UTC now, ISO 8601 to the second (what result files and logs record)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    return str(obj)


def umask() -> int:
    """This process's umask, read without changing it (``os.umask`` sets it to read it, which
    another thread could see); from /proc on Linux, else the set-and-restore."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def file_mode(private: bool = False) -> int:
    """The mode a new file gets: ``0666 & ~umask`` (what ``open()`` makes), 0600 when private."""
    return 0o600 if private else 0o666 & ~umask()


def write_atomic(path: Path, doc: Mapping[str, Any], *, private: bool = False) -> Path:
    """Write JSON so that a reader never sees a half-written file (mode: :func:`file_mode`)."""
    def body(fh: IO[str]) -> None:
        json.dump(doc, fh, indent=2, default=_default, allow_nan=False)
        fh.write("\n")

    return _write(path, ".json", body, private)


def write_atomic_text(path: Path, text: str, *, private: bool = False) -> Path:
    """Write text (a report) the same way."""
    return _write(path, Path(path).suffix, lambda fh: fh.write(text), private)


def _write(path: Path, suffix: str, body: Callable[[IO[str]], Any], private: bool = False) -> Path:
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=suffix, dir=path.parent)
    except OSError as exc:
        if no_room(exc):
            quiet_log_errors()
            raise DiskFull(path, exc) from None
        if (named := _named(exc, path)) is exc:
            raise
        raise named from exc
    try:
        os.fchmod(fd, file_mode(private))  # mkstemp made it 0600
        with os.fdopen(fd, "w") as fh:
            body(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and no_room(exc):
            quiet_log_errors()
            raise DiskFull(path, exc) from None
        if isinstance(exc, OSError) and (named := _named(exc, path)) is not exc:
            raise named from exc
        raise
    return path


def _named(exc: OSError, path: Path) -> OSError:
    """``exc`` naming the file being written: the temporary file beside it is ours, not the user's
    (an error about writing schedule.yaml names schedule.yaml)."""
    if exc.filename is not None and not Path(str(exc.filename)).name.startswith(TMP_PREFIX):
        return exc  # it names what failed (a parent directory that is a file ...)
    return type(exc)(exc.errno, exc.strerror or str(exc), str(path))


def read_json(path: Path) -> Any:
    with open(path) as fh:
        return json.load(fh)
