"""Hostile model code against the coding sandbox (issue 11, section 1).

Every snippet is what a server could answer: it goes through the coding
eval's own path (``program_for`` -> ``run_python`` with the eval's limits),
as real processes, as root in CI, once per mechanism (bubblewrap and the
built-in fallback). Each snippet prints BLOCKED when its attack failed and
ESCAPED when it worked, and tries to smuggle whatever it found into the
error message. Secret canaries sit in this (the controller's) environment
and must appear nowhere; no process of the snippet may be left afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from faults.sandbox_util import MECHANISMS, pids_with_marker
from sweep.bench import sandbox
from sweep.bench.coding import five_problems, program_for
from sweep.bench.sandbox import SandboxResult, run_python

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux namespaces and /proc")

CANARIES = {name: f"canary-{name.lower()}-{uuid.uuid4().hex}"
            for name in ("SPECSWEEP_SSH_PASSWORD", "SPECSWEEP_API_KEY", "HF_TOKEN")}


@pytest.fixture(autouse=True)
def secrets_in_the_controller(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)


@pytest.fixture(params=MECHANISMS)
def mech(request: pytest.FixtureRequest) -> str:
    return request.param


def attack(code: str, mech: str, *, timeout_s: float = 5.0, memory_mb: int = 512) -> SandboxResult:
    """Run ``code`` as a model's answer would run, then check the invariants every run keeps."""
    answer = f"Here you go:\n```python\n{textwrap.dedent(code)}\n```\n"
    res = run_python(program_for(five_problems()[0], answer), timeout_s=timeout_s,
                     memory_mb=memory_mb, mechanism=mech)
    blob = json.dumps(res.to_dict())
    for name, value in CANARIES.items():
        assert value not in blob, f"{name} leaked out of the sandbox"
    assert not res.passed and res.error          # the hidden tests never pass
    assert "ESCAPED" not in res.stdout, res.stdout
    assert res.survivors == 0
    assert pids_with_marker(res.scratch) == []   # every process ran main.py from the scratch path
    return res


def test_environ_of_the_parent_and_of_every_process_is_out_of_reach(mech):
    res = attack(f"""
        import os
        found = []
        for pid in [str(os.getppid()), "{os.getpid()}", "1"] + [p for p in os.listdir("/proc") if p.isdigit()]:
            try:
                env = open(f"/proc/{{pid}}/environ", "rb").read().decode(errors="replace")
            except OSError:
                continue
            found += [kv for kv in env.split("\\0") if kv.startswith(("SPECSWEEP_", "HF_TOKEN"))]
        print("ESCAPED" if found else "BLOCKED", flush=True)
        raise SystemExit(" ".join(found) or "nothing found")
        """, mech)
    assert "BLOCKED" in res.stdout and res.error == "nothing found"


def test_setns_into_the_host_network_and_loopback_connect_fail(mech):
    with socket.socket() as srv:  # a real listener in the host's (the controller's) namespace
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        srv.setblocking(False)
        port = srv.getsockname()[1]
        res = attack(f"""
            import ctypes, os, socket
            libc = ctypes.CDLL(None, use_errno=True)
            joined = []
            for pid in ({os.getpid()}, os.getppid(), 1):
                try:
                    fd = os.open(f"/proc/{{pid}}/ns/net", os.O_RDONLY)
                except OSError:
                    continue
                if libc.setns(fd, 0x40000000) == 0:
                    joined.append(pid)
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=2)
                print("ESCAPED connected", joined, flush=True)
            except OSError as exc:
                print("BLOCKED", joined, exc, flush=True)
            """, mech)
        with pytest.raises(BlockingIOError):
            srv.accept()  # nobody ever connected
    assert "BLOCKED" in res.stdout


def test_remounting_root_read_write_fails(mech):
    target = f"/specsweep-escape-{uuid.uuid4().hex}"
    res = attack(f"""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
        rc = [libc.mount(None, b"/", None, flags, None) for flags in (32, 32 | 4096)]
        try:
            open("{target}", "w").write("x")
            print("ESCAPED wrote {target}", rc, flush=True)
        except OSError as exc:
            print("BLOCKED", rc, exc, flush=True)
        """, mech)
    assert "BLOCKED [-1, -1]" in res.stdout
    assert not Path(target).exists()


def test_writes_outside_the_scratch_dir_fail(mech, tmp_path):
    name = f"escape-{uuid.uuid4().hex}"
    places = ["/tmp", "/root", "/var/tmp", "/dev/shm", str(tmp_path), os.getcwd()]
    res = attack(f"""
        wrote = []
        for d in {places!r}:
            try:
                open(d + "/{name}", "w").write("x")
                wrote.append(d)
            except OSError:
                pass
        print("ESCAPED" if wrote else "BLOCKED", wrote, flush=True)
        """, mech)
    assert "BLOCKED" in res.stdout
    assert not [d for d in places if Path(d, name).exists()]


