"""What the sandbox may see of the host, and which uid it runs as.

Why a separate module: both mechanisms (bubblewrap and the built-in
fallback) build the same view of the machine from the same lists, so what
one hides the other hides too.

The view is an allow-list, not ``/`` minus secrets: a fresh read-only root
holding only ``/usr`` (and the ``/bin``, ``/lib*``, ``/sbin`` links or dirs
beside it), the interpreter's own prefix when it lives elsewhere (pyenv and
conda put it under ``/root`` or ``/opt``), a handful of files from ``/etc``
that the dynamic loader and ``time`` read, a fresh ``/proc`` of the
sandbox's own PID namespace, a few device nodes, and one small writable
tmpfs at the scratch path. ``/root``, ``/home``, ``/run``, ``/sys``,
``/tmp``, the job dir, ssh keys and the MLflow store are simply not there.

The uid: one per run, from a range nothing hands out (0x70000000 up to
the 0x7FFE0000 block: above the system, dynamic, homed, subordinate and
container ranges that systemd's uid table lists, below the ids a user
namespace refuses), derived from the controller's pid and a counter. Not ``nobody``: RLIMIT_NPROC counts every
process of a *real* uid, so a cap on a uid shared with other daemons or
with another sandbox running at the same time would count their processes
too, and a kill of "everything of that uid" could hit them. A uid nothing
else uses makes the process cap, file ownership and signal permissions
belong to this one run. Kept below 2**31: user namespaces refuse larger
ids in a uid map.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
from dataclasses import dataclass

UID_BASE = 0x70000000             # 1,879,048,192: above every allocated range
_UID_SPAN = 0x0FFE0000             # base + span = 0x7FFE0000 < 2**31
_counter = itertools.count()
_lock = threading.Lock()

TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/hosts")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class Layout:
    """Read-only binds (same path inside), symlinks to recreate, the interpreter."""

    ro_binds: tuple[str, ...]
    symlinks: tuple[tuple[str, str], ...]   # (link path, target)
    python: str                              # the real interpreter binary


def sandbox_uid() -> int:
    """A uid for one run that no other process on the box has (see module doc)."""
    with _lock:
        n = next(_counter)
    return UID_BASE + ((os.getpid() * 64 + n % 64) % _UID_SPAN)  # 64 runs at once per controller


def interpreter(python: str | None = None) -> tuple[str, str]:
    """(real binary, prefix) of the Python that runs the solutions.

    A venv's ``bin/python`` is a symlink to the base interpreter; the
    sandbox runs the base one with ``-I -S`` (stdlib only), so the venv
    and its site-packages stay outside.
    """
    if python is None:
        binary = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
        prefix = os.path.realpath(sys.base_prefix)
    else:
        binary = os.path.realpath(python)
        prefix = os.path.dirname(os.path.dirname(binary))
    return binary, prefix


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def layout(python: str | None = None) -> Layout:
    """The allow-list for this host (computed per run: cheap, and never stale)."""
    binary, prefix = interpreter(python)
    binds: list[str] = ["/usr"]
    links: list[tuple[str, str]] = []
    for path in TOP_LEVEL:
        if os.path.islink(path):
            links.append((path, os.readlink(path)))
        elif os.path.isdir(path):
            binds.append(path)
    if not any(_under(prefix, b) for b in binds):
        binds.append(prefix)
    if not any(_under(binary, b) for b in binds):
        binds.append(binary)
    binds += [f for f in ETC_FILES if os.path.exists(f)]
    return Layout(ro_binds=tuple(binds), symlinks=tuple(links), python=binary)


def minimal_env(scratch: str) -> dict[str, str]:
    """The sandbox's whole environment: nothing inherited (no tokens, keys, proxies)."""
    return {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "HOME": scratch, "TMPDIR": scratch}


@dataclass(frozen=True)
class Limits:
    """Per-run limits; rlimits are per process, ``nproc`` per (unique) uid."""

    memory_mb: int
    cpu_s: int
    fsize: int = 16 * 1024 * 1024      # any one file, stdout/stderr included
    nproc: int = 64                    # processes + threads of the run's uid
    nofile: int = 256
    scratch_mb: int = 64               # the tmpfs that is the only writable place

    def rlimits(self) -> dict[str, int]:
        """RLIMIT_<name> -> value, the same for both mechanisms."""
        return {"AS": self.memory_mb * 1024 * 1024, "CPU": self.cpu_s, "FSIZE": self.fsize,
                "NPROC": self.nproc, "NOFILE": self.nofile, "CORE": 0}
