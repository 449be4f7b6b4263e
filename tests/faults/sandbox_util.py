"""Shared by the sandbox tests: which mechanisms run here, and process checks."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sweep.bench import sandbox


def _bwrap_skip() -> str | None:
    try:
        sandbox.resolve("bwrap")
    except sandbox.SandboxUnavailable as exc:
        return f"bubblewrap cannot run here: {exc}"
    return None


_WHY = _bwrap_skip()
# bwrap is the reference; the fallback must hold the same line on the same box.
MECHANISMS = [pytest.param("bwrap", marks=pytest.mark.skipif(bool(_WHY), reason=_WHY or "")), "fallback"]
USABLE = ["fallback"] if _WHY else ["bwrap", "fallback"]


def running(pid: int, wait_s: float = 2.5) -> bool:
    """True while ``pid`` exists and is not a zombie (allow the kernel ``wait_s`` to reap)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return False
        if state in ("Z", "X") or time.monotonic() > deadline:
            return state not in ("Z", "X")
        time.sleep(0.05)


def pids_with_marker(marker: str) -> list[int]:
    """Live processes whose command line contains ``marker`` (our own excluded)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmd and running(int(entry), wait_s=0):
            out.append(int(entry))
    return out