def test_fork_bomb_hits_the_process_cap_and_dies_with_the_run(mech):
    res = attack("""
        import os, time
        n = 0
        for _ in range(300):
            try:
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
            except OSError:
                break
            n += 1
        print("ESCAPED" if n >= 300 else "BLOCKED", n, flush=True)
        """, mech)
    assert "BLOCKED" in res.stdout
    assert int(res.stdout.split("BLOCKED")[1].split()[0]) < 64


def test_double_forked_sleeper_is_dead_after_the_run(mech):
    marker = f"specsweep-sleeper-{uuid.uuid4().hex}"
    res = attack(f"""
        import os, sys
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", "{marker}"])
            os._exit(0)
        print("BLOCKED (judged from outside)", flush=True)
        """, mech)
    assert res.returncode is not None
    assert pids_with_marker(marker) == []


def test_three_300_mb_children_exceed_a_512_mb_budget(mech):
    res = attack("""
        import os, time
        kids = []
        for _ in range(3):
            pid = os.fork()
            if pid == 0:
                block = bytearray(300 * 1024 * 1024)
                time.sleep(3)
                os._exit(0)
            kids.append(pid)
        ok = all(os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) == 0 for p in kids)
        print("ESCAPED 900 MB" if ok else "BLOCKED", flush=True)
        """, mech, timeout_s=10.0, memory_mb=512)
    assert res.memory_exceeded or "BLOCKED" in res.stdout, res.stderr
    assert "memory limit exceeded" in (res.error or "") or "BLOCKED" in res.stdout


def test_ssh_keys_and_the_mlflow_store_are_unreadable(mech, tmp_path):
    secret = f"canary-file-{uuid.uuid4().hex}"
    db = tmp_path / "mlflow.db"
    db.write_text(secret)
    db.chmod(0o644)                      # as a root-run sweep leaves it: world-readable
    keys = tmp_path / ".ssh"
    keys.mkdir(mode=0o700)
    (keys / "id_ed25519").write_text(secret)
    paths = [str(db), str(keys / "id_ed25519"), os.path.expanduser("~/.ssh")]
    res = attack(f"""
        import os
        got = []
        for p in {paths!r}:
            try:
                got.append(open(p).read() if not os.path.isdir(p) else " ".join(os.listdir(p)))
            except OSError:
                pass
        print("ESCAPED" if got else "BLOCKED", flush=True)
        raise SystemExit(" ".join(got) or "nothing read")
        """, mech)
    assert "BLOCKED" in res.stdout and secret not in json.dumps(res.to_dict())


RUN_FROM_STDIN = ("import sys; from sweep.bench.sandbox import run_python; "
                  "run_python(sys.stdin.read(), timeout_s=120, mechanism=sys.argv[1])")


def test_nothing_outlives_a_killed_controller(mech, tmp_path):
    """SIGKILL the process that runs the sandbox: its sandboxed processes die with it."""
    marker = f"specsweep-orphan-{uuid.uuid4().hex}"
    code = (f"import os, subprocess, sys, time\n"
            f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '{marker}'])\n"
            f"time.sleep(600)\n")
    controller = subprocess.Popen(
        [sys.executable, "-c", RUN_FROM_STDIN, mech],
        stdin=subprocess.PIPE, text=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    controller.stdin.write(code)
    controller.stdin.close()
    deadline = time.monotonic() + 60
    while not pids_with_marker(marker):
        assert time.monotonic() < deadline and controller.poll() is None, "the sleeper never started"
        time.sleep(0.1)
    controller.send_signal(signal.SIGKILL)
    controller.wait()
    deadline = time.monotonic() + 10
    while pids_with_marker(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pids_with_marker(marker) == []
    # its scratch dir could not be removed by the dead controller: the next eval does it
    left = list(Path(tempfile.gettempdir()).glob(f"{sandbox.PREFIX}{controller.pid}-*"))
    assert left and set(map(str, left)) <= set(sandbox.remove_stale())
    assert not [p for p in left if p.exists()]


def test_the_controllers_session_keyring_is_out_of_reach(mech):
    """Keys reachable from an inherited session keyring are "possessed" whatever the uid."""
    from sweep.bench._sandbox_seccomp import ARCHES

    if os.uname().machine not in ARCHES:
        pytest.skip(f"no seccomp filter for {os.uname().machine}")
    keyctl = ARCHES[os.uname().machine][4][2]
    res = attack(f"""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        rc = libc.syscall({keyctl}, 0, -3, 0)   # KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING
        print("ESCAPED" if rc >= 0 else "BLOCKED", rc, ctypes.get_errno(), flush=True)
        """, mech)
    assert "BLOCKED -1 1" in res.stdout  # EPERM from the filter
