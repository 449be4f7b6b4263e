"""A controller's child command dies with it (launchers.local.run_tied).

``python -m sweep.verify_dynamic``, ``benchmarks/record_landscape.py`` and
``benchmarks/dynamic_sd.py`` drive ``python -m sweep`` trials; a SIGKILLed or
SIGTERMed controller left its trial -- and so its vLLM server -- running (seen on
this box: a stopped recording's server kept serving a minute later). Real
processes here: a controller process running a child that would sleep for ten
minutes; the controller is killed and the child must be gone within seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CONTROLLER = """
import sys
from launchers.local import run_tied
child = [sys.executable, "-c", "import os, time; print(os.getpid(), flush=True); time.sleep(600)"]
run_tied(child, stdout=open(sys.argv[1], "w"))
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_the_child_goes_when_its_controller_is_killed(tmp_path: Path, sig: int) -> None:
    out = tmp_path / "child.pid"
    ctl = subprocess.Popen([sys.executable, "-c", CONTROLLER, str(out)], cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    while not (out.exists() and out.read_text().strip()):
        assert time.monotonic() < deadline and ctl.poll() is None, "the child never started"
        time.sleep(0.1)
    child = int(out.read_text().split()[0])
    assert _alive(child)
    ctl.send_signal(sig)
    ctl.wait(timeout=30)
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _alive(child)
    if alive:
        os.kill(child, signal.SIGKILL)
    assert not alive, f"the child outlived its controller ({signal.Signals(sig).name})"


def test_an_exception_in_the_controller_stops_the_child_and_the_status_is_kept(tmp_path: Path) -> None:
    from launchers.local import run_tied

    assert run_tied([sys.executable, "-c", "raise SystemExit(3)"]) == 3
    with pytest.raises(subprocess.TimeoutExpired):
        run_tied([sys.executable, "-c", "import time; time.sleep(600)"], timeout=1, stop_grace_s=5)
