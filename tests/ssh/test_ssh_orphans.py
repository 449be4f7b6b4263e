"""launcher=ssh, mode=process: a killed controller does not leave its remote server running.

Real sshd on 127.0.0.1, the real simulator, controllers in subprocesses killed
with a real SIGKILL. The box is this machine, so the remote process group is
checked directly. What the watchdog cannot cover (a connection that dies
silently, sshd killed with it) is documented in launchers/_ssh_watchdog.py.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from launchers.local import group_alive

CONTROLLER = r"""
import base64, json, pickle, sys, time
from pathlib import Path
import launchers
from sweep.compose.cmdline import compose
from sweep.compose.config import from_omegaconf
from sweep.compose.render import render
settings = pickle.loads(base64.b64decode(sys.argv[1]))
overrides, job, linger = json.loads(sys.argv[2])
trial = from_omegaconf(compose(overrides))
lau = launchers.get_launcher(settings)
h = lau.ensure(render(trial), trial.server, Path(job))
print(h.pid, flush=True)
time.sleep(linger)
launchers.stop_all()  # a normal end, as the app's (keep_server: the server is handed over)
"""


def _controller(settings: Any, overrides: list[str], job: Path, linger: float) -> tuple[subprocess.Popen[str], int]:
    typed = base64.b64encode(pickle.dumps(settings)).decode()  # the very settings the test built
    arg = json.dumps([overrides, str(job), linger])
    proc = subprocess.Popen([sys.executable, "-c", CONTROLLER, typed, arg], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.strip().isdigit():
        proc.kill()
        raise AssertionError(f"controller failed: {line}{proc.communicate()[1][-3000:]}")
    return proc, int(line)


def _sim(trial: Any) -> list[str]:
    cfg, _ = trial()
    return ["server=sim", f"server.port={cfg.server.port}", "server.sim.load_seconds=0.2",
            "workload=smoke"]


def _gone_within(pgid: int, seconds: float) -> float | None:
    t0 = time.monotonic()
    while group_alive(pgid):
        if time.monotonic() - t0 > seconds:
            return None
        time.sleep(0.05)
    return time.monotonic() - t0


def _kill(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


def test_a_sigkilled_controller_stops_its_remote_server(ssh_cfg, trial, tmp_path: Path) -> None:
    settings = ssh_cfg(remote_lease_s=1, reap_grace_s=1)
    proc, pgid = _controller(settings, _sim(trial), tmp_path / "job", 600)
    try:
        assert group_alive(pgid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        # lease 1 s + grace 1 s, plus sshd noticing the closed connection: well within 15 s
        assert _gone_within(pgid, 15.0) is not None, "the remote server outlived its controller"
        log = Path(settings.ssh.workdir) / "run" / "server.log"
        deadline = time.monotonic() + 10  # the watchdog notes it once it is done
        while "remote watchdog: the controller's SSH session ended" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.05)
    finally:
        proc.kill()
        _kill(pgid)


def test_a_controller_that_reconnects_within_the_lease_keeps_its_server(
        ssh_box, ssh_cfg, trial, make_launcher, tmp_path: Path) -> None:
    sshd = ssh_box.new_sshd()
    settings = ssh_cfg(sshd_port=sshd.port, known_hosts=str(ssh_box.keys.known_hosts(sshd.port)),
                       remote_lease_s=8, reap_grace_s=1)
    cfg, launch = trial()
    lau = make_launcher(settings)
    try:
        handle = lau.ensure(launch, cfg.server, tmp_path / "job")
        sshd.kill_all()  # every session drops: the watchdog reads EOF, its lease starts
        sshd.start()
        assert lau.alive()  # reconnects and arms a new watchdog, which takes over
        time.sleep(8 + 1 + 2)  # past the old watchdog's lease and grace: it must have left
        assert group_alive(handle.pid)
        assert "remote watchdog" not in (Path(settings.ssh.workdir) / "run" / "server.log").read_text()
        lau.stop()
        assert not group_alive(handle.pid)
    finally:
        lau.stop()
        sshd.stop()


def test_a_kept_remote_server_outlives_a_normal_exit(ssh_cfg, trial, make_launcher,
                                                     tmp_path: Path) -> None:
    settings = ssh_cfg(remote_lease_s=1, reap_grace_s=1, keep_server=True)
    overrides = _sim(trial)
    proc, pgid = _controller(settings, overrides, tmp_path / "job", 0)
    try:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err[-3000:]
        assert "keep_server:" in err and "stays up after this run" in err
        time.sleep(1 + 1 + 2)  # past lease and grace: a watchdog that was not released would act
        assert group_alive(pgid)
    finally:
        _kill(pgid)
