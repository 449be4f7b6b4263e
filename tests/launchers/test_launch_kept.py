"""A server kept with ``launcher.keep_server=true`` is reused by the next run (a new process).

Real processes throughout: the real simulator started from the rendered
command, controllers in subprocesses that exit (so the next launcher really
has no memory of the server), and ``python -m sweep`` end to end. Every
test uses its own state dir and ephemeral ports, and kills whatever its
state dir still names at teardown.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest
from launcher_helpers import compose, free_port, pid_gone, settings, wait_until

import launchers
from launchers import _state, registry
from launchers.base import LaunchFailure
from launchers.local import LocalLauncher, group_alive

pytestmark = pytest.mark.slow

HELPERS = str(Path(__file__).parent)
FAST = ("server.sim.load_seconds=0.2", "workload=smoke")

# A controller that starts a kept server and exits normally (atexit stop_all respects keep_server).
CONTROLLER = r"""
import json, sys
sys.path[:0] = [{helpers!r}, {tests!r}]
from pathlib import Path
from launcher_helpers import compose, settings
import launchers
trial, launch = compose(*{overrides!r})
lau = launchers.get_launcher(settings(keep_server=True, state_dir={state!r}, ready_timeout_s=30.0,
                                      poll_interval_s=0.1, poll_max_s=1.0))
h = lau.ensure(launch, trial.server, Path({trial_dir!r}))
print(json.dumps({{"pid": h.pid, "fingerprint": h.fingerprint, "reused": h.reused,
                  "log": str(h.log_path)}}), flush=True)
