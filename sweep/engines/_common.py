"""What every install method shares: messages, the lock, pip, logged commands, manifests, room.

A cache entry is complete when its manifest (``install.json``, written last
with :func:`sweep.io.atomic.write_atomic`: fsync, rename) matches the recipe
that asked for it; a half-built entry has no manifest and is built again. A
lock file keeps two installers (CI's background job and a developer's shell)
from working on the same entry at once.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from sweep import errors
from sweep.io.atomic import write_atomic

MANIFEST = "install.json"


class InstallError(errors.InstallError):
    """An install step failed or cannot run here; the message says what is missing and where
    (one line, exit 1 at the command's boundary)."""


def say(msg: str) -> None:
    print(f"[engines] {msg}", file=sys.stderr, flush=True)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (created), held for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another installer holding {path}")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_manifest(root: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads((root / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def write_manifest(root: Path, doc: Mapping[str, Any]) -> None:
    write_atomic(root / MANIFEST, dict(doc))


def complete_entry(root: Path, recipe: Mapping[str, Any], exe: Path) -> Path | None:
    """``exe`` when the entry at ``root`` was completed for ``recipe`` and ``exe`` runs, else None."""
    manifest = read_manifest(root)
    if manifest is None or manifest.get("recipe") != dict(recipe) or not os.access(exe, os.X_OK):
        return None
    return exe


def pip_download(requirement: str, dest: Path, *, binary: bool, python: str | None = None) -> Path:
    """``pip download --no-deps`` one distribution into ``dest``; its path.

    A requirement pip cannot find (no such version, no wheel for this Python
    or platform, no network) is one line naming it.
    """
    dest.mkdir(parents=True, exist_ok=True)
    # --no-binary only for the package itself: pip prepares an sdist's metadata in
    # an isolated env whose build requirements (setuptools, cmake...) must stay wheels
    name = requirement.split("==", 1)[0]
    kind = ["--only-binary", ":all:"] if binary else ["--no-binary", name]
    cmd = [python or sys.executable, "-m", "pip", "download", "--no-deps", *kind, "--dest", str(dest), requirement]
    say("downloading " + requirement)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        why = pip_reason(proc.stdout + proc.stderr)
        raise InstallError(f"pip download {requirement} failed: {why}")
    suffixes = (".whl",) if binary else (".tar.gz", ".zip")
    found = sorted(p for p in dest.iterdir() if p.name.endswith(suffixes))
    if not found:
        raise InstallError(f"pip download {requirement} left no {'/'.join(suffixes)} in {dest}")
    return found[-1]


def pip_reason(output: str) -> str:
    """The line of pip's output that says why (pip prints it last, after ``ERROR:``)."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR:")]
    picked = errors[-1] if errors else (lines[-1] if lines else "no output")
    return picked.removeprefix("ERROR: ")[:400]


def run_logged(cmd: Sequence[str], log: Path, *, what: str, env: Mapping[str, str] | None = None,
               progress: str = "[") -> None:
    """Run ``cmd`` with its output appended to ``log``; show a progress line every ~15 s.

    ``progress``: the prefix of output lines worth showing (ninja's ``[12/80]``,
    pip's ``Collecting``).
    """
    with open(log, "a") as fh:
        fh.write("$ " + " ".join(cmd) + "\n")
        fh.flush()
        proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=dict(env) if env is not None else None)
        assert proc.stdout is not None
        shown = 0.0
        for line in proc.stdout:
            fh.write(line)
            if line.startswith(progress) and time.monotonic() - shown > 15:
                say(f"{what}: {line.strip()[:100]}")
                shown = time.monotonic()
        code = proc.wait()
    if code != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-30:])
        raise InstallError(f"{what} failed (exit {code}); log: {log}\n{tail}")


def check_room(where: Path, need_gb: float | None, *, what: str) -> None:
    """Fail in one line when the filesystem of ``where`` has less than ``need_gb`` free."""
    if not need_gb:
        return
    from sweep.io.atomic import room

    free, mount = room(where)
    if free is not None and free < need_gb * 1e9:
        raise InstallError(f"not enough disk for {what}: {free / 1e9:.1f} GB free on {mount}, "
                           f"needs {need_gb:g} GB (set $SPECSWEEP_ENGINES_DIR to a larger disk)")


def mem_gb() -> float | None:
    """Memory of this machine in GB (MemTotal; None where /proc/meminfo is missing)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024 / 1e9
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_memory(need_gb: float | None, *, what: str) -> None:
    """Fail in one line when this machine has less memory than ``need_gb`` in all."""
    total = mem_gb()
    if need_gb and total is not None and total < need_gb:
        raise InstallError(f"not enough memory for {what}: {total:.1f} GB here, needs {need_gb:g} GB")


def replace_tree(src: Path, dest: Path) -> None:
    """Move a finished folder into place (the old one, if any, removed first)."""
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(src, dest)
