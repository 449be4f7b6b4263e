"""llama.cpp's failures become failed trials with the right reason, as SGLang's do.

A bad flag, a missing model file, a port in use and a crash mid-benchmark,
each with the real binary: the trial fails (result.json says why, with the
log tail), the sweep goes on, and no server is left behind.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from launchers.classify import classify

from .conftest import explain, results

pytestmark = pytest.mark.slow


def _failed(tmp_path: Path, name: str) -> dict:
    (doc,) = results(tmp_path / name)
    assert doc["status"] == "failed", doc
    return doc


def test_bad_flag_and_missing_model_are_classified(sweep_cli, tmp_path: Path):
    proc = sweep_cli("spec=none", "server.extra_args=[--no-such-flag]", f"hydra.run.dir={tmp_path}/flag")
    assert proc.returncode == 1, explain(proc)  # a failed trial: recorded, then exit status 1
    doc = _failed(tmp_path, "flag")
    assert doc["failure"]["reason"] == "bad_flag", doc["failure"]
    assert "invalid argument: --no-such-flag" in doc["failure"]["log_tail"]

    proc = sweep_cli("spec=llamacpp_draft", f"model.draft_paths.draft={tmp_path}/no-draft.gguf",
                     f"hydra.run.dir={tmp_path}/model")
    assert proc.returncode == 1, explain(proc)
    doc = _failed(tmp_path, "model")
    assert doc["failure"]["reason"] == "model_missing", doc["failure"]
    assert "no-draft.gguf" in doc["failure"]["log_tail"]
    assert "python -m sweep.engines llamacpp" in doc["failure"]["message"]


def test_port_in_use(sweep_cli, tmp_path: Path, engine):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = sweep_cli("spec=none", f"hydra.run.dir={tmp_path}/port", port=port)
        assert proc.returncode == 1, explain(proc)
        assert _failed(tmp_path, "port")["failure"]["reason"] == "port_in_use"
        # llama-server's own message (when the port is taken after our check) is recognised too
        out = subprocess.run([str(engine["server"]), "-m", str(engine["draft"]), "--host", "127.0.0.1",
                              "--port", str(port), "-c", "256"], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "couldn't bind HTTP server socket" in out.stderr + out.stdout
    assert classify(out.stderr + out.stdout) == "port_in_use"


def test_crash_mid_benchmark_is_a_failed_trial(sweep_cli, tmp_path: Path):
    """SIGSEGV to llama-server once it is ready: requests fail, the trial says crashed."""
    job = tmp_path / "crash"
    killed: list[int] = []

    def killer() -> None:
        log = job / "server.log"
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace") if log.exists() else ""
            m = re.search(r"ready after [\d.]+ s \(pid (\d+)\)", text)
            if m:
                time.sleep(1.0)  # let the first request start
                os.kill(int(m.group(1)), signal.SIGSEGV)
                killed.append(int(m.group(1)))
                return
            time.sleep(0.2)

    th = threading.Thread(target=killer, daemon=True)
    th.start()
    proc = sweep_cli("spec=none", "workload.max_tokens=256", "workload.min_requests=4",
                     f"hydra.run.dir={job}")
    th.join(timeout=5)
    assert killed, "the server never became ready"
    assert proc.returncode == 1, explain(proc)
    doc = _failed(tmp_path, "crash")
    assert doc["failure"]["reason"] == "crashed", doc["failure"]
    assert doc["cells"][0]["errors"] >= 1
    with pytest.raises(ProcessLookupError):
        os.kill(killed[0], 0)