"""


def sim_settings(state_dir: Path, **over: Any) -> Any:
    return settings(state_dir=str(state_dir), ready_timeout_s=30.0, poll_interval_s=0.1,
                    poll_max_s=1.0, **over)


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    """A private state dir; at teardown every server it still names (really ours) is killed."""
    d = tmp_path / "state"
    yield d
    for _, st in _all_states(d):
        if st.is_running():
            kill_group(st.pgid)


def _all_states(d: Path) -> list[tuple[Path, _state.ServerState]]:
    out = []
    for p in sorted(d.glob("*.json")) if d.is_dir() else []:
        try:
            st = _state.read_state(p)
        except ValueError:
            continue
        if st is not None:
            out.append((p, st))
    return out


@pytest.fixture
def keep_in_controller(state_dir: Path, tmp_path: Path) -> Iterator[Callable[..., dict[str, Any]]]:
    """Start a kept sim from a controller process that then exits; returns what it printed."""
    started: list[int] = []

    def run(*overrides: str, trial_dir: Path | None = None) -> dict[str, Any]:
        trial_dir = trial_dir or tmp_path / f"controller{len(started)}"
        code = CONTROLLER.format(helpers=HELPERS, tests=str(Path(HELPERS).parent), overrides=list(overrides), state=str(state_dir),
                                 trial_dir=str(trial_dir))
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90)
        assert out.returncode == 0, out.stderr[-3000:]
        info = json.loads(out.stdout.strip().splitlines()[-1])
        started.append(info["pid"])
        info["stderr"] = out.stderr
        return info

    yield run
    for pid in started:  # the state file may be gone already (stopped) or replaced
        if not pid_gone(pid):
            kill_group(pid)


def state_file(state_dir: Path, port: int) -> Path:
    return _state.state_path(state_dir, "127.0.0.1", port)


def chat(base_url: str, model: str, api_key: str | None = None) -> None:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    body = {"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    r = httpx.post(f"{base_url}/v1/chat/completions", json=body, headers=headers, trust_env=False,
                   timeout=30)
    assert r.status_code == 200, r.text


# --------------------------------------------------------------- adopt / replace


def test_kept_sim_is_adopted_by_the_next_controller(keep_in_controller: Callable[..., dict[str, Any]],
                                                    state_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    overrides = (f"server.port={port}", *FAST)
    first = keep_in_controller(*overrides)
    assert first["reused"] is False
    # the controller has exited; the server and its state file remain
    assert not pid_gone(first["pid"]) and group_alive(first["pid"])
    assert f"stop it with: kill -TERM -- -{first['pid']}" in first["stderr"]
    st = _state.read_state(state_file(state_dir, port))
    assert st is not None and st.pid == st.pgid == first["pid"] and st.is_running()
    assert st.fingerprint == first["fingerprint"] and st.keep_server is True
    assert st.start_ticks == _state.start_ticks(first["pid"]) and st.boot_id == _state.boot_id()
    assert st.log_path == first["log"] and st.base_url == f"http://127.0.0.1:{port}"
    assert not st.owner_alive()
    assert oct(state_file(state_dir, port).stat().st_mode & 0o777) == "0o600"

    trial, launch = compose(*overrides)
    assert launch.fingerprint == first["fingerprint"]
    lau = LocalLauncher(sim_settings(state_dir, keep_server=True))
    t0 = time.monotonic()
    handle = lau.ensure(launch, trial.server, tmp_path / "next")
    assert time.monotonic() - t0 < 5.0
    assert handle.reused is True and handle.startup_s == 0.0 and handle.pid == first["pid"]
    assert handle.log_path == Path(first["log"]) and handle.info
    assert lau.alive()
    # the log window of this trial comes from the kept server's own log file
    mark = lau.log_mark()
    chat(handle.base_url, trial.model.served_name)
    assert wait_until(lambda: "Prefill batch" in lau.log_since(mark))
    log = Path(first["log"]).read_text()
    assert "adopted by specsweep pid" in log
    # this process owns it now
    st2 = _state.read_state(state_file(state_dir, port))
    assert st2 is not None and st2.owned_by_me() and st2.pid == first["pid"]

    # stop() works on the adopted group and removes the state file
    lau.stop()
    assert pid_gone(first["pid"]) and not group_alive(first["pid"])
    assert not state_file(state_dir, port).exists()
    assert not lau.alive()
    assert "stopped (kept server pid" in Path(first["log"]).read_text()
    lau.stop()  # idempotent


def test_a_changed_launch_stops_the_kept_sim_and_starts_the_new_one(
        keep_in_controller: Callable[..., dict[str, Any]], state_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    first = keep_in_controller(f"server.port={port}", *FAST)
    trial, launch = compose(f"server.port={port}", *FAST, "spec.budget=4")
    assert launch.fingerprint != first["fingerprint"]
    lau = LocalLauncher(sim_settings(state_dir))
    try:
        handle = lau.ensure(launch, trial.server, tmp_path / "new")
        assert handle.reused is False and handle.pid != first["pid"] and handle.startup_s > 0
        assert handle.fingerprint == launch.fingerprint
        assert pid_gone(first["pid"]) and not group_alive(first["pid"])
        old_log = Path(first["log"]).read_text()
        assert "its launch changed" in old_log and "stopped (kept server pid" in old_log
        st = _state.read_state(state_file(state_dir, port))
        assert st is not None and st.pid == handle.pid and st.fingerprint == launch.fingerprint
    finally:
        lau.stop()
    assert not state_file(state_dir, port).exists()


def test_an_unhealthy_kept_server_is_replaced(keep_in_controller: Callable[..., dict[str, Any]],
                                              state_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    first = keep_in_controller(f"server.port={port}", *FAST)
    os.kill(first["pid"], signal.SIGSTOP)  # frozen: health checks time out
    try:
        trial, launch = compose(f"server.port={port}", *FAST)
        lau = LocalLauncher(sim_settings(state_dir, stop_grace_s=2.0))
        try:
            handle = lau.ensure(launch, trial.server, tmp_path / "new")
            assert handle.reused is False and handle.pid != first["pid"]
            assert pid_gone(first["pid"])
            assert "failed its health check" in Path(first["log"]).read_text()
        finally:
            lau.stop()
    finally:
        kill_group(first["pid"])


def test_a_kept_server_with_an_api_key_keeps_logging_after_its_controller_exits(
        keep_in_controller: Callable[..., dict[str, Any]], state_dir: Path, tmp_path: Path) -> None:
    """Its redacting pump is a process of its own: output is neither lost nor a broken pipe."""
    port = free_port()
    secret = "sk-kept-secret-7731"
    overrides = (f"server.port={port}", *FAST, f"server.api_key={secret}")
    first = keep_in_controller(*overrides)
    trial, launch = compose(*overrides)
    lau = LocalLauncher(sim_settings(state_dir))
    try:
        handle = lau.ensure(launch, trial.server, tmp_path / "next")
        assert handle.reused is True and handle.pid == first["pid"]
        mark = lau.log_mark()
        chat(handle.base_url, trial.model.served_name, api_key=secret)
        assert wait_until(lambda: "Prefill batch" in lau.log_since(mark))
        assert secret not in repr(handle.info)
    finally:
        lau.stop()
    assert pid_gone(first["pid"])
    raw = Path(first["log"]).read_bytes()
    assert secret.encode() not in raw and b"***" in raw


def test_a_fresh_launcher_in_the_same_process_adopts_it(state_dir: Path, tmp_path: Path) -> None:
    """A new registry (cleared in-memory state) in this process: the state file is enough."""
    port = free_port()
    trial, launch = compose(f"server.port={port}", *FAST)
    saved = dict(registry._launchers)
    registry._launchers.clear()
    try:
        first = launchers.get_launcher(sim_settings(state_dir, keep_server=True)).ensure(
            launch, trial.server, tmp_path / "0")
        launchers.stop_all()  # keep_server: left running
        assert not pid_gone(first.pid)
        registry._launchers.clear()  # forget it, as a new process would
        again = launchers.get_launcher(sim_settings(state_dir, keep_server=True)).ensure(
            launch, trial.server, tmp_path / "1")
        assert again.reused is True and again.pid == first.pid and again.startup_s == 0.0
        launchers.stop_all(force=True)
        assert pid_gone(first.pid) and not state_file(state_dir, port).exists()
    finally:
        launchers.stop_all(force=True)
        registry._launchers.clear()
        registry._launchers.update(saved)


def test_stop_all_says_how_to_stop_a_kept_server(state_dir: Path, tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    trial, launch = compose(f"server.port={port}", *FAST)
    saved = dict(registry._launchers)
    registry._launchers.clear()
    try:
        handle = launchers.get_launcher(sim_settings(state_dir, keep_server=True)).ensure(
            launch, trial.server, tmp_path)
        with caplog.at_level(logging.INFO, logger="launchers.local"):
            launchers.stop_all()
            launchers.stop_all()  # said once, not at every call
        lines = [r.getMessage() for r in caplog.records if "kill -TERM" in r.getMessage()]
        assert lines == [f"keep_server: the server stays up after this run (pid {handle.pid}, "
                         f"{handle.base_url}); the next run with the same launch reuses it; "
                         f"stop it with: kill -TERM -- -{handle.pid}"]
        assert f"kill -TERM -- -{handle.pid}" in (tmp_path / "server.log").read_text()
    finally:
        launchers.stop_all(force=True)
        registry._launchers.clear()
        registry._launchers.update(saved)


# --------------------------------------------------------------- not ours: never touched


def fake_state(port: int, *, pid: int, pgid: int, ticks: int | None, boot: str | None = None,
               owner_pid: int = 0, owner_ticks: int | None = None, log_path: str = "/nonexistent",
               fingerprint: str = "0" * 16) -> _state.ServerState:
    return _state.ServerState(
        host="127.0.0.1", port=port, base_url=f"http://127.0.0.1:{port}", pid=pid, pgid=pgid,
        start_ticks=ticks, boot_id=boot if boot is not None else _state.boot_id(),
        fingerprint=fingerprint, log_path=log_path, command="python -m sweep.sim", started="then",
        keep_server=True, owner_pid=owner_pid, owner_start_ticks=owner_ticks)


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated live process leading its own group (what a recycled pid could be)."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        yield p
    finally:
        p.kill()
        p.wait()


def test_a_stale_state_file_is_removed_and_the_server_starts(state_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    pid = dead_pid()
    _state.write_state(state_file(state_dir, port), fake_state(port, pid=pid, pgid=pid, ticks=1))
    trial, launch = compose(f"server.port={port}", *FAST)
    lau = LocalLauncher(sim_settings(state_dir))
    try:
        handle = lau.ensure(launch, trial.server, tmp_path)
        assert handle.reused is False
        st = _state.read_state(state_file(state_dir, port))
        assert st is not None and st.pid == handle.pid  # the stale one was replaced
    finally:
        lau.stop()
    assert not state_file(state_dir, port).exists()


@pytest.mark.parametrize("who", ["own-session-process", "this-test-process", "other-boot"])
def test_a_recycled_pid_is_never_signalled(who: str, sleeper: subprocess.Popen[bytes],
                                           state_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    trial, launch = compose(f"server.port={port}", *FAST)
    if who == "this-test-process":
        pid, pgid = os.getpid(), os.getpgid(0)
        ticks, boot = (_state.start_ticks(pid) or 0) + 1, None  # wrong start time
    elif who == "own-session-process":
        pid = pgid = sleeper.pid
        ticks, boot = (_state.start_ticks(pid) or 0) - 1, None  # wrong start time
    else:  # the right start ticks, but from another boot: not comparable
        pid = pgid = sleeper.pid
        ticks, boot = _state.start_ticks(pid), "00000000-0000-0000-0000-000000000000"
    # the recorded fingerprint differs: if it were ours, it would be stopped
    _state.write_state(state_file(state_dir, port),
                       fake_state(port, pid=pid, pgid=pgid, ticks=ticks, boot=boot))
    lau = LocalLauncher(sim_settings(state_dir))
    try:
        handle = lau.ensure(launch, trial.server, tmp_path)
        assert handle.reused is False and handle.pid != pid
        assert sleeper.poll() is None  # untouched (and so is this test process)
        st = _state.read_state(state_file(state_dir, port))
        assert st is not None and st.pid == handle.pid
    finally:
        lau.stop()
    assert sleeper.poll() is None


def test_a_foreign_listener_is_port_in_use(state_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    trial, launch = compose(f"server.port={port}", *FAST)
    lau = LocalLauncher(sim_settings(state_dir))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        with pytest.raises(LaunchFailure) as err:
            lau.ensure(launch, trial.server, tmp_path / "t")
    assert err.value.reason == "port_in_use"
    assert f"127.0.0.1:{port}" in err.value.message
    assert "no specsweep state file" in err.value.message and str(state_dir) in err.value.message
    assert not lau.alive() and not (tmp_path / "t" / "server.log").exists()


def test_a_foreign_listener_with_a_stale_state_file(sleeper: subprocess.Popen[bytes], state_dir: Path,
                                                   tmp_path: Path) -> None:
    port = free_port()
    trial, launch = compose(f"server.port={port}", *FAST)
    path = state_file(state_dir, port)
    _state.write_state(path, fake_state(port, pid=sleeper.pid, pgid=sleeper.pid,
                                        ticks=(_state.start_ticks(sleeper.pid) or 0) + 7,
                                        fingerprint=launch.fingerprint))
    lau = LocalLauncher(sim_settings(state_dir))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        with pytest.raises(LaunchFailure) as err:
            lau.ensure(launch, trial.server, tmp_path / "t")
    assert err.value.reason == "port_in_use"
    assert "stale state file" in err.value.message and str(path) in err.value.message
    assert not path.exists()
    assert sleeper.poll() is None


def test_an_unreadable_state_file_is_removed(state_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    path = state_file(state_dir, port)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    trial, launch = compose(f"server.port={port}", *FAST)
    lau = LocalLauncher(sim_settings(state_dir))
    try:
        handle = lau.ensure(launch, trial.server, tmp_path)
        assert handle.reused is False
        assert _state.read_state(path).pid == handle.pid  # type: ignore[union-attr]
    finally:
        lau.stop()


def test_a_server_a_live_run_uses_is_not_taken_over(sleeper: subprocess.Popen[bytes], state_dir: Path,
                                                   tmp_path: Path) -> None:
    """Two runs on one port: the second never adopts or stops the first one's server."""
    port = free_port()
    trial, launch = compose(f"server.port={port}", *FAST)
    owner = LocalLauncher(sim_settings(state_dir, keep_server=True))
    try:
        handle = owner.ensure(launch, trial.server, tmp_path / "owner")
        path = state_file(state_dir, port)
        st = _state.read_state(path)
        assert st is not None
        # pretend another live controller (the sleeper) started it
        _state.write_state(path, replace(st, owner_pid=sleeper.pid,
                                         owner_start_ticks=_state.start_ticks(sleeper.pid)))
        other = LocalLauncher(sim_settings(state_dir))
        with pytest.raises(LaunchFailure) as err:
            other.ensure(launch, trial.server, tmp_path / "other")
        assert err.value.reason == "port_in_use"
        assert f"still-running specsweep process {sleeper.pid}" in err.value.message
        assert owner.alive() and not pid_gone(handle.pid)
        assert _state.read_state(path) is not None
    finally:
        owner.stop()
    assert not state_file(state_dir, port).exists()


