"""Run model-written Python in a throwaway, limited subprocess.

Why: the coding eval executes whatever the server under test generated,
on the user's machine, often as root. Nothing in it may reach the network,
read the user's secrets (SPECSWEEP_API_KEY and friends), write outside a
scratch directory, eat the machine's memory, or outlive its time budget.

How, in layers (each applied where the OS allows, reported in the result):

* its own session / process group, killed as a whole on timeout or exit;
* a fresh temporary directory as cwd (removed afterwards), ``python -I -S
  -B`` (isolated: no user site, no PYTHON* variables, no .pyc writes);
* a minimal environment: PATH, LANG, HOME/TMPDIR = the scratch dir;
* rlimits: address space (memory), CPU seconds, file size, no core files,
  process count when not root;
* Linux namespaces (root, or unprivileged user namespaces): a new network
  namespace with no interfaces up (not even loopback), and a new mount
  namespace in which every mount is read-only except the scratch dir.

The limits are applied by a tiny bootstrap that runs in the child and then
``exec``s the interpreter on the solution, instead of a ``preexec_fn``
(which is unsafe in a threaded parent).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

TAIL_CHARS = 2000
FSIZE_BYTES = 16 * 1024 * 1024
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"

# Runs as `python -I -S -c BOOTSTRAP <json>` inside the child: isolate, limit, exec.
_BOOTSTRAP = r"""
import json, os, resource, sys
cfg = json.loads(sys.argv[1])
status = {"network_isolated": False, "fs_readonly": False}
NEWNS, NEWNET, NEWUSER = 0x00020000, 0x40000000, 0x10000000
RDONLY, NOSUID, NODEV, NOEXEC, REMOUNT, BIND, REC, PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18
if cfg["isolate"] and sys.platform.startswith("linux"):
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
        base = 0 if os.geteuid() == 0 else NEWUSER
        if libc.unshare(base | NEWNET | NEWNS) == 0:
            status["network_isolated"] = True
            mounts_ok = libc.mount(b"none", b"/", None, REC | PRIVATE, None) == 0
            if mounts_ok:
                scratch = cfg["scratch"].encode()
                targets = []
                with open("/proc/self/mounts", "rb") as fh:
                    for line in fh:
                        t = line.split()[1]
                        t = t.replace(b"\\040", b" ").replace(b"\\011", b"\t").replace(b"\\134", b"\\")
                        if t not in targets:
                            targets.append(t)
                keep = libc.mount(scratch, scratch, None, BIND | REC, None) == 0
                bad = 0
                for t in targets:
                    try:
                        f = os.statvfs(t).f_flag & (NOSUID | NODEV | NOEXEC)
                    except OSError:
                        continue
                    if libc.mount(None, t, None, REMOUNT | BIND | RDONLY | f, None) != 0:
                        bad += 1
                if keep:
                    libc.mount(None, scratch, None, REMOUNT | BIND | NOSUID | NODEV, None)
                try:
                    probe = os.path.join(os.path.dirname(cfg["scratch"]), ".specsweep-ro-probe")
                    open(probe, "w").close()
                    os.unlink(probe)
                except OSError:
                    status["fs_readonly"] = keep
        elif libc.unshare(base | NEWNET) == 0:
            status["network_isolated"] = True
    except Exception:
        pass
mb = cfg["memory_mb"] * 1024 * 1024
for lim, val in ((resource.RLIMIT_AS, mb), (resource.RLIMIT_CPU, cfg["cpu_s"]),
                 (resource.RLIMIT_FSIZE, cfg["fsize"]), (resource.RLIMIT_CORE, 0)):
    try:
        resource.setrlimit(lim, (val, val))
    except (ValueError, OSError):
        pass
if os.geteuid() != 0 and hasattr(resource, "RLIMIT_NPROC"):
    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (cfg["nproc"], cfg["nproc"]))
    except (ValueError, OSError):
        pass
