"""SSH failures become failed trials with their own reason -- against a real sshd."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from _support import free_port
from ssh_harness import PASSPHRASE

from launchers.base import LaunchFailure
from launchers.local import group_alive


def _fail(lau, cfg, launch, job: Path) -> LaunchFailure:
    with pytest.raises(LaunchFailure) as err:
        lau.ensure(launch, cfg.server, job)
    return err.value


def test_wrong_key_is_ssh_auth(ssh_box, ssh_cfg, trial, make_launcher, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SPECSWEEP_SSH_PASSWORD", "pw-sentinel-0451")
    cfg, launch = trial()
    failure = _fail(make_launcher(ssh_cfg(key_filename=str(ssh_box.keys.wrong))), cfg, launch, tmp_path)
    assert failure.reason == "ssh_auth"
    assert "pw-sentinel-0451" not in failure.message


def test_missing_key_file_is_ssh_auth(ssh_cfg, trial, make_launcher, tmp_path) -> None:
    cfg, launch = trial()
    failure = _fail(make_launcher(ssh_cfg(key_filename=str(tmp_path / "nope"))), cfg, launch, tmp_path)
    assert failure.reason == "ssh_auth" and "does not exist" in failure.message


def test_encrypted_key_needs_the_passphrase_from_the_environment(
        ssh_box, ssh_cfg, trial, make_launcher, tmp_path, monkeypatch) -> None:
    cfg, launch = trial()
    settings = ssh_cfg(key_filename=str(ssh_box.keys.user_encrypted))
    monkeypatch.delenv("SPECSWEEP_SSH_PASSPHRASE", raising=False)
    assert _fail(make_launcher(settings), cfg, launch, tmp_path).reason == "ssh_auth"
    monkeypatch.setenv("SPECSWEEP_SSH_PASSPHRASE", PASSPHRASE)
    lau = make_launcher(settings)
    assert lau.probe(launch) == (False, False)  # connected: nothing of ours runs yet


def test_closed_port_is_ssh_unreachable(ssh_cfg, trial, make_launcher, tmp_path) -> None:
    cfg, launch = trial()
    failure = _fail(make_launcher(ssh_cfg(sshd_port=free_port())), cfg, launch, tmp_path)
    assert failure.reason == "ssh_unreachable" and "refused" in failure.message


def test_changed_host_key_is_ssh_host_key(ssh_box, ssh_cfg, trial, make_launcher, tmp_path) -> None:
    cfg, launch = trial()
    other = ssh_box.keys.known_hosts(ssh_box.port, other=True)
    failure = _fail(make_launcher(ssh_cfg(known_hosts=str(other))), cfg, launch, tmp_path)
    assert failure.reason == "ssh_host_key" and "does not match" in failure.message


def test_unknown_host_is_rejected_by_default_and_accept_new_records_it(
        ssh_box, ssh_cfg, trial, make_launcher, tmp_path) -> None:
    cfg, launch = trial()
    known = tmp_path / "known_hosts"
    failure = _fail(make_launcher(ssh_cfg(known_hosts=str(known))), cfg, launch, tmp_path)
    assert failure.reason == "ssh_host_key" and "accept-new" in failure.message
    lau = make_launcher(ssh_cfg(known_hosts=str(known), host_key_policy="accept-new"))
    assert lau.probe(launch) == (False, False)
    assert f"[127.0.0.1]:{ssh_box.port} ssh-ed25519" in known.read_text()
    # now known: the strict policy accepts it
    assert make_launcher(ssh_cfg(known_hosts=str(known))).probe(launch) == (False, False)


def test_sshd_killed_mid_start_is_ssh_dropped_and_stop_recovers(
        ssh_box, ssh_cfg, trial, make_launcher, tmp_path) -> None:
    sshd = ssh_box.new_sshd()
    settings = ssh_cfg(sshd_port=sshd.port, known_hosts=str(ssh_box.keys.known_hosts(sshd.port)))
    cfg, launch = trial("server.sim.load_seconds=4")
    lau = make_launcher(settings)
    pid_file = Path(settings.ssh.workdir) / "run" / "pid"

    def kill_when_started() -> None:
        deadline = time.monotonic() + 20
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        sshd.kill_all()

    killer = threading.Thread(target=kill_when_started)
    killer.start()
    try:
        failure = _fail(lau, cfg, launch, tmp_path / "job")
    finally:
        killer.join()
    assert failure.reason == "ssh_dropped", failure
    pgid = int(pid_file.read_text())
    assert group_alive(pgid)  # out of reach, still running on the box
    sshd.start()  # the box comes back on the same port
    try:
        lau.stop()  # reconnects and stops what it started
        assert not group_alive(pgid)
    finally:
        sshd.stop()


def test_drop_after_start_fails_log_reads_and_stop_warns_instead_of_raising(ssh_box, ssh_cfg, trial, make_launcher,
                                                          tmp_path, caplog) -> None:
    sshd = ssh_box.new_sshd()
    settings = ssh_cfg(sshd_port=sshd.port, known_hosts=str(ssh_box.keys.known_hosts(sshd.port)))
    cfg, launch = trial()
    lau = make_launcher(settings)
    handle = lau.ensure(launch, cfg.server, tmp_path / "job")
    mark = lau.log_mark()
    sshd.kill_all()
    with pytest.raises(LaunchFailure) as err:  # mid-benchmark: the trial fails as ssh_dropped
        lau.log_since(mark)
    assert err.value.reason == "ssh_dropped"
    lau.stop()  # must not raise: the trial's finally and atexit call it
    assert "may still be running" in caplog.text
    assert group_alive(handle.pid)
    sshd.start()
    try:
        lau.stop()
        assert not group_alive(handle.pid)
    finally:
        sshd.stop()
