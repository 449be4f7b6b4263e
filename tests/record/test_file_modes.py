"""Files a run writes follow the user's umask, as any file they write would.

The atomic writer made its temporary file with ``mkstemp`` (0600) and renamed it:
report.html, result.json, schedule.yaml stayed unreadable to a colleague on a
shared box. The local launcher's server state file stays the user's alone.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.io.atomic import write_atomic, write_atomic_text

ROOT = Path(__file__).resolve().parents[2]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield
    os.umask(old)


def test_atomic_writes_take_the_umask_and_private_ones_stay_0600(tmp_path: Path, umask_027: None) -> None:
    assert _mode(write_atomic(tmp_path / "result.json", {"a": 1})) == 0o640
    assert _mode(write_atomic_text(tmp_path / "report.html", "<p>x</p>")) == 0o640
    assert _mode(write_atomic(tmp_path / "state.json", {"pid": 1}, private=True)) == 0o600
    os.umask(0o002)  # a group-writable umask is honoured too (a shared project dir)
    assert _mode(write_atomic_text(tmp_path / "schedule.yaml", "x: 1\n")) == 0o664
    assert not list(tmp_path.glob(".result-*"))  # no temporary file left


def test_a_real_run_writes_every_file_by_the_umask(tmp_path: Path) -> None:
    """``python -m sweep`` on the simulator under umask 027: result.json, report.html, the plots,
    Hydra's files -- all 0640, none 0600."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    out = subprocess.run(["bash", "-c", f"umask 027 && exec {sys.executable} -m sweep workload=smoke "
                          "workload.coding=off mlflow.enabled=false"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    files = [p for p in (tmp_path / "outputs").rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"result.json", "report.html", "config.yaml"} <= names, names
    assert any(p.suffix == ".png" for p in files), names
    wrong = {str(p.relative_to(tmp_path)): oct(_mode(p)) for p in files if _mode(p) != 0o640}
    assert not wrong, wrong
