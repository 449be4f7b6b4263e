"""launcher=ssh, mode=systemd, through the real sshd with the systemctl/journalctl STAND-IN.

The stand-in (tests/ssh/systemd_standin.py) parses the unit with systemd's
rules and runs its ExecStart; these tests check that what it reconstructs is
the rendered launch word for word, and that the real simulator comes up,
is reused, restarted, crashes with a classified reason and stops.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from launchers.base import LaunchFailure

UNIT = "specsweep-test.service"


def _loaded(box, unit: str = UNIT) -> dict:
    return json.loads((box.state_dir / unit / "loaded.json").read_text())


def _state(box, unit: str = UNIT) -> str:
    return subprocess.run([str(box.bin_dir / "systemctl"), "is-active", unit],
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture
def systemd_cfg(ssh_cfg, ssh_box, tmp_path):
    def make(**kw):
        return ssh_cfg(mode="systemd", unit=kw.pop("unit", UNIT), unit_dir=str(ssh_box.unit_dir),
                       workdir=str(tmp_path / "remote"), **kw)
    return make


def test_unit_start_reuse_restart_stop(ssh_box, systemd_cfg, trial, make_launcher, tmp_path,
                                       monkeypatch) -> None:
    monkeypatch.setenv("SPECSWEEP_API_KEY", "sk-sentinel-systemd-77")
    settings = systemd_cfg()
    cfg, launch = trial()
    assert "sk-sentinel-systemd-77" in launch.argv
    lau = make_launcher(settings)
    handle = lau.ensure(launch, cfg.server, tmp_path / "job0")
    assert not handle.reused
    unit_file = ssh_box.unit_dir / UNIT
    text = unit_file.read_text()
    assert f"fingerprint={launch.fingerprint}" in text
    assert "sk-sentinel" not in text  # the key lives in the 0600 environment file
    env_file = Path(settings.ssh.workdir) / f"{UNIT}.secrets.env"
    assert oct(env_file.stat().st_mode & 0o777) == "0o600"
    loaded = _loaded(ssh_box)
    assert loaded["argv"] == launch.argv  # systemd's parse of ExecStart == the rendered argv
    assert {k: loaded["env"][k] for k in launch.env} == dict(launch.env)
    headers = {"Authorization": "Bearer sk-sentinel-systemd-77"}
    assert httpx.get(handle.base_url + "/health", headers=headers, timeout=5).status_code == 200
    assert _state(ssh_box) == "active"

    # the trial window comes from journalctl --since <mark>
    import time
    time.sleep(1.1)  # journalctl --since has one-second resolution
    mark = lau.log_mark()
    httpx.post(handle.base_url + "/v1/completions", headers=headers, timeout=30,
               json={"model": cfg.model.served_name, "prompt": "hi", "max_tokens": 200})
    window = lau.log_since(mark)
    assert "sk-sentinel" not in window
    startup = handle.log_path.read_text()
    assert startup and "sk-sentinel" not in startup

    again = make_launcher(settings).ensure(launch, cfg.server, tmp_path / "job1")
    assert again.reused

    cfg2, launch2 = trial(f"server.port={cfg.server.port}", "spec.budget=4")
    restarted = lau.ensure(launch2, cfg2.server, tmp_path / "job2")
    assert not restarted.reused and _loaded(ssh_box)["argv"] == launch2.argv

    lau.stop()
    assert _state(ssh_box) == "inactive"
    with pytest.raises(httpx.HTTPError):
        httpx.get(restarted.base_url + "/health", timeout=2)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_written_unit_passes_systemd_analyze_verify(ssh_box, systemd_cfg, trial, make_launcher,
                                                    tmp_path) -> None:
    cfg, launch = trial()
    lau = make_launcher(systemd_cfg(unit="specsweep-verify-e2e.service"))
    lau.ensure(launch, cfg.server, tmp_path / "job")
    unit = ssh_box.unit_dir / "specsweep-verify-e2e.service"
    res = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr


def test_dropin_for_an_existing_unit_is_removed_at_stop(ssh_box, systemd_cfg, trial, make_launcher,
                                                        tmp_path) -> None:
    unit = "sglang-k26-ddtree.service"
    (ssh_box.unit_dir / unit).write_text(
        "[Unit]\nDescription=the box's own server\n\n[Service]\nEnvironment=\"BOX_OWN=1\"\n"
        "ExecStart=/bin/false\nRestart=always\n")
    cfg, launch = trial()
    lau = make_launcher(systemd_cfg(unit=unit, dropin=True))
    handle = lau.ensure(launch, cfg.server, tmp_path / "job")
    dropin = ssh_box.unit_dir / f"{unit}.d" / "50-specsweep.conf"
    assert dropin.exists() and "ExecStart=\n" in dropin.read_text()
    loaded = _loaded(ssh_box, unit)
    assert loaded["argv"] == launch.argv and loaded["env"]["BOX_OWN"] == "1"
    assert httpx.get(handle.base_url + "/health", timeout=5).status_code == 200
    lau.stop()
    assert not dropin.exists()
    assert _loaded(ssh_box, unit)["argv_raw"] == ["/bin/false"]  # daemon-reload after removal


def test_crash_under_systemd_is_classified_from_the_journal(ssh_box, systemd_cfg, trial,
                                                            make_launcher, tmp_path) -> None:
    cfg, launch = trial("hardware=b300", "spec=ddtree", "spec.budget=16")
    lau = make_launcher(systemd_cfg(unit="specsweep-crash.service"))
    with pytest.raises(LaunchFailure) as err:
        lau.ensure(launch, cfg.server, tmp_path / "job")
    assert err.value.reason == "cuda_graph", err.value
    assert "cuda graph" in err.value.log_tail.lower()
    assert "exited with status" in err.value.message
    assert _state(ssh_box, "specsweep-crash.service") in ("failed", "inactive")
