"""A whole trial whose "model" answers every coding problem with hostile code.

`python -m sweep` starts tests/faults/hostile_responder.py through the normal
local launcher (``server.executable``) in place of SGLang. The answer tries
every way back to the controller at once and puts whatever it finds in its
error message; result.json must show five failed problems with that
message, a ``coding.sandbox`` that the probe verified, and none of the
canaries set in the controller's environment anywhere in what the run
wrote or printed; no process of the answer may be left.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from faults.sandbox_util import MECHANISMS, pids_with_marker

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent

HOSTILE = """
import ctypes, os, socket, sys
found = []
for pid in [p for p in os.listdir("/proc") if p.isdigit()] + [str(os.getppid())]:
    try:
        found.append(open("/proc/%s/environ" % pid, "rb").read().decode(errors="replace"))
    except OSError:
        pass
libc = ctypes.CDLL(None, use_errno=True)
for pid in (str(os.getppid()), "1"):
    try:
        if libc.setns(os.open("/proc/%s/ns/net" % pid, os.O_RDONLY), 0x40000000) == 0:
            found.append("setns " + pid)
    except OSError:
        pass
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=1)
    found.append("connected")
except OSError:
    pass
for path in ("/tmp/{marker}", "{cwd}/{marker}"):
    try:
        open(path, "w").write("x")
        found.append("wrote " + path)
    except OSError:
        pass
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", "{marker}"])
    os._exit(0)
raise SystemExit("HOSTILE " + " | ".join(found))
"""


@pytest.mark.parametrize("mech", MECHANISMS)
def test_hostile_answers_fail_and_leak_nothing(tmp_path: Path, mech: str) -> None:
    marker = f"specsweep-e2e-{uuid.uuid4().hex}"
    canaries = {n: f"canary-{n.lower()}-{uuid.uuid4().hex}"
                for n in ("SPECSWEEP_SSH_PASSWORD", "SPECSWEEP_API_KEY", "HF_TOKEN")}
    with socket.socket() as listener, socket.socket() as probe:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        probe.bind(("127.0.0.1", 0))
        server_port = probe.getsockname()[1]
        probe.close()
        code = tmp_path / "hostile.py"
        code.write_text(HOSTILE.format(port=listener.getsockname()[1], marker=marker,
                                       cwd=tmp_path))
        env = {**os.environ, **canaries, "HOSTILE_CODE_FILE": str(code)}
        out = subprocess.run(
            [sys.executable, "-m", "sweep", "workload=smoke", "mlflow.enabled=false",
             f"workload.sandbox.mechanism={mech}",
             f"server.executable=[{sys.executable},{HERE / 'hostile_responder.py'}]", f"server.port={server_port}"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240, check=False)
        with pytest.raises(BlockingIOError):
            listener.accept()
    [path] = list((tmp_path / "outputs").rglob("result.json"))
    doc = json.loads(path.read_text())
    coding = doc["coding"]
    assert (coding["passed"], coding["total"]) == (0, 5), out.stderr[-2000:]
    for prob in coding["problems"]:
        assert prob["error"].startswith("HOSTILE"), prob      # its own message, carried as-is
        for success in ("connected", "setns", "wrote", "SPECSWEEP_", "HF_TOKEN"):
            assert success not in prob["error"], prob
    box = coding["sandbox"]
    assert box["mechanism"] == mech
    assert box["verified"] and box["fs_readonly"] and box["net_namespace"] and box["env_cleared"]
    texts = [out.stdout, out.stderr] + [p.read_text(errors="replace") for p in tmp_path.rglob("*")
                                        if p.is_file() and p != code]
    for name, value in canaries.items():
        assert not [t for t in texts if value in t], f"{name} reached the run's output"
    assert not Path("/tmp", marker).exists() and not (tmp_path / marker).exists()
    assert pids_with_marker(marker) == []
