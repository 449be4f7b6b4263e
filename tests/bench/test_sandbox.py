"""The sandbox that runs model-written code: limits, cleanup, what it reports.

Each test runs real processes through both mechanisms (bubblewrap and the
built-in fallback); the hostile cases are in tests/faults/test_sandbox_hostile.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from faults.sandbox_util import MECHANISMS, USABLE, pids_with_marker

from sweep.bench import sandbox
from sweep.bench.sandbox import run_python


@pytest.fixture(params=MECHANISMS)
def mech(request: pytest.FixtureRequest) -> str:
    return request.param


def test_correct_code_passes_and_wrong_code_fails(mech):
    ok = run_python("def add(a, b):\n    return a + b\nassert add(2, 3) == 5\n", mechanism=mech)
    assert ok.passed and ok.error is None and ok.mechanism == mech
    bad = run_python("def add(a, b):\n    return a - b\nassert add(2, 3) == 5, 'add is wrong'\n", mechanism=mech)
    assert not bad.passed and bad.error == "AssertionError: add is wrong"


def test_threads_and_subprocesses_still_work(mech):
    code = ("import subprocess, sys, threading\n"
            "ts = [threading.Thread(target=sum, args=([1, 2],)) for _ in range(8)]\n"
            "[t.start() for t in ts]; [t.join() for t in ts]\n"
            "print(subprocess.run([sys.executable, '-c', 'print(6 * 7)'], capture_output=True, text=True).stdout)\n")
    res = run_python(code, mechanism=mech)
    assert res.passed, res.error
    assert res.stdout.strip() == "42"


def test_infinite_loop_is_killed_by_the_timeout(mech):
    res = run_python("while True:\n    pass\n", timeout_s=1.0, mechanism=mech)
    assert not res.passed and res.timed_out
    assert res.error and res.error.startswith("timeout")


def test_cpu_limit_names_itself(mech):
    # a CPU-bound child outlives no deadline: RLIMIT_CPU (timeout + 1 s) stops it with SIGXCPU
    res = run_python("while True:\n    pass\n", timeout_s=1.0, mechanism=mech)
    assert res.error in ("timeout: killed after 1 s", "timeout: CPU time limit")


def test_sleeping_child_processes_die_with_the_run(mech):
    marker = f"specsweep-child-{uuid.uuid4().hex}"
    code = ("import subprocess, sys, time\n"
            f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', '{marker}'])\n"
            "time.sleep(60)\n")
    res = run_python(code, timeout_s=1.0, mechanism=mech)
    assert res.timed_out and res.survivors == 0
    assert pids_with_marker(marker) == []


def test_memory_bomb_is_stopped_by_the_memory_limit(mech):
    res = run_python("blocks = [bytearray(10**6) for _ in range(10**5)]\n", memory_mb=128, timeout_s=10,
                     mechanism=mech)
    assert not res.passed and not res.timed_out
    assert "memory limit exceeded" in (res.error or "")


def test_file_size_and_scratch_size_limits(mech):
    res = run_python("open('big', 'wb').write(b'x' * (20 * 1024 * 1024))\n", mechanism=mech)
    assert not res.passed  # RLIMIT_FSIZE (Python ignores SIGXFSZ, so the write fails)
    assert res.error == "OSError: [Errno 27] File too large"
    code = "for i in range(8):\n    open(f'f{i}', 'wb').write(b'x' * (15 * 1024 * 1024))\n"
    res = run_python(code, mechanism=mech)  # the scratch tmpfs is 64 MB
    assert not res.passed and res.error == "OSError: [Errno 28] No space left on device"


def test_secrets_in_the_parent_environment_are_not_visible(monkeypatch, mech):
    monkeypatch.setenv("SPECSWEEP_API_KEY", "sk-parent-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-parent-secret")
    res = run_python("import os\nprint(sorted(os.environ))\nprint(dict(os.environ))\n", mechanism=mech)
    assert res.passed
    assert "sk-parent-secret" not in res.stdout and "aws-parent-secret" not in res.stdout
    assert "SPECSWEEP_API_KEY" not in res.stdout


def test_files_land_in_the_scratch_dir_which_is_removed(mech):
    code = ("import os\n"
            "open('answer.txt', 'w').write('42')\n"
            "print(os.getcwd())\n")
    res = run_python(code, mechanism=mech)
    assert res.passed
    cwd = res.stdout.strip()
    assert cwd == res.scratch and "specsweep-sbx-" in cwd
    assert not Path(cwd).exists() and not Path(cwd).parent.exists()


def test_enforced_reports_what_the_probe_saw(mech):
    got = sandbox.enforced(256, 5.0, mech)
    assert got["verified"] and got["mechanism"] == mech
    root = os.geteuid() == 0
    assert got["unprivileged"] is root and got["own_uid"] is root
    for layer in ("no_new_privs", "pid_namespace", "net_namespace", "fs_readonly", "host_paths_hidden",
                  "env_cleared", "nested_userns_blocked"):
        assert got[layer] is True, (layer, got)
    assert got["capabilities"] == "none" and got["interfaces"] == ["lo"]
    assert got["memory_limit"] == {"kind": "rlimit_as+rss_watch", "mb": 256} or \
        got["memory_limit"]["kind"] == "cgroup_v2"
    assert got["nproc_limit"] == 64


def test_a_claim_is_dropped_when_the_probe_contradicts_it():
    """verify() believes the probe, not the intention: a writable / is no fs_readonly."""
    from sweep.bench import _sandbox_probe as probe

    report = {"uid": 0, "euid": 0, "caps": {"CapEff": 1}, "no_new_privs": False,
              "ns": {"pid": os.readlink("/proc/self/ns/pid"), "net": os.readlink("/proc/self/ns/net")},
              "pids": list(range(1, 300)), "interfaces": ["lo", "eth0"], "env": ["HF_TOKEN", "PATH"],
              "rlimits": {"AS": -1, "NPROC": -1}, "cwd": "/w", "writes": {"/": "written", "/w": "written"},
              "visible": ["/root/.ssh"], "nested_userns": True}
    got = probe.verify(report, mechanism="fallback", uid=None, memory_kind="rlimit_as+rss_watch",
                       memory_mb=512, nproc=64, env_keys={"PATH"})
    assert not any(got[k] for k in ("unprivileged", "own_uid", "no_new_privs", "pid_namespace", "net_namespace",
                                    "fs_readonly", "host_paths_hidden", "env_cleared", "nested_userns_blocked"))
    assert got["capabilities"] == "some" and got["nproc_limit"] is None
    assert got["memory_limit"] == {"kind": "none", "mb": None}


def test_unknown_mechanism_is_refused():
    with pytest.raises(ValueError, match="auto, bwrap, fallback"):
        run_python("pass\n", mechanism="docker")


def _resolve_with_path(tmp_path: Path, bin_dir: Path) -> subprocess.CompletedProcess[str]:
    """A fresh controller process whose PATH holds only ``bin_dir``: which mechanism, what it said."""
    code = "from sweep.bench import sandbox; print(sandbox.resolve('auto')); print(sandbox.run_python('print(7)').stdout)"
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, "PATH": str(bin_dir),
                                                         "PYTHONPATH": str(Path(__file__).resolve().parents[2])})


def _bin_dir(tmp_path: Path, *tools: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        (bin_dir / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    return bin_dir


def test_without_bwrap_auto_falls_back_with_one_warning_line(tmp_path):
    out = _resolve_with_path(tmp_path, _bin_dir(tmp_path, "prlimit", "setpriv"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["fallback", "7"]
    [line] = out.stderr.splitlines()
    assert "bwrap not found" in line and "fallback" in line


def test_an_unusable_bwrap_is_tried_then_replaced_by_the_fallback(tmp_path):
    bin_dir = _bin_dir(tmp_path, "prlimit", "setpriv")
    fake = bin_dir / "bwrap"  # TEST DOUBLE: a bwrap the host refuses, as in a locked-down container
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    out = _resolve_with_path(tmp_path, bin_dir)
    assert out.stdout.split() == ["fallback", "7"], out.stderr
    [line] = out.stderr.splitlines()
    assert "No permissions to create new namespace" in line


SYSTEM_PYTHON = "/usr/bin/python3"
AS_USER = ("import json, sys\nfrom sweep.bench import sandbox\n"
           "print(json.dumps([sandbox.enforced(256, 5.0, m) for m in sys.argv[1:]]))")


def _system_python_ok() -> bool:
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return False
    return subprocess.run([SYSTEM_PYTHON, "-c", "import sys; sys.exit(sys.version_info < (3, 11))"],
                          check=False).returncode == 0


@pytest.mark.skipif(os.geteuid() != 0 or not _system_python_ok(),
                    reason="needs root (to become another user) and a system python3 >= 3.11")
def test_run_by_an_unprivileged_user_it_holds_as_well(tmp_path):
    """Not root: no uid of its own, the rest from a user namespace; the probe says which."""
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                          SYSTEM_PYTHON, "-c", AS_USER, *USABLE], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, check=False, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                                        "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    if out.returncode and "unshare" in out.stderr:
        pytest.skip(f"no unprivileged user namespaces here: {out.stderr[-200:]}")
    assert out.returncode == 0, out.stderr[-2000:]
    for got in json.loads(out.stdout):
        assert got["verified"] and got["uid"] == 65534 and got["own_uid"] is False
        for layer in ("unprivileged", "no_new_privs", "pid_namespace", "net_namespace", "fs_readonly",
                      "host_paths_hidden", "env_cleared", "nested_userns_blocked"):
            assert got[layer] is True, (got["mechanism"], layer, got)
        assert got["capabilities"] == "none"


def test_a_long_answer_runs(mech):
    """Longer than one argv string may be (128 KiB): the code travels as a file."""
    code = "x = 1\n" * 40000 + "print(x)\n"
    res = run_python(code, mechanism=mech)
    assert res.passed and res.stdout.strip() == "1", res.error


def test_cgroup_v2_is_used_only_where_it_is_delegated(tmp_path):
    from sweep.bench import _sandbox_cgroup as cgroup

    base, why = cgroup.delegated()  # this box: cgroup v1 memory, a v2 hierarchy without it
    if base is None:
        assert why and sandbox._memory_kind() == "rlimit_as+rss_watch"
    else:
        assert sandbox._memory_kind() == "cgroup_v2"
    # TEST DOUBLE: a directory laid out like a delegated cgroup v2 child (no memory
    # controller can be delegated on this CI box), to check what is written and read.
    cg = cgroup.create(tmp_path, "run", 512, 64)
    assert (cg / "memory.max").read_text() == str(512 * 1024 * 1024) and (cg / "pids.max").read_text() == "64"
    assert not cgroup.oom_killed(cg)
    (cg / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert cgroup.oom_killed(cg)
    for name in ("memory.max", "pids.max", "memory.events"):
        (cg / name).unlink()
    cgroup.remove(cg)  # (a real cgroup directory is empty of regular files to rmdir)
    assert not cg.exists()


def test_the_fallback_is_said_once_per_sweep_with_its_install_line(tmp_path):
    """A sweep's trials may run in several processes (pool workers, SLURM jobs): the first says
    bwrap is missing, with the command that installs it; the others of that sweep say nothing."""
    bin_dir = _bin_dir(tmp_path, "prlimit", "setpriv")
    sweep_dir = tmp_path / "multirun" / "sweep"
    sweep_dir.mkdir(parents=True)
    code = ("import sys; from sweep.bench import sandbox; sandbox.notice_once_in(sys.argv[1]); "
            "print(sandbox.resolve('auto'))")
    said = []
    for _ in range(3):  # three trials, each in its own process
        out = subprocess.run([sys.executable, "-c", code, str(sweep_dir)], cwd=tmp_path, capture_output=True,
                             text=True, timeout=120, check=False,
                             env={**os.environ, "PATH": str(bin_dir),
                                  "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
        assert out.returncode == 0 and out.stdout.split() == ["fallback"], out.stderr
        said.append(out.stderr.strip())
    assert "bwrap not found" in said[0] and "apt-get install bubblewrap" in said[0], said[0]
    assert said[1:] == ["", ""], said
