"""launcher=ssh, mode=process, end to end through a real sshd with the real simulator."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from launchers.base import LaunchFailure
from launchers.local import group_alive


def _run_dir(settings) -> Path:
    return Path(settings.ssh.workdir) / "run"


def test_start_reuse_stop(ssh_cfg, trial, make_launcher, tmp_path: Path) -> None:
    settings = ssh_cfg()
    cfg, launch = trial()
    lau = make_launcher(settings)
    handle = lau.ensure(launch, cfg.server, tmp_path / "job0")
    assert not handle.reused and handle.fingerprint == launch.fingerprint
    assert httpx.get(handle.base_url + "/health", timeout=5).status_code == 200
    pgid = int((_run_dir(settings) / "pid").read_text())
    assert handle.pid == pgid and group_alive(pgid)
    assert (_run_dir(settings) / "fingerprint").read_text().strip() == launch.fingerprint
    assert oct((_run_dir(settings) / "run.sh").stat().st_mode & 0o777) == "0o700"
    assert lau.alive()

    # the trial window of the log
    mark = lau.log_mark()
    httpx.post(handle.base_url + "/v1/completions", timeout=30,
               json={"model": cfg.model.served_name, "prompt": "hello", "max_tokens": 64})
    window = lau.log_since(mark)
    assert "startup" not in window.lower() or window  # only what came after the mark
    assert handle.log_path is not None and handle.log_path.exists()

    # same fingerprint: reused, even by a fresh launcher (another sweep process)
    again = make_launcher(settings).ensure(launch, cfg.server, tmp_path / "job1")
    assert again.reused and again.pid == pgid

    # a server-affecting change restarts
    cfg2, launch2 = trial(f"server.port={cfg.server.port}", "spec.budget=4")
    restarted = lau.ensure(launch2, cfg2.server, tmp_path / "job2")
    assert not restarted.reused and restarted.pid != pgid
    assert not group_alive(pgid)

    lau.stop()
    assert not group_alive(restarted.pid)
    assert not (_run_dir(settings) / "pid").exists()
    lau.stop()  # idempotent


def test_crash_is_classified_with_log_tail(ssh_cfg, trial, make_launcher, tmp_path: Path) -> None:
    settings = ssh_cfg()
    cfg, launch = trial("hardware=b300", "spec=ddtree", "spec.budget=16")
    lau = make_launcher(settings)
    with pytest.raises(LaunchFailure) as err:
        lau.ensure(launch, cfg.server, tmp_path / "job")
    assert err.value.reason == "cuda_graph", err.value
    assert "cuda graph" in err.value.log_tail.lower()
    assert "disable_cuda_graph" in err.value.message
    assert not (_run_dir(settings) / "pid").exists() or not lau.alive()


def test_keyboard_interrupt_while_starting_stops_the_server(ssh_cfg, trial, make_launcher,
                                                            tmp_path: Path, monkeypatch) -> None:
    settings = ssh_cfg()
    cfg, launch = trial("server.sim.load_seconds=30")
    lau = make_launcher(settings)
    import launchers.ssh as ssh_mod

    calls = {"n": 0}
    real = ssh_mod.wait_ready

    def interrupted(*a, **kw):
        calls["n"] += 1
        kw["alive"]()
        raise KeyboardInterrupt

    monkeypatch.setattr(ssh_mod, "wait_ready", interrupted)
    with pytest.raises(KeyboardInterrupt):
        lau.ensure(launch, cfg.server, tmp_path / "job")
    monkeypatch.setattr(ssh_mod, "wait_ready", real)
    pid_file = _run_dir(settings) / "pid"
    assert not pid_file.exists()
    assert calls["n"] == 1
