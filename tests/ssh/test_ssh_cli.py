"""The issue's done-when, as the user types it: ``python -m sweep launcher=ssh ...``.

Runs the real CLI in a subprocess against the test sshd, with the default
known_hosts location (``$HOME/.ssh/known_hosts`` of a temp HOME), secrets in
the environment, and MLflow on a sqlite store; then greps every file the run
left (result.json, server.log, Hydra's .hydra/, mlflow.db, mlruns/) and its
output for the secrets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from _support import free_port

from launchers.local import group_alive

API_KEY = "sk-cli-sentinel-3141"
PASSWORD = "pw-cli-sentinel-2718"


def _run(ssh_box, tmp_path: Path, *extra: str, mlflow: bool = False) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    key = ssh_box.keys.host.with_suffix(".pub").read_text().split()
    (home / ".ssh" / "known_hosts").write_text(f"[127.0.0.1]:{ssh_box.port} {key[0]} {key[1]}\n")
    env = {**os.environ, "HOME": str(home), "SPECSWEEP_API_KEY": API_KEY,
           "SPECSWEEP_SSH_PASSWORD": PASSWORD, "COLUMNS": "160"}
    env.pop("SSH_AUTH_SOCK", None)
    tracking = [f"mlflow.tracking_uri=sqlite:///{tmp_path}/mlflow.db"] if mlflow else ["mlflow.enabled=false"]
    cmd = [sys.executable, "-m", "sweep", "launcher=ssh", "launcher.host=127.0.0.1",
           f"launcher.port={ssh_box.port}", "launcher.user=root", *extra, "launcher.mode=process",
           "workload=smoke", *tracking, f"launcher.workdir={tmp_path / 'remote'}",
           "server.sim.load_seconds=0.3", f"server.port={free_port()}"]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)


def _result(tmp_path: Path) -> dict:
    (path,) = list((tmp_path / "outputs").glob("*/*/result.json"))
    return json.loads(path.read_text())


def _files_with(root: Path, *needles: str) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and "home" not in path.relative_to(root).parts[:1]:
            data = path.read_bytes()
            if any(n.encode() in data for n in needles):
                hits.append(str(path.relative_to(root)))
    return hits


def test_done_when_process_mode_trial_is_ok_and_leaks_no_secret(ssh_box, tmp_path: Path) -> None:
    res = _run(ssh_box, tmp_path, f"launcher.key_filename={ssh_box.keys.user}", mlflow=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    doc = _result(tmp_path)
    assert doc["status"] == "ok", doc["failure"]
    assert doc["server"]["reused"] is False and doc["cells"] and doc["coding"]["passed"] == 5
    assert doc["server"]["info"]["remote"]["mode"] == "process"
    assert doc["mlflow"]["run_id"]
    # nothing left running on the box, nothing secret anywhere
    run_dir = tmp_path / "remote" / "run"
    assert not (run_dir / "pid").exists()
    where = doc["server"]["info"]["remote"]["where"]  # "process group N in <run dir>"
    assert not group_alive(int(where.split()[2]))
    output = res.stdout + res.stderr
    assert API_KEY not in output and PASSWORD not in output
    assert _files_with(tmp_path, API_KEY, PASSWORD) == ["remote/run/run.sh"]  # the launch itself (0700)
    assert "Traceback" not in output


def test_wrong_key_is_a_failed_trial_without_traceback(ssh_box, tmp_path: Path) -> None:
    res = _run(ssh_box, tmp_path, f"launcher.key_filename={ssh_box.keys.wrong}")
    assert res.returncode == 1, res.stderr[-3000:]  # a failed single run exits 1, without a traceback
    doc = _result(tmp_path)
    assert doc["status"] == "failed" and doc["failure"]["reason"] == "ssh_auth"
    assert "Traceback" not in res.stdout + res.stderr
    assert PASSWORD not in res.stdout + res.stderr + json.dumps(doc)
