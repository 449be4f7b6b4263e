"""Pre-flight checks over SSH: a wrong box fails before anything restarts; the doctor CLI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from _support import free_port

from launchers._ssh_preflight import arch_to_cap, looks_local
from launchers.base import LaunchFailure

B300_X8 = "".join("NVIDIA B300 SXM6, 10.3\n" for _ in range(8))


def _compose_trial(*overrides: str):
    """Compose, validate and render like ``python -m sweep`` (no import of a
    conftest module: several test folders have one, and the name is shared)."""
    from sweep.compose.config import from_omegaconf
    from sweep.compose.cmdline import compose
    from sweep.compose.render import render

    trial = from_omegaconf(compose(list(overrides)))
    return trial, render(trial)


@pytest.fixture
def gpus(ssh_box):
    """Make the nvidia-smi STAND-IN on the box report these GPUs (CSV lines)."""
    path = ssh_box.bin_dir / "gpus.csv"

    def set_gpus(text: str) -> None:
        path.write_text(text)

    yield set_gpus
    path.unlink(missing_ok=True)


def test_arch_names_map_to_compute_capability() -> None:
    assert arch_to_cap("sm_103") == "10.3"
    assert arch_to_cap("sm_90") == "9.0"
    assert arch_to_cap("sm_120") == "12.0"
    assert arch_to_cap("sm_100a") == "10.0"
    assert arch_to_cap("hopper") is None
    assert looks_local("/models/kimi") and looks_local("~/m") and not looks_local("moonshotai/Kimi-K2.6")


def _ssh_overrides(ssh_box, tmp_path: Path, *extra: str) -> list[str]:
    return ["launcher=ssh", "launcher.host=127.0.0.1", f"launcher.port={ssh_box.port}",
            "launcher.user=root", f"launcher.key_filename={ssh_box.keys.user}",
            f"launcher.known_hosts={ssh_box.keys.known_hosts(ssh_box.port)}",
            "launcher.mode=process", f"launcher.workdir={tmp_path / 'remote'}",
            "launcher.min_free_gb=0.01", f"server.port={free_port()}", *extra]


def _doctor(*overrides: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "sweep.doctor", *overrides], capture_output=True,
                          text=True, timeout=120, env=env)


def test_doctor_passes_for_the_simulator_and_skips_gpu_rows(ssh_box, tmp_path) -> None:
    res = _doctor(*_ssh_overrides(ssh_box, tmp_path, "server=sim"))
    assert res.returncode == 0, res.stdout + res.stderr
    for row in ("ssh", "host key verified", "gpus", "server is simulated", "python headers", "port",
                "process tools"):
        assert row in res.stdout


def test_doctor_checks_gpus_against_the_hardware(ssh_box, tmp_path, gpus) -> None:
    gpus(B300_X8)
    base = _ssh_overrides(ssh_box, tmp_path, "server=sglang", "launcher.mode=systemd")
    ok = _doctor(*base, "hardware=b300")
    assert "8 x NVIDIA B300 SXM6 (compute 10.3)" in ok.stdout
    assert ok.returncode == 0, ok.stdout + ok.stderr
    wrong = _doctor(*base, "hardware=h200")
    assert wrong.returncode == 1
    assert "hardware.arch=sm_90 needs 9.0" in wrong.stdout
    gpus("".join("NVIDIA B300 SXM6, 10.3\n" for _ in range(4)))
    fewer = _doctor(*base, "hardware=b300")
    assert fewer.returncode == 1 and "4 GPUs, hardware.num_gpus=8" in fewer.stdout


def test_doctor_reports_config_errors_in_one_line(tmp_path) -> None:
    res = _doctor("launcher=ssh", "launcher.mode=telnet", "launcher.host=x")
    assert res.returncode == 2
    assert res.stderr.strip().startswith("error: launcher.mode:")


def test_preflight_fails_before_any_start(ssh_box, ssh_cfg, trial, make_launcher, tmp_path,
                                          gpus) -> None:
    gpus(B300_X8)
    compose_trial = _compose_trial

    cfg, launch = compose_trial("server=sglang", "hardware=h200", "model.path=/nonexistent/kimi",
                                "launcher=ssh", "launcher.host=127.0.0.1")
    settings = ssh_cfg(mode="systemd", unit="specsweep-preflight.service")
    lau = make_launcher(settings)
    with pytest.raises(LaunchFailure) as err:
        lau.ensure(launch, cfg.server, tmp_path / "job")
    assert err.value.reason == "preflight"
    assert "model.path" in err.value.message and "hardware.arch=sm_90" in err.value.message
    assert not (ssh_box.unit_dir / "specsweep-preflight.service").exists()  # nothing written


def test_preflight_uses_the_trial_config_the_launch_carries(ssh_cfg, make_launcher, tmp_path) -> None:
    """The trial hands its config over with the launch (``launch.box``): no job dir file is read."""
    compose_trial = _compose_trial
    from sweep.compose.render import render

    job = tmp_path / "job"  # no .hydra/ in it
    cfg, launch = compose_trial("server=sglang", "model.path=/nonexistent/kimi")
    assert render(cfg).fingerprint == launch.fingerprint
    assert launch.box is not None and launch.box.model_path == "/nonexistent/kimi"
    lau = make_launcher(ssh_cfg())
    with pytest.raises(LaunchFailure) as err:
        lau.ensure(launch, cfg.server, job)
    assert err.value.reason == "preflight" and "model.path" in err.value.message


def test_port_taken_by_a_stranger_fails_preflight(ssh_cfg, trial, make_launcher, tmp_path) -> None:
    cfg, launch = trial()
    with socket.socket() as s:
        s.bind(("127.0.0.1", cfg.server.port))
        s.listen(1)
        with pytest.raises(LaunchFailure) as err:
            make_launcher(ssh_cfg()).ensure(launch, cfg.server, tmp_path / "job")
    assert err.value.reason == "preflight"
    assert f"{cfg.server.port} is already in use" in err.value.message


def test_doctor_runs_locally_for_launcher_local() -> None:
    res = _doctor(f"server.port={free_port()}")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "this machine (launcher=local)" in res.stdout and "ssh" not in res.stdout.split("┃")[0]


def test_secrets_in_the_launcher_config_are_refused(ssh_cfg) -> None:
    """Refused when the settings are built (before any connection), naming the variable to use."""
    from sweep.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        ssh_cfg(password="hunter2")
    assert err.value.key == "launcher.password" and "SPECSWEEP_SSH_PASSWORD" in err.value.message
    assert "hunter2" not in str(err.value)
