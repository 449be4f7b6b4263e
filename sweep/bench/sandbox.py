"""Run model-written Python where it cannot reach the controller or the box.

Why: the coding eval executes whatever the server under test generated,
on GPU boxes where specsweep runs as root. Nothing in it may read the
controller's environment or files, reach any network (the host's loopback
included), write outside its scratch dir, take more than its memory and
process budget, or outlive its run. docs/sandbox.md lists what is enforced
and how to check it.

Two mechanisms build the same sandbox (:mod:`._sandbox_layout` is the
allow-list both use): bubblewrap where it works (:mod:`._sandbox_bwrap`),
else the built-in bootstrap (:mod:`._sandbox_boot`), chosen once per
process with one warning line when bwrap is missing or unusable -- once per
sweep, too, when its trials run in several processes (a host pool's
workers, SLURM jobs): :func:`notice_once_in` names a marker file in the
sweep dir, and only the process that creates it warns. Around
either, the controller gives each run a uid of its own, a cgroup v2 child
where one can be delegated (:mod:`._sandbox_cgroup`) or else a watch on the
resident memory of the whole process tree (:mod:`._sandbox_watch`), a
wall-clock deadline, and a kill of the whole tree at the end.

What ``coding.sandbox`` in result.json states comes from
:func:`enforced`: a probe run through the same path, checked against the
controller's own view (:mod:`._sandbox_probe`), never from intentions.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from sweep.bench import _sandbox_bwrap as bwrap
from sweep.bench import _sandbox_cgroup as cgroup
from sweep.bench import _sandbox_probe as probe
from sweep.bench._sandbox_layout import (
    DEVICES,
    Layout,
    Limits,
    layout,
    minimal_env,
    sandbox_uid,
)
from sweep.bench._sandbox_seccomp import program as seccomp_program
from sweep.bench._sandbox_watch import (
    end_namespace,
    kill_tree,
    resident_bytes,
    tree,
    wait_gone,
)
from sweep.compose.config import SANDBOX_MECHANISMS

log = logging.getLogger(__name__)

MECHANISMS = SANDBOX_MECHANISMS
TAIL_CHARS = 2000
POLL_S = 0.02                       # memory-watch sampling period
BOOT = str(Path(__file__).with_name("_sandbox_boot.py"))
PREFIX = "specsweep-sbx-"            # + controller pid + random: tempfile.gettempdir()/...
NOTICE_FILE = ".sandbox-fallback-noticed"  # in the sweep dir: the fallback was said for this sweep
_warn_lock = threading.Lock()
_warned = False
_notice_dir: Path | None = None


class SandboxUnavailable(OSError):
    """The requested mechanism cannot run here (the message says why)."""


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
    mechanism: str
    memory_exceeded: bool
    survivors: int                  # processes still alive 5 s after the kill (should be 0)
    uid: int                        # the run's own uid (when the controller is root)
    scratch: str                    # the (already removed) scratch dir, for tests and logs

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_python(code: str, *, timeout_s: float = 10.0, memory_mb: int = 512,
               mechanism: str = "auto", python: str | None = None) -> SandboxResult:
    """Run ``code`` as a script in the sandbox; exit status 0 within time = passed."""
    return _run(code, resolve(mechanism, python), timeout_s=timeout_s, memory_mb=memory_mb,
                python=python)


def resolve(mechanism: str = "auto", python: str | None = None) -> str:
    """"bwrap" or "fallback" for this host; the first fallback of a process warns, once."""
    global _warned
    if mechanism not in MECHANISMS:
        raise ValueError(f"sandbox mechanism must be one of {', '.join(MECHANISMS)}, got {mechanism!r}")
    if mechanism == "fallback":
        return "fallback"
    why = _bwrap_problem(python)
    if not why:
        return "bwrap"
    if mechanism == "bwrap":
        raise SandboxUnavailable(why)
    with _warn_lock:
        if not _warned:
            _warned = True
            if _first_in_sweep():
                log.warning("coding sandbox: %s; using the built-in fallback (namespaces via unshare, "
                            "own uid, rlimits; see docs/sandbox.md)", why)
    return "fallback"


def notice_once_in(sweep_dir: str | os.PathLike[str] | None) -> None:
    """Say the fallback once for the sweep in ``sweep_dir`` (None: a single run, once per process)."""
    global _notice_dir
    _notice_dir = Path(sweep_dir) if sweep_dir else None


def _first_in_sweep() -> bool:
    """True unless another process of this sweep said it already (its marker file exists)."""
    if _notice_dir is None:
        return True
    try:
        os.close(os.open(_notice_dir / NOTICE_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        return False
    except OSError:
        return True  # no marker to be had: better said twice than never
    return True


@cache
def _bwrap_problem(python: str | None) -> str:
    """Why bwrap cannot be used here ("" when a real run through it worked), once per process."""
    path, why = bwrap.find()
    if not path:
        return why
    trial = _run("print('ok')\n", "bwrap", timeout_s=20.0, memory_mb=256, python=python)
    if trial.passed and trial.stdout.strip() == "ok":
        return ""
    return f"bwrap does not run here: {trial.error}"


@cache
def enforced(memory_mb: int = 512, timeout_s: float = 10.0, mechanism: str = "auto",
             python: str | None = None) -> dict[str, Any]:
    """What a run with these settings is verified to enforce (``coding.sandbox``)."""
    mech = resolve(mechanism, python)
    remove_stale()
    program = probe.script(probe.hidden_paths(layout(python).ro_binds))
    res = _run(program, mech, timeout_s=max(timeout_s, 10.0), memory_mb=memory_mb, python=python)
    report = probe.parse(res.stdout)
    if not report:
        return {"mechanism": mech, "verified": False, "error": res.error or "probe printed nothing"}
    return {**probe.verify(report, mechanism=mech, uid=res.uid, memory_kind=_memory_kind(),
                           memory_mb=memory_mb, nproc=Limits(memory_mb, 1).nproc,
                           env_keys=set(minimal_env(""))), "verified": True}


def remove_stale() -> list[str]:
    """Remove scratch dirs left by controllers that were killed mid-run (their pid is gone)."""
    removed = []
    for path in Path(tempfile.gettempdir()).glob(f"{PREFIX}*-*"):
        pid = path.name[len(PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return removed


@lru_cache(maxsize=1)
def _cgroup_base() -> tuple[Path | None, str]:
    return cgroup.delegated()


def _memory_kind() -> str:
    return "cgroup_v2" if _cgroup_base()[0] else "rlimit_as+rss_watch"


def _run(code: str, mech: str, *, timeout_s: float, memory_mb: int, python: str | None) -> SandboxResult:
    base = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")   # 0700: the program, outputs, bwrap's inputs
    work = os.path.join(base, "work")   # the scratch path inside; on the host an empty dir
    limits = Limits(memory_mb=int(memory_mb), cpu_s=int(timeout_s) + 1)
    uid = sandbox_uid()
    out_path, err_path = Path(base, "stdout"), Path(base, "stderr")
    fds: list[int] = []
    cg: Path | None = None
    try:
        os.mkdir(work)
        Path(base, "main.py").write_text(code, encoding="utf-8")
        r_fd, w_fd = os.pipe()
        fds += [r_fd, w_fd]
        argv = _command(mech, base, work, layout(python), limits, uid, w_fd, fds)
        cg_base, _ = _cgroup_base()
        if cg_base is not None:  # enter the cgroup first, as root, then become the sandbox
            cg = cgroup.create(cg_base, os.path.basename(base), limits.memory_mb, limits.nproc)
            argv = ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', str(cg / "cgroup.procs"), *argv]
        t0 = time.monotonic()
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=base,
                                    env=minimal_env(work), pass_fds=fds[1:], start_new_session=True)
        os.close(fds.pop(1))  # our copy of the status pipe's write end: EOF once the sandbox is done
        timed_out, mem_over = _watch(proc, timeout_s, limits.memory_mb if cg is None else None)
        pids = kill_tree(proc.pid)
        proc.wait()
        status = _read_status(r_fd)
        init = _init_of(status)
        survivors = wait_gone(pids) + ([init[0]] if init and not end_namespace(*init) else [])
        duration = time.monotonic() - t0
        mem_over = mem_over or (cg is not None and cgroup.oom_killed(cg))
        stdout, stderr = _tail(out_path), _tail(err_path)
        rc = _signal_code(mech, proc.returncode, status)
    finally:
        for fd in fds:
            os.close(fd)
        if cg is not None:
            cgroup.remove(cg)
        shutil.rmtree(base, ignore_errors=True)
    setup_error = _setup_error(mech, status, stderr)
    error = (f"sandbox setup failed: {setup_error}" if setup_error
             else f"memory limit exceeded: over {memory_mb} MB across its processes" if mem_over
             else _reason(rc, timed_out, timeout_s, stderr))
    if survivors:
        log.warning("coding sandbox: %d process(es) survived the kill: %s", len(survivors), survivors)
    return SandboxResult(
        passed=(rc == 0 and not timed_out and not mem_over and not setup_error), returncode=rc,
        timed_out=timed_out, duration_s=round(duration, 3), stdout=stdout, stderr=stderr, error=error,
        mechanism=mech, memory_exceeded=mem_over, survivors=len(survivors), uid=uid, scratch=work)


def _command(mech: str, base: str, work: str, lay: Layout, limits: Limits, uid: int, status_fd: int,
             fds: list[int]) -> list[str]:
    """The argv that starts the sandbox; fds it must inherit are appended to ``fds``."""
    script = os.path.join(work, "main.py")
    bpf = seccomp_program()
    if mech == "bwrap":
        script_fd = os.open(Path(base, "main.py"), os.O_RDONLY)
        fds.append(script_fd)
        seccomp_fd = None
        if bpf:
            Path(base, "seccomp.bpf").write_bytes(bpf)
            seccomp_fd = os.open(Path(base, "seccomp.bpf"), os.O_RDONLY)
            fds.append(seccomp_fd)
        return bwrap.argv(bwrap.find()[0] or "bwrap", lay, limits, scratch=work, script=script,
                          script_fd=script_fd, uid=uid, status_fd=status_fd, seccomp_fd=seccomp_fd)
    cfg = {"root": os.path.join(base, "root"), "scratch": work, "script": script,
           "code_path": os.path.join(base, "main.py"), "ro_binds": list(lay.ro_binds),
           "symlinks": [list(s) for s in lay.symlinks], "devices": list(DEVICES),
           "scratch_mb": limits.scratch_mb, "rlimits": limits.rlimits(), "uid": uid, "python": lay.python,
           "env": minimal_env(work), "status_fd": status_fd, "strict": os.geteuid() == 0,
           "seccomp": bpf.hex() if bpf else None}
    os.mkdir(str(cfg["root"]))
    return [lay.python, "-I", "-S", "-B", BOOT, json.dumps(cfg)]


def _watch(proc: subprocess.Popen[bytes], timeout_s: float, memory_mb: int | None) -> tuple[bool, bool]:
    """Wait for the run; (timed out, memory over) when it had to be stopped."""
    deadline = time.monotonic() + timeout_s
    budget = memory_mb * 1024 * 1024 if memory_mb else None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return True, False
        try:
            proc.wait(timeout=min(POLL_S, left))
            return False, False
        except subprocess.TimeoutExpired:
            pass
        if budget is not None and resident_bytes(tree(proc.pid)[1:]) > budget:
            return False, True


def _init_of(status: list[dict[str, Any]]) -> tuple[int, str] | None:
    """(host pid, "pid:[inode]") of the run's PID-namespace init, from the status pipe."""
    for s in status:
        if "child-pid" in s and "pid-namespace" in s:          # bwrap --json-status-fd
            return int(s["child-pid"]), f"pid:[{s['pid-namespace']}]"
    merged = {k: v for s in status for k, v in s.items()}    # _sandbox_boot: parent + child
    if "init_pid" in merged and "pidns" in merged:
        return int(merged["init_pid"]), str(merged["pidns"])
    return None


def _signal_code(mech: str, rc: int, status: list[dict[str, Any]]) -> int:
    """bwrap reports a command killed by signal N as exit 128+N; make it -N like Popen."""
    if mech == "bwrap" and rc > 128 and rc - 128 in signal.Signals._value2member_map_:
        return 128 - rc
    return rc


def _setup_error(mech: str, status: list[dict[str, Any]], stderr: str) -> str | None:
    """Why the sandbox never started the code, or None when it did."""
    if mech == "bwrap":
        if any("child-pid" in s for s in status):
            return None
        return next((ln for ln in stderr.splitlines() if ln.startswith("bwrap:")), "bwrap did not start")
    merged = {k: v for s in status for k, v in s.items()}
    return merged.get("error") if merged.get("error") and os.geteuid() == 0 else None


def _read_status(fd: int) -> list[dict[str, Any]]:
    """The JSON objects written to the status pipe (bwrap: one per line)."""
    os.set_blocking(fd, False)
    try:
        data = os.read(fd, 65536).decode("utf-8", "replace")
    except (BlockingIOError, OSError):
        return []
    out = []
    for chunk in data.replace("}{", "}\n{").splitlines():
        try:
            obj = json.loads(chunk)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - TAIL_CHARS))
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
