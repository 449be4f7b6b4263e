"""``launcher=slurm``'s jobs: one trial = one batch job, submitted, watched and cancelled.

Why ``sbatch`` directly and not submitit: a trial already is a command line
(``python -m sweep -m ... hydra.sweeper.pool.job=...``) whose record is its
``result.json`` on the shared sweep dir, so nothing needs pickling; the job
script is a plain file beside the trial (``<job dir>/slurm/job.sh``) that a
user reads and resubmits by hand; the job *is* the app's process, so the app's
own interrupt path (SIGTERM -> the trial recorded ``interrupted``, its server
stopped) handles a cancel, and a shell trap turns the time limit's early
signal into the same path with a note saying why; and the job states come from
``squeue``, which works without ``slurmdbd`` (submitit asks ``sacct``, absent
on clusters without accounting). submitit stays the tool for plain grids:
``hydra/launcher=submitit_slurm`` (docs/cluster.md).

What a job's end means (:class:`JobEnd`, ``reason``):

* ``None`` -- the job ran to its own end (COMPLETED, FAILED): ``result.json`` tells;
* ``time_limit`` -- it got the time limit's SIGUSR1 (``--signal=B:USR1@signal_s``;
  the trap writes ``time_limit`` to ``<job dir>/slurm/signals`` and SIGTERMs the
  app) or SLURM's TIMEOUT / DEADLINE;
* ``preempted`` -- cancelled by someone else, its node failed, or preempted
  (CANCELLED, NODE_FAIL, PREEMPTED, BOOT_FAIL), or gone from ``squeue``
  without a result;
* ``interrupted`` -- this controller cancelled it (Ctrl-C);
* ``oom`` -- OUT_OF_MEMORY.

Nothing of ours outlives a dead controller: every job id is written to a
guard process (:mod:`launchers._slurm_guard`, its own session) through a pipe;
when the controller dies -- even by SIGKILL -- the pipe closes and the guard
runs ``scancel`` on the jobs still out. Inside a job, SLURM's process tracking
(``proctrack/cgroup``: every process of the job, or ``linuxproc``: by
parentage) and the local launcher's reaper stop the server with its job.
"""

from __future__ import annotations

import getpass
import logging
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Mapping, Sequence

from sweep.launch import LauncherSettings, SlurmSettings

log = logging.getLogger(__name__)

TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
            "DEADLINE", "OUT_OF_MEMORY")
