"""The sandbox that runs model-written code: limits, isolation, cleanup."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sweep.bench import sandbox
from sweep.bench.sandbox import run_python

ISO = sandbox.isolation()


def test_correct_code_passes_and_wrong_code_fails():
    ok = run_python("def add(a, b):\n    return a + b\nassert add(2, 3) == 5\n")
    assert ok.passed and ok.error is None
    bad = run_python("def add(a, b):\n    return a - b\nassert add(2, 3) == 5, 'add is wrong'\n")
    assert not bad.passed and bad.error == "AssertionError: add is wrong"


def test_infinite_loop_is_killed_by_the_timeout():
    t0 = time.monotonic()
    res = run_python("while True:\n    pass\n", timeout_s=1.0)
    assert time.monotonic() - t0 < 5
    assert not res.passed and res.error and res.error.startswith("timeout")


def test_sleeping_child_processes_die_with_the_group():
    code = ("import subprocess, sys, time\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print(p.pid, flush=True)\n"
            "time.sleep(60)\n")
    res = run_python(code, timeout_s=1.0)
    assert res.timed_out
    child = int(res.stdout.split()[0])
    assert not _running(child)


def _running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (our PID 1 may reap late)."""
    for _ in range(50):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.05)
    return True


def test_memory_bomb_is_stopped_by_the_memory_limit():
    t0 = time.monotonic()
    res = run_python("blocks = [bytearray(10**6) for _ in range(10**5)]\n", memory_mb=128, timeout_s=10)
    assert not res.passed and not res.timed_out
    assert "MemoryError" in (res.error or "")
    assert time.monotonic() - t0 < 10


def test_secrets_in_the_parent_environment_are_not_visible(monkeypatch):
    monkeypatch.setenv("SPECSWEEP_API_KEY", "sk-parent-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-parent-secret")
    res = run_python("import os\nprint(sorted(os.environ))\nprint(dict(os.environ))\n")
    assert res.passed
    assert "sk-parent-secret" not in res.stdout and "aws-parent-secret" not in res.stdout
    assert "SPECSWEEP_API_KEY" not in res.stdout


@pytest.mark.skipif(not ISO["network_isolated"], reason="no network namespace on this machine")
def test_no_network_connect_to_loopback_fails():
    import socket

    with socket.socket() as srv:  # a real listener in the parent's namespace
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        code = ("import socket\n"
                f"socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
                "print('CONNECTED')\n")
        res = run_python(code)
    assert not res.passed and "CONNECTED" not in res.stdout
    assert res.network_isolated
    assert "OSError" in (res.error or "")


def test_files_land_in_the_scratch_dir_which_is_removed():
    code = ("import os\n"
            "open('answer.txt', 'w').write('42')\n"
            "print(os.getcwd())\n")
    res = run_python(code)
    assert res.passed
    cwd = res.stdout.strip()
    assert cwd == res.scratch and "specsweep-sbx-" in cwd
    assert not Path(cwd).exists() and not Path(cwd).parent.exists()


@pytest.mark.skipif(not ISO["fs_readonly"], reason="no mount namespace on this machine")
def test_writes_outside_the_scratch_dir_fail(tmp_path):
    target = tmp_path / "escaped.txt"
    res = run_python(f"open({str(target)!r}, 'w').write('x')\n")
    assert not res.passed and "Read-only file system" in (res.error or "")
    assert not target.exists()


def test_without_isolation_it_still_runs_and_says_so():
    res = run_python("print('hi')\n", isolate=False)
    assert res.passed and res.stdout.strip() == "hi"
    assert res.network_isolated is False and res.fs_readonly is False