def test_state_dir_defaults_to_xdg_state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert _state.state_dir(settings()) == tmp_path / "xdg" / "specsweep" / "servers"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _state.state_dir(settings()) == tmp_path / "home" / ".local" / "state" / "specsweep" / "servers"
    assert _state.state_dir(settings(state_dir="~/s")) == tmp_path / "home" / "s"
    assert _state.state_path(Path("/d"), "::", 8080) == Path("/d/--_8080.json")


def test_the_shipped_config_has_state_dir() -> None:
    trial, _ = compose("launcher=local", "launcher.state_dir=/tmp/x", "launcher.keep_server=true")
    assert trial.launcher.state_dir == "/tmp/x" and trial.launcher.keep_server is True
    trial, _ = compose("launcher=local")
    assert trial.launcher.state_dir is None


# --------------------------------------------------------------- end to end


def sweep_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sweep", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=240)


def only_result(root: Path) -> dict[str, Any]:
    [path] = sorted(root.rglob("result.json"))
    return json.loads(path.read_text())


def test_cli_second_run_reuses_the_kept_server(state_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    # answers long enough that the server logs a decode line (every 40 steps) inside the matrix's
    # window: the log's accept length covers the matrix only, not the coding eval before it
    args = ["workload=smoke", "workload.max_tokens=512", "server.sim.load_seconds=0.2", "mlflow.enabled=false",
            f"server.port={port}", "launcher.keep_server=true", f"launcher.state_dir={state_dir}"]
    path = state_file(state_dir, port)
    (tmp_path / "run1").mkdir()
    (tmp_path / "run2").mkdir()
    (tmp_path / "run3").mkdir()
    try:
        one = sweep_cli(tmp_path / "run1", *args)
        assert one.returncode == 0, one.stderr[-3000:]
        doc1 = only_result(tmp_path / "run1")
        assert doc1["status"] == "ok" and doc1["server"]["reused"] is False
        st = _state.read_state(path)
        assert st is not None and st.is_running() and st.fingerprint == doc1["fingerprint"]
        assert f"kill -TERM -- -{st.pgid}" in one.stdout + one.stderr

        two = sweep_cli(tmp_path / "run2", *args)
        assert two.returncode == 0, two.stderr[-3000:]
        doc2 = only_result(tmp_path / "run2")
        assert doc2["status"] == "ok", doc2.get("failure")
        assert doc2["server"]["reused"] is True and doc2["server"]["startup_s"] == 0.0
        assert doc2["server"]["log"] == doc1["server"]["log"]
        assert doc2["accept_len"]["log"] is not None  # the trial's log window is the kept log
        st2 = _state.read_state(path)
        assert st2 is not None and st2.pid == st.pid and st2.is_running()

        # without keep_server the run adopts it and stops it at the end
        three = sweep_cli(tmp_path / "run3", *args[:-2], f"launcher.state_dir={state_dir}")
        assert three.returncode == 0, three.stderr[-3000:]
        doc3 = only_result(tmp_path / "run3")
        assert doc3["status"] == "ok" and doc3["server"]["reused"] is True
        assert wait_until(lambda: pid_gone(st.pid), timeout=10) and not group_alive(st.pgid)
        assert not path.exists()
    finally:
        st_end = _state.read_state(path) if path.exists() else None
        if st_end is not None and st_end.is_running():
            kill_group(st_end.pgid)
