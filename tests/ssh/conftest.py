"""Fixtures for the ssh launcher tests: a real sshd on 127.0.0.1 and composed trials.

``ssh_box`` (session): keys, stand-ins and one running sshd. ``ssh_cfg``
builds launcher settings pointing at it; ``trial`` composes a trial exactly
like ``python -m sweep`` (server=sim on a free port, near-zero load time).
Every launcher made through ``make_launcher`` is stopped at teardown, so no
simulator outlives a test.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from _support import free_port, launcher_settings
from ssh_harness import SSHD, Keys, Sshd, write_standins

from sweep.compose.config import TrialConfig
from sweep.launch import LauncherSettings


@dataclass
class Box:
    root: Path
    keys: Keys
    sshd: Sshd
    bin_dir: Path
    unit_dir: Path
    state_dir: Path

    @property
    def port(self) -> int:
        return self.sshd.port

    def new_sshd(self, port: int | None = None) -> Sshd:
        return Sshd(self.keys, self.root, self.bin_dir, port=port).start()


@pytest.fixture(scope="session")
def ssh_box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    if not os.path.exists(SSHD) or shutil.which("ssh-keygen") is None:
        pytest.skip("OpenSSH server not installed (apt-get install -y openssh-server)")
    root = tmp_path_factory.mktemp("sshbox")
    os.chmod(root, 0o755)
    keys = Keys.create(root / "keys")
    unit_dir, state_dir = root / "units", root / "standin-state"
    unit_dir.mkdir()
    bin_dir = write_standins(root / "bin", state_dir, [unit_dir])
    sshd = Sshd(keys, root, bin_dir).start()
    box = Box(root=root, keys=keys, sshd=sshd, bin_dir=bin_dir, unit_dir=unit_dir, state_dir=state_dir)
    try:
        yield box
    finally:
        sshd.stop()


@pytest.fixture
def ssh_cfg(ssh_box: Box, tmp_path: Path) -> Callable[..., LauncherSettings]:
    """Launcher settings for the test sshd (override any key of conf/launcher/ssh.yaml)."""

    def make(**overrides: Any) -> LauncherSettings:
        port = overrides.pop("sshd_port", ssh_box.port)
        settings = {
            "name": "ssh", "host": "127.0.0.1", "port": port, "user": "root",
            "key_filename": str(ssh_box.keys.user), "gateway": None, "connect_timeout": 5,
            "known_hosts": str(ssh_box.keys.known_hosts(port)), "host_key_policy": "reject",
            "mode": "process", "unit": "specsweep-test.service", "unit_dir": str(ssh_box.unit_dir),
            "workdir": str(tmp_path / "remote"), "port_forward": False, "ready_timeout_s": 60,
            "poll_interval_s": 0.2, "poll_max_s": 0.5, "stop_grace_s": 5, "keep_server": False,
            "log_tail_lines": 40, "allow_agent": False, "min_free_gb": 0.01,
        }
        settings.update(overrides)
        return launcher_settings("ssh", **settings)

    return make


def compose_trial(*overrides: str) -> tuple[TrialConfig, Any]:
    """Compose, validate and render like ``python -m sweep`` does."""
    from sweep.compose.config import from_omegaconf
    from sweep.compose.cmdline import compose
    from sweep.compose.render import render

    trial = from_omegaconf(compose(list(overrides)))
    return trial, render(trial)


@pytest.fixture
def trial() -> Callable[..., tuple[TrialConfig, Any]]:
    """server=sim on a free port with 0.2 s load; extra overrides appended."""

    def make(*overrides: str) -> tuple[TrialConfig, Any]:
        base = ["server=sim", f"server.port={free_port()}", "server.sim.load_seconds=0.2",
                "workload=smoke"]
        return compose_trial(*base, *overrides)

    return make


@pytest.fixture
def make_launcher() -> Iterator[Callable[[LauncherSettings], Any]]:
    from launchers.ssh import SSHLauncher

    made: list[SSHLauncher] = []

    def make(settings: LauncherSettings) -> SSHLauncher:
        lau = SSHLauncher(settings)
        made.append(lau)
        return lau

    yield make
    for lau in made:
        lau.stop()
