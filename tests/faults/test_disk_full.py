"""A disk that fills up mid-trial: one line saying so, not a traceback (issue 11, section 7).

For real, as root: a 2 MiB tmpfs is mounted on the run's directory, ``python
-m sweep`` runs there on the simulator, and once the server is up (its
record is in result.json) the disk is filled to the last byte. The next
rewrite of result.json fails: the run must print one line naming the file
and the free space, exit 1, keep the last good result.json (atomic writes:
no half-written file, no temporary left behind) and stop its server.

The same run is also made under RLIMIT_FSIZE, without root: once the server
is recorded, the running controller's file size limit is set to the size
result.json has then (prlimit), so its next, larger rewrite fails with EFBIG,
which the harness treats like a full disk; that test is named so.
"""

from __future__ import annotations

import os
import re
import resource
from pathlib import Path

import pytest

from faults.fault_runs import Run, controller_pid, fill, free_disk_mount, server_recorded, sweep, unmount

pytestmark = pytest.mark.slow


def _one_line_and_nothing_lost(run: Run, says: str) -> None:
    try:
        assert run.proc.returncode == 1, run.proc.stderr[-3000:]
        assert "Traceback" not in run.output and "Logging error" not in run.output, run.output[-3000:]
        errors = run.error_lines
        assert len(errors) == 1, run.proc.stderr[-3000:]
        assert re.fullmatch(f"error: {says}; the results written before are intact", errors[0]), errors[0]
        [doc] = run.results  # the last good version, whole
        assert run.lost == [] and doc["status"] == "running" and doc["server"]["base_url"]
        assert list(run.out_dir.glob(".result-*")) == []
        assert run.orphans() == {}
        assert run.secrets_found() == []
    finally:
        run.cleanup()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root (see the RLIMIT_FSIZE test)")
def test_a_full_disk_mid_trial_is_one_line_and_the_last_result_stays(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    if not free_disk_mount(disk, "2m"):
        pytest.skip("cannot mount a tmpfs here")
    filled: list[str] = []

    def fill_once_the_server_is_recorded(out_dir: Path) -> None:
        if server_recorded(out_dir):
            filled.append(fill(disk))

    try:
        run = sweep(disk, "server.sim.time_scale=3", during=fill_once_the_server_is_recorded)
        assert filled and "No space left on device" in filled[0], run.proc.stderr[-3000:]
        # what is free once the failed write's temporary file is gone: a page or so
        _one_line_and_nothing_lost(run, re.escape(f"disk full: cannot write {run.out_dir / 'result.json'} (")
                                   + r"\d+(\.\d)? (bytes|KiB) " + re.escape(f"free on {disk}; No space left on device)"))
    finally:
        unmount(disk)


def test_a_file_size_limit_mid_trial_stands_in_for_a_full_disk_rlimit_fsize(tmp_path: Path) -> None:
    """RLIMIT_FSIZE, not a real full disk: once the server is recorded, the controller may not
    write a file larger than result.json is now (prlimit on the running process), so the next,
    larger rewrite fails with EFBIG, handled like a full disk."""
    limited: list[int] = []

    def limit_once_the_server_is_recorded(out_dir: Path) -> None:
        if server_recorded(out_dir) and (pid := controller_pid(out_dir)) is not None:
            size = (out_dir / "result.json").stat().st_size + 64
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (size, size))
            limited.append(size)

    run = sweep(tmp_path, "server.sim.time_scale=3", during=limit_once_the_server_is_recorded)
    assert limited, run.proc.stderr[-3000:]
    _one_line_and_nothing_lost(run, re.escape(f"file size limit: cannot write {run.out_dir / 'result.json'} "
                                              f"(RLIMIT_FSIZE {limited[0] / 1024:.1f} KiB; File too large)"))
