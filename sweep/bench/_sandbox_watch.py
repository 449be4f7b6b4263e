"""Watching and ending a sandboxed process tree from the controller.

Why: rlimits are per process, so ``RLIMIT_AS = memory_mb`` alone lets three
children take three times the budget. Where no cgroup v2 memory controller
can be delegated (cgroup v1 hosts, this CI box among them), the controller
samples the resident memory of the whole tree (every process the run
started, found through ``/proc/<pid>/task/<tid>/children``; orphans are
re-parented to the namespace's PID 1, which is in the tree) and kills the
run when the sum passes the budget. Resident pages shared between
processes count once per process, so the sum errs high, never low; an
allocation that comes and goes between two samples is still capped per
process by RLIMIT_AS and in number by RLIMIT_NPROC.
"""

from __future__ import annotations

import os
import signal
import time

PAGE = os.sysconf("SC_PAGE_SIZE")


def tree(root: int) -> list[int]:
    """``root`` and every live descendant (pids in the host's namespace)."""
    out: list[int] = []
    stack = [root]
    seen: set[int] = set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        out.append(pid)
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                    stack.extend(int(c) for c in fh.read().split())
            except (OSError, ValueError):
                continue
    return out


def resident_bytes(pids: list[int]) -> int:
    """Sum of resident set sizes (a process gone meanwhile counts 0)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", "rb") as fh:
                total += int(fh.read().split()[1]) * PAGE
        except (OSError, ValueError, IndexError):
            continue
    return total


def kill_tree(root: int) -> list[int]:
    """SIGKILL ``root`` and its descendants; returns the pids signalled.

    Killing the namespace's PID 1 is what makes the kernel end everything
    else in it; the explicit kills only save waiting for that.
    """
    pids = tree(root)
    for pid in reversed(pids):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return pids


def wait_gone(pids: list[int], timeout_s: float = 5.0) -> list[int]:
    """Wait until none of ``pids`` is alive (zombies count as gone); the survivors."""
    deadline = time.monotonic() + timeout_s
    alive = list(pids)
    while alive:
        alive = [p for p in alive if _alive(p)]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    return alive


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def end_namespace(init_pid: int, pidns: str, timeout_s: float = 5.0) -> bool:
    """Kill the PID namespace whose init is ``init_pid``; True once it is gone.

    Why: bwrap exits as soon as the *command* exits, while its PID 1 may
    still be taking the namespace down, so "bwrap has exited" does not yet
    mean "every process is dead". The kernel kills and reaps the whole
    namespace before its init turns zombie, so waiting for that is exact.
    ``pidns`` ("pid:[inode]") guards against a reused pid: we never signal
    a process that is not that namespace's init.
    """
    deadline = time.monotonic() + timeout_s
    signalled = False
    while True:
        try:
            if os.readlink(f"/proc/{init_pid}/ns/pid") != pidns or not _alive(init_pid):
                return True
        except OSError:
            return True
        if not signalled:
            try:
                os.kill(init_pid, signal.SIGKILL)
            except ProcessLookupError:
                return True
            signalled = True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
