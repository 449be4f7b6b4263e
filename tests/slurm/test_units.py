"""launcher=slurm without a cluster: the job script, and what each way a job ends means."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from _support import launcher_settings
from launchers.slurm import SlurmJobs, _Job, _options, script


def _settings(**over: object):  # type: ignore[no-untyped-def]
    return launcher_settings("slurm", **over)


def test_the_job_script_runs_the_app_under_two_traps(tmp_path: Path) -> None:
    s = _settings(sbatch={"partition": "gpu", "gres": "gpu:8", "time": "02:00:00", "exclusive": True},
                  sbatch_extra=["--reservation=spec"], setup=["module load cuda/12.8"], signal_s=90)
    argv = ["/venv/bin/python", "-m", "sweep", "-m", "x='a b'", "y=$(id)"]
    text = script(s.slurm, "specsweep-3", argv, tmp_path / "3", Path("/work dir"))
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert "#SBATCH --partition=gpu" in lines and "#SBATCH --gres=gpu:8" in lines
    assert "#SBATCH --time=02:00:00" in lines and "#SBATCH --exclusive" in lines
    assert "#SBATCH --signal=B:USR1@90" in lines and "#SBATCH --no-requeue" in lines
    assert "#SBATCH --reservation=spec" in lines
    assert lines.index("module load cuda/12.8") < next(i for i, ln in enumerate(lines)
                                                       if ln.startswith("/venv/bin/python"))
    app = next(ln for ln in lines if ln.startswith("/venv/bin/python"))
    assert shlex.split(app[:-2]) == argv  # every word quoted: nothing of it is shell
    # The shell itself accepts the script, and the traps are in place before the app starts.
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)
    assert text.index("trap ") < text.index(app)


def test_no_signal_without_a_time_limit(tmp_path: Path) -> None:
    s = _settings(sbatch={"exclusive": False})
    opts = _options(s.slurm, "n", tmp_path, tmp_path)
    assert not any(o.startswith("--signal") for o in opts) and "--exclusive" not in opts


@pytest.mark.parametrize(("state", "noted", "cancelled", "reason"), [
    ("COMPLETED", "", False, None),
    ("FAILED", "", False, None),
    ("FAILED", "time_limit\n", False, "time_limit"),
    ("TIMEOUT", "", False, "time_limit"),
    ("CANCELLED", "", False, "preempted"),
    ("NODE_FAIL", "", False, "preempted"),
    ("PREEMPTED", "", False, "preempted"),
    ("GONE", "", False, "preempted"),
    ("CANCELLED", "", True, "interrupted"),
    ("OUT_OF_MEMORY", "", False, "oom"),
])
def test_what_a_job_end_means(tmp_path: Path, state: str, noted: str, cancelled: bool,
                              reason: str | None) -> None:
    jobs = SlurmJobs(_settings(), env={})
    job = _Job("7", "specsweep-7", tmp_path, cancelled=cancelled)
    if noted:
        (tmp_path / "slurm").mkdir()
        (tmp_path / "slurm" / "signals").write_text(noted)
    jobs.jobs["7"] = job
    end = jobs._ended(job, state, "n2")
    assert end.reason == reason and "7" not in jobs.jobs
    assert "n2" in end.message and jobs._guard is None  # nothing was ever submitted: no guard
