"""LocalLauncher with real processes: start, fail fast, reuse, restart, stop the whole group."""

from __future__ import annotations

import os
import re
import signal
import socket
import sys
import time
from pathlib import Path

import pytest
from launcher_helpers import (free_port, make_server, pid_gone, script_launch, settings, toy_launch,
                              wait_until)

from launchers.base import LaunchFailure
from launchers.local import LocalLauncher, group_alive

OOM_SCRIPT = r"""
import sys, time
print("[2026-05-02 10:00:09 TP0] Load weight begin. avail mem=270.11 GB", flush=True)
time.sleep(0.2)
print("Traceback (most recent call last):", file=sys.stderr)
print('  File "memory_pool.py", line 512, in _create_buffers', file=sys.stderr)
print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 30.00 GiB.", file=sys.stderr)
sys.exit(1)
"""

BAD_FLAG_SCRIPT = (
    "import argparse; p = argparse.ArgumentParser(prog='launch_server.py'); "
    "p.add_argument('--port'); p.parse_args()"
)


def _assert_group_gone(pgid: int) -> None:
    """No process of the group runs: killpg finds nobody, or only unreaped zombies remain."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return
    assert not group_alive(pgid), f"process group {pgid} still has live members"


def test_start_ready_handle_and_log(launcher: LocalLauncher, port: int, tmp_path: Path) -> None:
    launch = toy_launch(port, "--ready-after", "0.3", "--tag", "first")
    handle = launcher.ensure(launch, make_server(port), tmp_path / "t0")
    assert handle.reused is False and handle.pid and launcher.alive()
    assert handle.fingerprint == launch.fingerprint
    assert handle.base_url == f"http://127.0.0.1:{port}"
    assert 0.2 < handle.startup_s < 5
    assert handle.info["version"] == "toy-1.0"
    assert handle.log_path == tmp_path / "t0" / "server.log"
    log = handle.log_path.read_text()
    assert log.startswith("===== specsweep ") and f"fingerprint={launch.fingerprint}" in log
    assert "toy server listening" in log
    # own session: not in our process group
    assert os.getpgid(handle.pid) == handle.pid != os.getpgid(0)


def test_oom_exit_fails_fast_with_reason_and_tail(launcher: LocalLauncher, port: int,
                                                  tmp_path: Path) -> None:
    t0 = time.monotonic()
    with pytest.raises(LaunchFailure) as err:
        launcher.ensure(script_launch(OOM_SCRIPT), make_server(port), tmp_path)
    assert time.monotonic() - t0 < 3  # not the 10 s ready timeout
    assert err.value.reason == "oom"
    assert "CUDA out of memory" in err.value.log_tail
    assert "exited with code 1" in err.value.message and "server.log" in err.value.message
    assert not launcher.alive()


def test_argparse_rejection_is_bad_flag(launcher: LocalLauncher, port: int, tmp_path: Path) -> None:
    with pytest.raises(LaunchFailure) as err:
        launcher.ensure(script_launch(BAD_FLAG_SCRIPT, "--enable-ep-moe"), make_server(port), tmp_path)
    assert err.value.reason == "bad_flag"
    assert "unrecognized arguments: --enable-ep-moe" in err.value.log_tail


def test_missing_executable_is_crashed(launcher: LocalLauncher, port: int, tmp_path: Path) -> None:
    from sweep.compose.render import Launch

    launch = Launch(executable=(str(tmp_path / "no-such-server"),), args=(), env={})
    with pytest.raises(LaunchFailure) as err:
        launcher.ensure(launch, make_server(port), tmp_path)
    assert err.value.reason == "crashed" and "cannot start" in err.value.message


def test_never_ready_times_out_and_leaves_nothing(port: int, tmp_path: Path) -> None:
    lau = LocalLauncher(settings(ready_timeout_s=1.0))
    t0 = time.monotonic()
    with pytest.raises(LaunchFailure) as err:
        lau.ensure(toy_launch(port, "--never-ready"), make_server(port), tmp_path)
    assert 1.0 <= time.monotonic() - t0 < 4.0
    assert err.value.reason == "timeout"
    assert "HTTP 503" in err.value.message
    assert "toy server listening" in err.value.log_tail
    assert not lau.alive() and not _port_open(port)


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.3):
            return True
    except OSError:
        return False


def test_port_in_use_starts_nothing(launcher: LocalLauncher, port: int, tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        with pytest.raises(LaunchFailure) as err:
            launcher.ensure(toy_launch(port), make_server(port), tmp_path / "t")
    assert err.value.reason == "port_in_use"
    assert f"127.0.0.1:{port}" in err.value.message
    assert not launcher.alive() and not (tmp_path / "t" / "server.log").exists()


def test_reuse_when_fingerprint_matches_and_log_windows(launcher: LocalLauncher, port: int,
                                                       tmp_path: Path) -> None:
    server = make_server(port)
    first = launcher.ensure(toy_launch(port), server, tmp_path / "t0")
    mark0 = launcher.log_mark()
    launcher_get = __import__("httpx").get
    launcher_get(f"{first.base_url}/get_server_info?trial=zero", trust_env=False)
    window0 = launcher.log_since(mark0)
    second = launcher.ensure(toy_launch(port), server, tmp_path / "t1")
    assert second.reused is True and second.startup_s == 0.0
    assert second.pid == first.pid and second.info == first.info
    assert second.log_path == first.log_path  # the log stays in the trial dir that started it
    mark1 = launcher.log_mark()
    launcher_get(f"{first.base_url}/get_server_info?trial=one", trust_env=False)
    assert wait_until(lambda: "trial=one" in launcher.log_since(mark1))
    window1 = launcher.log_since(mark1)
    assert "trial=zero" in window0 and "trial=one" not in window0
    assert "trial=zero" not in window1
    assert launcher.log_since((None, 0)) == ""


def test_restart_when_fingerprint_differs(launcher: LocalLauncher, port: int, tmp_path: Path) -> None:
    server = make_server(port)
    first = launcher.ensure(toy_launch(port, "--tag", "a"), server, tmp_path / "t0")
    second = launcher.ensure(toy_launch(port, "--tag", "b"), server, tmp_path / "t1")
    assert second.reused is False and second.pid != first.pid
    assert second.fingerprint != first.fingerprint
    assert second.info["tag"] == "b"
    assert pid_gone(first.pid)
    _assert_group_gone(first.pid)
    assert "stopped (exit code" in (tmp_path / "t0" / "server.log").read_text()


def test_unhealthy_server_is_restarted_not_reused(launcher: LocalLauncher, port: int,
                                                  tmp_path: Path) -> None:
    flag = tmp_path / "sick"
    launch = toy_launch(port, "--unhealthy-if-exists", str(flag))
    first = launcher.ensure(launch, make_server(port), tmp_path / "t0")
    flag.touch()
    lau2 = launcher
    # the restarted server reads the same flag: remove it once the old one is judged unhealthy
    orig_start = lau2._start

    def start_after_unflag(*a: object, **k: object) -> object:
        flag.unlink()
        return orig_start(*a, **k)  # type: ignore[arg-type]

    lau2._start = start_after_unflag  # type: ignore[method-assign]
    second = lau2.ensure(launch, make_server(port), tmp_path / "t1")
    assert second.reused is False and second.pid != first.pid
    assert "failed its health check" in (tmp_path / "t0" / "server.log").read_text()


def _pids_from_log(path: Path, what: str) -> list[int]:
    return [int(m) for m in re.findall(rf"\b{what} (\d+)\n", path.read_text())]


@pytest.mark.parametrize("ignore_term", [False, True], ids=["sigterm", "sigkill-after-grace"])
def test_stop_kills_the_whole_group(port: int, tmp_path: Path, ignore_term: bool) -> None:
    lau = LocalLauncher(settings(stop_grace_s=0.5))
    extra = ("--spawn-tree", "--ignore-term") if ignore_term else ("--spawn-tree",)
    handle = lau.ensure(toy_launch(port, *extra), make_server(port), tmp_path)
    log = tmp_path / "server.log"
    assert wait_until(lambda: _pids_from_log(log, "grandchild pid") and _pids_from_log(log, "child pid"))
    kids = _pids_from_log(log, "child pid") + _pids_from_log(log, "grandchild pid")
    assert all(os.getpgid(p) == handle.pid for p in kids)
    t0 = time.monotonic()
    lau.stop()
    took = time.monotonic() - t0
    assert took < (3.0 if ignore_term else 2.0)
    if ignore_term:
        assert took >= 0.5  # waited the grace period, then SIGKILL
    assert pid_gone(handle.pid) and all(pid_gone(p) for p in kids)
    _assert_group_gone(handle.pid)
    lau.stop()  # idempotent
    assert not lau.alive()


def test_a_server_stuck_in_graceful_shutdown_gets_sigint_not_sigkill(port: int, tmp_path: Path) -> None:
    from launchers.local import FORCE_QUIT_AFTER_S

    lau = LocalLauncher(settings(stop_grace_s=20.0))
    handle = lau.ensure(toy_launch(port, "--term-waits"), make_server(port), tmp_path)
    t0 = time.monotonic()
    lau.stop()
    took = time.monotonic() - t0
    assert FORCE_QUIT_AFTER_S <= took < FORCE_QUIT_AFTER_S + 2.0
    assert pid_gone(handle.pid)
    log = (tmp_path / "server.log").read_text()
    assert "Waiting for connections to close." in log and "stopped (exit code 0)" in log


def test_api_key_never_reaches_the_log(launcher: LocalLauncher, port: int, tmp_path: Path) -> None:
    secret = "sk-very-secret-4242"
    launch = toy_launch(port, "--api-key", secret, secrets=frozenset({secret}))
    handle = launcher.ensure(launch, make_server(port, api_key=secret), tmp_path)
    mark = launcher.log_mark()
    launcher.stop()
    raw = (tmp_path / "server.log").read_bytes()
    assert secret.encode() not in raw  # neither the header nor the server's own echo of its argv
    assert b"--api-key '***'" in raw or b"--api-key ***" in raw
    assert b"toy server starting" in raw
    assert handle.info["api_key"] == "***"
    assert secret not in launcher.log_since((tmp_path / "server.log", 0))
    assert launcher.log_since(mark) is not None


CONTROLLER = r"""
import sys, time
sys.path[:0] = [{helpers!r}, {tests!r}]
from pathlib import Path
from launcher_helpers import make_server, settings, toy_launch
from launchers import get_launcher
lau = get_launcher(settings())
h = lau.ensure(toy_launch({port}, "--spawn-tree"), make_server({port}), Path({trial!r}))
print(h.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill-reaper", "sigterm"])
def test_controller_death_leaves_no_server(tmp_path: Path, sig: signal.Signals) -> None:
    import subprocess

    port = free_port()
    code = CONTROLLER.format(helpers=str(Path(__file__).parent), tests=str(Path(__file__).parents[1]),
                             port=port, trial=str(tmp_path))
    ctl = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert ctl.stdout is not None
        server_pid = int(ctl.stdout.readline())
        assert not pid_gone(server_pid)
        ctl.send_signal(sig)
        ctl.wait(timeout=10)
        # SIGKILL: the server's reaper stops the whole group (PR_SET_PDEATHSIG alone reaches
        # the leader only); SIGTERM: KeyboardInterrupt -> atexit stop_all -> whole group.
        assert wait_until(lambda: pid_gone(server_pid) and not group_alive(server_pid), timeout=10)
        _assert_group_gone(server_pid)
        log = (tmp_path / "server.log").read_text()
        if sig == signal.SIGTERM:
            assert "stopped (exit code" in log
        else:
            assert wait_until(lambda: "reaper: its controller died" in
                              (tmp_path / "server.log").read_text(), timeout=10)
    finally:
        if ctl.poll() is None:
            ctl.kill()
        try:
            os.killpg(server_pid, signal.SIGKILL)
        except (ProcessLookupError, UnboundLocalError):
            pass
