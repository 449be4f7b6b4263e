"""Is this box ready for this launch? The checks behind ``python -m sweep.doctor``; starts nothing.

The public face of the pre-flight checks a launcher runs before its first
start (:mod:`launchers._ssh_preflight`): over SSH for ``launcher=ssh``
(connection, host key, auth, GPUs vs ``hardware``, model path, disk, Python
headers, port, tools of the mode), or on this machine for ``launcher=local``.
"""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING

from launchers._ssh_conn import Result
from launchers._ssh_preflight import DEFAULT_MIN_FREE_GB, Check, run_checks
from launchers._ssh_unit import check_launch
from launchers.base import LaunchFailure

if TYPE_CHECKING:
    from sweep.launch import Endpoint, Launch, LauncherSettings

__all__ = ["Check", "diagnose"]


def _local_run(script: str) -> Result:
    """Run a check script on this machine (launcher=local)."""
    proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=120)
    return Result(rc=proc.returncode, out=proc.stdout, err=proc.stderr)


def diagnose(settings: LauncherSettings, launch: Launch, server: Endpoint) -> tuple[str, list[Check]]:
    """(where the checks ran, the rows): ``fail`` rows would stop a start."""
    rows: list[Check] = []
    ssh = settings.ssh  # None unless the backend is launcher=ssh
    try:
        check_launch(launch, systemd=ssh is not None and ssh.mode == "systemd")
        rows.append(Check("launch", "ok", f"{len(launch.argv)} argv words, {len(launch.env)} env "
                          f"variables, fingerprint {launch.fingerprint}"))
    except LaunchFailure as f:
        rows.append(Check("launch", "fail", f.message))
    if ssh is None:
        rows += run_checks(_local_run, launch, port=server.port, port_owned=False, mode="local",
                           workdir=os.getcwd(), min_free_gb=DEFAULT_MIN_FREE_GB)
        return "this machine (launcher=local)", rows

    from launchers.ssh import SSHLauncher

    lau = SSHLauncher(settings)
    where = ssh.host
    try:
        running, same = lau.probe(launch)
        where, version = lau.connection()
        rows.append(Check("ssh", "ok", f"connected to {where} ({version}); host key verified"))
        state = ("a server of ours with this fingerprint runs (it would be reused)" if same else
                 "a server of ours with another fingerprint runs (it would be restarted)"
                 if running else "no server of ours runs")
        rows.append(Check(f"server ({ssh.mode})", "ok", state))
        rows += lau.checks(launch, server.port, port_owned=running)
    except LaunchFailure as f:
        rows.append(Check("ssh" if f.reason.startswith("ssh_") else f.reason, "fail",
                          f"{f.reason}: {f.message}"))
    finally:
        lau.stop()  # owns nothing here: only closes the connection
    return where, rows