fd = cfg["status_fd"]
os.write(fd, json.dumps(status).encode())
os.close(fd)
os.chdir(cfg["scratch"])
os.execve(cfg["python"], [cfg["python"], "-I", "-S", "-B", cfg["script"]], cfg["env"])
"""


@dataclass
class SandboxResult:
    """How one sandboxed run ended; ``passed`` means exit status 0 in time."""

    passed: bool
    returncode: int | None
    timed_out: bool
    duration_s: float
    stdout: str
    stderr: str
    error: str | None
    network_isolated: bool
    fs_readonly: bool
    scratch: str   # the (already removed) scratch dir, for tests and logs

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _minimal_env(scratch: str) -> dict[str, str]:
    """Only what Python needs; nothing inherited (no tokens, keys, proxies)."""
    return {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "HOME": scratch, "TMPDIR": scratch}


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_CHARS))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _reason(returncode: int | None, timed_out: bool, timeout_s: float, stderr: str) -> str | None:
    if timed_out:
        return f"timeout: killed after {timeout_s:g} s"
    if returncode == 0:
        return None
    if returncode is not None and returncode < 0:
        sig = -returncode
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGXCPU:
            return "timeout: CPU time limit"
        if sig == signal.SIGXFSZ:
            return "file size limit exceeded"
        return f"killed by {name}"
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    last = lines[-1] if lines else f"exit status {returncode}"
    if "MemoryError" in last:
        return "MemoryError: memory limit exceeded"
    return last[:300]


def _remove(path: str) -> None:
    def retry(func: Any, p: str, _exc: Any) -> None:
        try:
            os.chmod(p, 0o700)
            os.chmod(os.path.dirname(p), 0o700)
            func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=retry)


def run_python(code: str, *, timeout_s: float = 10.0, memory_mb: int = 512,
               isolate: bool = True, python: str | None = None) -> SandboxResult:
    """Run ``code`` as a script in the sandbox; exit status 0 within time = passed."""
    scratch = tempfile.mkdtemp(prefix="specsweep-sbx-")
    work = os.path.join(scratch, "work")  # cwd; its parent holds our own bookkeeping
    os.mkdir(work)
    script = os.path.join(work, "main.py")
    Path(script).write_text(code, encoding="utf-8")
    out_path, err_path = Path(scratch, "stdout"), Path(scratch, "stderr")
    python = python or sys.executable
    r_fd, w_fd = os.pipe()
    cfg = {"isolate": isolate, "scratch": work, "memory_mb": int(memory_mb),
           "cpu_s": int(timeout_s) + 1, "fsize": FSIZE_BYTES, "nproc": 256,
           "status_fd": w_fd, "python": python, "script": script, "env": _minimal_env(work)}
    timed_out = False
    t0 = time.monotonic()
    try:
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen(
                [python, "-I", "-S", "-c", _BOOTSTRAP, json.dumps(cfg)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=work,
                env=_minimal_env(work), pass_fds=(w_fd,), start_new_session=True)
        os.close(w_fd)
        w_fd = -1
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        _kill_group(proc.pid)  # on timeout, and any stray child left behind
        proc.wait()
        duration = time.monotonic() - t0
        status = _read_status(r_fd)
        stdout, stderr = _tail(out_path), _tail(err_path)
        rc = proc.returncode
    finally:
        if w_fd >= 0:
            os.close(w_fd)
        os.close(r_fd)
        _remove(scratch)
    return SandboxResult(
        passed=(rc == 0 and not timed_out), returncode=rc, timed_out=timed_out,
        duration_s=round(duration, 3), stdout=stdout, stderr=stderr,
        error=_reason(rc, timed_out, timeout_s, stderr),
        network_isolated=bool(status.get("network_isolated")),
        fs_readonly=bool(status.get("fs_readonly")), scratch=work)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_status(fd: int) -> dict[str, Any]:
    os.set_blocking(fd, False)
    try:
        data = os.read(fd, 4096)
    except (BlockingIOError, OSError):
        return {}
    try:
        obj = json.loads(data or b"{}")
    except ValueError:
        return {}
    return obj if isinstance(obj, dict) else {}


@lru_cache(maxsize=1)
def isolation() -> dict[str, bool]:
    """Which isolation layers this machine grants (probed once per process)."""
    res = run_python("pass\n", timeout_s=10)
    return {"network_isolated": res.network_isolated, "fs_readonly": res.fs_readonly}
