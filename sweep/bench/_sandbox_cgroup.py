"""A cgroup v2 child per run, where this host delegates memory and pids to us.

Why: a cgroup's ``memory.max`` covers every process of the run together
(page cache and tmpfs pages included) and ``pids.max`` caps them, with no
sampling. Used only when our own cgroup v2 directory is writable and its
``cgroup.subtree_control`` has (or accepts) ``memory`` and ``pids``; a
cgroup v1 host or an undelegated v2 one (the v2 rule "no processes in an
inner cgroup" makes enabling controllers in our own, occupied cgroup fail)
falls back to rlimits plus the controller's RSS watch, and says so.
Nothing here touches a cgroup outside our own subtree.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

NEEDED = ("memory", "pids")


def _mount_and_path() -> tuple[Path, str] | None:
    try:
        own = next(ln[3:] for ln in Path("/proc/self/cgroup").read_text().splitlines()
                   if ln.startswith("0::"))
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            if right.split()[:1] == ["cgroup2"] and left.split()[3] == "/":
                return Path(left.split()[4]), own
    except (OSError, StopIteration, IndexError):
        pass
    return None


def delegated() -> tuple[Path | None, str]:
    """(our cgroup v2 dir, "") when runs can get their own limited child, else (None, why)."""
    found = _mount_and_path()
    if found is None:
        return None, "no cgroup v2 hierarchy"
    base = found[0] / found[1].lstrip("/")
    try:
        have = set((base / "cgroup.controllers").read_text().split())
        if not set(NEEDED) <= have:
            return None, f"cgroup v2 at {base} has no {'/'.join(sorted(set(NEEDED) - have))} controller"
        enabled = set((base / "cgroup.subtree_control").read_text().split())
        missing = [c for c in NEEDED if c not in enabled]
        if missing:
            (base / "cgroup.subtree_control").write_text(" ".join("+" + c for c in missing))
    except OSError as exc:
        return None, f"cgroup v2 at {base} not delegated ({exc.strerror})"
    return base, ""


def create(base: Path, name: str, memory_mb: int, nproc: int) -> Path:
    """A child cgroup with the run's limits (no swap: the budget is RAM)."""
    cg = base / name
    cg.mkdir(mode=0o755)
    (cg / "memory.max").write_text(str(memory_mb * 1024 * 1024))
    if (cg / "memory.swap.max").exists():
        (cg / "memory.swap.max").write_text("0")
    (cg / "pids.max").write_text(str(nproc))
    return cg


def oom_killed(cg: Path) -> bool:
    try:
        for line in (cg / "memory.events").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and int(value) > 0:
                return True
    except (OSError, ValueError):
        pass
    return False


def remove(cg: Path) -> None:
    """Kill whatever is left in it, then remove it."""
    try:
        if (cg / "cgroup.kill").exists():
            (cg / "cgroup.kill").write_text("1")
        else:
            for pid in (cg / "cgroup.procs").read_text().split():
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, ValueError):
                    pass
    except OSError:
        pass
    for _ in range(100):
        try:
            cg.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)
