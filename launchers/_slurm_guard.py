"""Cancels a controller's SLURM jobs when the controller dies, however it dies.

``python -m launchers._slurm_guard`` is started by :class:`launchers.slurm.SlurmJobs`
in a session of its own (the terminal's Ctrl-C does not reach it), with a
pipe from the controller on its stdin. The controller writes ``+<job id>``
for each job it submits, ``-<job id>`` when a job has ended, and ``done``
before it closes the pipe on a normal end. When the pipe closes without
``done`` -- the controller was SIGKILLed, hit by the OOM killer, or stopped
with jobs still out -- the kernel closes its end, our read returns EOF, and
the jobs still listed are cancelled with ``scancel`` (SIGTERM to the trial,
which records ``interrupted`` and stops its server; SIGKILL after the
cluster's ``KillWait``). Why a pipe: its EOF is immediate and needs no polling,
pid-reuse check or heartbeat file.
"""

from __future__ import annotations

import signal
import subprocess
import sys


def main() -> int:
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # only the pipe ends this process
    out: dict[str, None] = {}
    for raw in sys.stdin:
        line = raw.strip()
        if line == "done":
            return 0
        if line.startswith("+"):
            out[line[1:]] = None
        elif line.startswith("-"):
            out.pop(line[1:], None)
    if out:
        ids = sorted(out)
        proc = subprocess.run(["scancel", *ids], capture_output=True, text=True, timeout=120)
        print(f"specsweep: the controller is gone; cancelled SLURM job(s) {' '.join(ids)}"
              + (f" ({proc.stderr.strip()})" if proc.returncode else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