_LOST = ("CANCELLED", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL")
MISSING_POLLS = 5  # a job absent from squeue this many polls in a row is gone
SQUEUE_TIMEOUT_S = 60.0


class SubmitError(Exception):
    """sbatch refused a job (its message is sbatch's)."""


@dataclass
class JobEnd:
    job_id: str
    name: str
    state: str
    node: str | None
    reason: str | None  # module docstring
    message: str
    log_path: Path


@dataclass
class _Job:
    job_id: str
    name: str
    job_dir: Path
    state: str = "PENDING"
    node: str | None = None
    why: str = ""  # squeue's reason while pending
    misses: int = 0
    cancelled: bool = False
    log_path: Path = field(default_factory=Path)


def _options(s: SlurmSettings, name: str, job_dir: Path, cwd: Path) -> list[str]:
    """The sbatch options of one trial's job (argv words, never through a shell)."""
    opts = [f"--job-name={name}", f"--output={job_dir / 'slurm' / 'slurm-%j.out'}",
            f"--chdir={cwd}", "--nodes=1", "--ntasks=1", "--no-requeue"]
    if s.signal_s > 0 and s.sbatch.get("time") is not None:
        opts.append(f"--signal=B:USR1@{s.signal_s}")
    for key, value in s.sbatch.items():
        flag = "--" + key.replace("_", "-")
        opts.append(flag if value is True else f"{flag}={value}")
    return opts + list(s.extra)


def script(s: SlurmSettings, name: str, argv: Sequence[str], job_dir: Path, cwd: Path) -> str:
    """The batch script: setup lines, then the app in the background under two traps.

    The app runs as the shell's child (not ``exec``) so the shell can tell the
    time limit's SIGUSR1 apart from a cancel: it notes ``time_limit`` and sends
    the app SIGTERM, which the app handles like Ctrl-C (the trial keeps its
    finished cells as ``interrupted``, the server is stopped).
    """
    signals = shlex.quote(str(job_dir / "slurm" / "signals"))
    lines = ["#!/bin/bash",
             f"# {name}: one trial of a specsweep search (docs/cluster.md), written by its controller.",
             "# The controller passes the same options to sbatch; `sbatch <this file>` runs the trial again.",
             *(f"#SBATCH {o}" for o in _options(s, name, job_dir, cwd)),
             "set -u"]
    if s.setup:
        lines += ["# launcher.setup", *s.setup]
    lines += [
        f"trap 'echo time_limit >> {signals}; kill -TERM \"$child\" 2>/dev/null' USR1",
        "trap 'kill -TERM \"$child\" 2>/dev/null' TERM INT",
        " ".join(shlex.quote(a) for a in argv) + " &",
        "child=$!",
        # wait returns early when a trapped signal arrives: wait again until the app has ended
        'while :; do wait "$child"; rc=$?; kill -0 "$child" 2>/dev/null || break; done',
        'exit "$rc"', ""]
    return "\n".join(lines)


class SlurmJobs:
    """Submits, watches and cancels the trial jobs of one controller (module docstring)."""

    def __init__(self, settings: LauncherSettings, env: Mapping[str, str] | None = None) -> None:
        assert settings.slurm is not None, "launcher=slurm settings without their slurm part"
        self.settings = settings.slurm
        self.env = dict(os.environ if env is None else env)
        self.jobs: dict[str, _Job] = {}
        self._guard: subprocess.Popen[bytes] | None = None
        self._squeue_failing = False

    @property
    def max_requeue(self) -> int:
        return self.settings.max_requeue

    @property
    def poll_s(self) -> float:
        return self.settings.poll_s

    # -- submitting ---------------------------------------------------------------------------
    def _write(self, name: str, argv: Sequence[str], job_dir: Path, cwd: Path) -> Path:
        from sweep import secrets

        text = script(self.settings, name, argv, job_dir, cwd)
        if secrets.found_in([text]):  # checked up front too (the key table, the sweeper): never written
            raise SubmitError("the job script would hold a secret (launcher.setup, launcher.command or the "
                              "command line): pass it through the environment instead")
        d = job_dir / "slurm"
        d.mkdir(parents=True, exist_ok=True)
        path = d / "job.sh"
        path.write_text(text)
        path.chmod(0o700)
        return path

    def _sbatch(self, options: list[str], path: Path) -> str:
        try:
            proc = subprocess.run(["sbatch", "--parsable", *options, str(path)], capture_output=True,
                                  text=True, timeout=SQUEUE_TIMEOUT_S, env=self.env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SubmitError(f"sbatch: {exc}") from None
        if proc.returncode != 0:
            raise SubmitError((proc.stderr or proc.stdout).strip() or f"sbatch exited {proc.returncode}")
        return proc.stdout.strip()

    def check(self, argv: Sequence[str], job_dir: Path, cwd: Path) -> None:
        """``sbatch --test-only``: SLURM judges the options (a partition it does not have, a
        time limit above the partition's) before any job is submitted. Raises SubmitError."""
        path = self._write(f"{self.settings.job_name}-check", argv, job_dir, cwd)
        try:
            opts = _options(self.settings, f"{self.settings.job_name}-check", job_dir, cwd)
            proc = subprocess.run(["sbatch", "--test-only", *opts, str(path)], capture_output=True,
                                  text=True, timeout=SQUEUE_TIMEOUT_S, env=self.env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SubmitError(f"sbatch: {exc}") from None
        finally:
            path.unlink(missing_ok=True)
            for d in (path.parent, job_dir):  # nothing of the check stays behind
                try:
                    d.rmdir()
                except OSError:
                    break
        if proc.returncode != 0:
            raise SubmitError((proc.stderr or proc.stdout).strip().splitlines()[-1]
                              if (proc.stderr or proc.stdout).strip() else
                              f"sbatch --test-only exited {proc.returncode}")

    def submit(self, name: str, argv: Sequence[str], job_dir: Path, cwd: Path) -> str:
        """One job for one trial: its script in ``<job_dir>/slurm/``; returns the job id."""
        path = self._write(name, argv, job_dir, cwd)
        job_id = self._sbatch(_options(self.settings, name, job_dir, cwd), path).split(";")[0]
        self.jobs[job_id] = _Job(job_id, name, job_dir,
                                 log_path=job_dir / "slurm" / f"slurm-{job_id}.out")
        self._tell_guard(f"+{job_id}")
        return job_id

    # -- the guard ----------------------------------------------------------------------------
    def _tell_guard(self, line: str) -> None:
        if line.startswith("-") and self._guard is None:
            return  # nothing to take off a list no guard holds
        if self._guard is None or self._guard.poll() is not None:
            self._guard = subprocess.Popen([sys.executable, "-m", "launchers._slurm_guard"],
                                           stdin=subprocess.PIPE, env=self.env,
                                           start_new_session=True, close_fds=True)
            for job in self.jobs.values():
                if job.state not in TERMINAL and f"+{job.job_id}" != line:
                    self._write_guard(f"+{job.job_id}")
        self._write_guard(line)

    def _write_guard(self, line: str) -> None:
        stdin: IO[bytes] | None = self._guard.stdin if self._guard is not None else None
        if stdin is None:
            return
        try:
            stdin.write((line + "\n").encode())
            stdin.flush()
        except OSError as exc:  # the guard died: a new one on the next submit
            log.warning("the SLURM job guard is gone (%s)", exc)

    # -- watching -----------------------------------------------------------------------------
    def _squeue(self) -> dict[str, tuple[str, str, str]] | None:
        """job id -> (state, node list, reason) of this user's jobs, finished ones included."""
        try:
            proc = subprocess.run(["squeue", "-h", "--states=all", "-u", getpass.getuser(), "-o",
                                   "%i|%T|%N|%r"], capture_output=True, text=True,
                                  timeout=SQUEUE_TIMEOUT_S, env=self.env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            out = None
            err = str(exc)
        else:
            out = proc.stdout if proc.returncode == 0 else None
            err = proc.stderr.strip()
        if out is None:
            if not self._squeue_failing:
                log.warning("squeue failed (%s); retrying (the jobs keep running)", err)
            self._squeue_failing = True
            return None
        if self._squeue_failing:
            log.info("squeue answers again")
        self._squeue_failing = False
        states = {}
        for line in out.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 4:
                states[parts[0]] = (parts[1], parts[2], parts[3])
        return states

    def poll(self) -> list[JobEnd]:
        """The jobs that ended since the last poll (each reported once)."""
        states = self._squeue()
        if states is None:
            return []
        ended = []
        for job in list(self.jobs.values()):
            seen = states.get(job.job_id)
            if seen is None:
                job.misses += 1
                if job.misses < MISSING_POLLS:
                    continue
                state, node = "GONE", job.node
            else:
                job.misses = 0
                state, node, why = seen
                node = node if node and node != "(null)" else job.node
                if state != job.state and state not in TERMINAL:
                    log.info("SLURM job %s (%s): %s%s", job.job_id, job.name, state,
                             f" on {node}" if node and state == "RUNNING" else
                             f" ({why})" if why and why != "None" else "")
                job.state, job.node, job.why = state, node, why
                if state not in TERMINAL:
                    continue
            ended.append(self._ended(job, state, node))
        return ended

    def _ended(self, job: _Job, state: str, node: str | None) -> JobEnd:
        del self.jobs[job.job_id]
        self._tell_guard(f"-{job.job_id}")
        signals = job.job_dir / "slurm" / "signals"
        noted = signals.read_text().split() if signals.exists() else []
        where = f"SLURM job {job.job_id}" + (f" on {node}" if node else "")
        reason: str | None
        if "time_limit" in noted or state in ("TIMEOUT", "DEADLINE"):
            reason, message = "time_limit", f"{where} reached its time limit ({state})"
        elif job.cancelled:
            reason, message = "interrupted", f"{where} was cancelled by its controller"
        elif state in _LOST or state == "GONE":
            reason = "preempted"
            message = f"{where} ended {state}" + (" (cancelled: scancel, or an administrator)"
                                                  if state == "CANCELLED" else
                                                  " (gone from squeue)" if state == "GONE" else "")
        elif state == "OUT_OF_MEMORY":
            reason, message = "oom", f"{where} ran out of memory (SLURM's memory limit)"
        else:
            reason, message = None, f"{where} ended {state}"
        return JobEnd(job.job_id, job.name, state, node, reason, message, job.log_path)

    # -- stopping -------------------------------------------------------------------------------
    def cancel(self, grace_s: float = 60.0) -> list[JobEnd]:
        """Cancel every job still out and wait (up to ``grace_s``) until SLURM has ended them
        (its SIGTERM reaches the app, which records the trial ``interrupted``)."""
        ids = [j.job_id for j in self.jobs.values()]
        if not ids:
            return []
        for job in self.jobs.values():
            job.cancelled = True
        subprocess.run(["scancel", *ids], capture_output=True, timeout=SQUEUE_TIMEOUT_S, env=self.env)
        ended: list[JobEnd] = []
        deadline = time.monotonic() + grace_s
        while self.jobs and time.monotonic() < deadline:
            ended += self.poll()
            if self.jobs:
                time.sleep(0.5)
        return ended

    def close(self) -> None:
        """No job is out any more (or the controller gives up on them): release the guard."""
        guard, self._guard = self._guard, None
        if guard is None:
            return
        if guard.stdin is not None:
            try:
                if not self.jobs:
                    guard.stdin.write(b"done\n")
                guard.stdin.close()
            except OSError:
                pass
        try:
            guard.wait(timeout=SQUEUE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            guard.kill()
