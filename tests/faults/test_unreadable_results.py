"""Nothing is skipped silently: an unreadable result.json is named, one line on stderr (issue 11, section 7; 32).

A sweep dir with two real result documents (``record.result_docs``: built the
way the trial builds them, written atomically) and, beside them, the ways a
result file can be broken: truncated mid-write, empty, not a JSON object,
without a status, with a status no version wrote, binary garbage, a
directory where the file should be. ``python -m sweep.sync`` and
``python -m sweep.report --dir`` run as real subprocesses: both name every
broken file (report: ``skipped <path>: <why>``; sync counts it failed) and exit
1, and still handle the good ones.
"""

from __future__ import annotations

import re

import subprocess
import sys
from pathlib import Path

import pytest
from _support import subprocess_env

from faults.fault_runs import broken_sweep

pytestmark = pytest.mark.slow


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=subprocess_env(COLUMNS="300"),
                          capture_output=True, text=True, timeout=300)


def test_sync_and_report_name_every_unreadable_file_and_exit_non_zero(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "multirun" / "2026-01-01" / "12-00-00"
    bad = broken_sweep(sweep_dir)
    before = {p: p.read_bytes() for p in bad if p.is_file()}

    report = run(tmp_path, "sweep.report", "--dir", str(tmp_path / "multirun"))
    assert report.returncode == 1, report.stdout[-3000:] + report.stderr[-3000:]
    err = report.stderr  # one line per file on stderr (sweep/io/readback.py), the table on stdout
    for path in bad:
        assert sum(line.startswith(f"skipped {path}: ") for line in err.splitlines()) == 1, err[-3000:]
    assert f"2 trials shown; {len(bad)} result files skipped (unreadable, named above)" in err
    out = report.stdout
    # the good ones are shown, named without what both share (the box, ddtree, t4, w2048, the workload)
    assert re.search(r"│ b8 +│", out) and re.search(r"│ b4 +│", out), out[-3000:]
    assert "Traceback" not in out + report.stderr

    sync = run(tmp_path, "sweep.sync", str(tmp_path / "multirun"), "--tracking-uri",
               f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert sync.returncode == 1, sync.stderr[-3000:]
    for path in bad:
        assert f"failed   {path}: unreadable result file" in sync.stderr, sync.stderr[-3000:]
    assert f"2 uploaded, 0 linked to existing runs, 0 already in MLflow, 0 skipped, {len(bad)} failed" in sync.stderr
    assert "Traceback" not in sync.stdout + sync.stderr
    assert {p: p.read_bytes() for p in before} == before  # named, never rewritten
