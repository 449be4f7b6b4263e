"""``python -m sweep.doctor [overrides]``: is this box ready for this config? Starts nothing.

Takes the same overrides as ``python -m sweep`` and runs the pre-flight
checks the launcher would run before its first start -- over SSH for
``launcher=ssh`` (connection, host key, auth, GPUs vs ``hardware``, model
path, disk, Python headers, port, tools of the mode), or on this machine for
``launcher=local`` -- and prints them as a table. Use it before a long sweep
on a new box: a mismatch found here costs seconds, found by a sweep it costs
a 150 s restart per trial.

Exit status: 0 all checks passed (warnings allowed), 1 a check failed,
2 a config error (one line naming the key).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING, Sequence

from sweep.errors import EXIT_CONFIG, ConfigError

if TYPE_CHECKING:
    from launchers._ssh_preflight import Check
    from sweep.config import TrialConfig
    from sweep.render import Launch

USAGE = """usage: python -m sweep.doctor [OVERRIDE ...]

Run the pre-flight checks for the composed config without starting anything,
e.g.  python -m sweep.doctor launcher=ssh launcher.host=gpu-box hardware=b300
"""
STYLE = {"ok": "green", "warn": "yellow", "skip": "dim", "fail": "bold red"}


def _local_run(script: str) -> object:
    """Run a check script on this machine (launcher=local)."""
    from launchers._ssh_conn import Result

    proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=120)
    return Result(rc=proc.returncode, out=proc.stdout, err=proc.stderr)


def diagnose(trial: "TrialConfig", launch: "Launch") -> tuple[str, list["Check"]]:
    """(where the checks ran, the rows)."""
    from launchers._ssh_preflight import Check, run_checks
    from launchers._ssh_unit import check_launch
    from launchers.base import LaunchFailure

    rows: list[Check] = []
    try:
        check_launch(launch, systemd=trial.launcher.get("mode") == "systemd"
                     and trial.launcher.name == "ssh")
        rows.append(Check("launch", "ok", f"{len(launch.argv)} argv words, {len(launch.env)} env "
                          f"variables, fingerprint {launch.fingerprint}"))
    except LaunchFailure as f:
        rows.append(Check("launch", "fail", f.message))
    rows += _engine_rows(trial)
    if trial.launcher.name != "ssh":
        settings = {**trial.launcher.settings, "mode": "local", "workdir": os.getcwd()}
        rows += run_checks(_local_run, trial, launch, settings, port=trial.server.port,
                           port_owned=False)
        return "this machine (launcher=local)", rows

    from launchers.ssh import SSHLauncher

    lau = SSHLauncher(trial.launcher)
    lau.bind(trial)
    where = str(trial.launcher.get("host"))
    try:
        running, same = lau.probe(launch)
        remote = lau._remote
        assert remote is not None
        where = remote.target.label
        version = getattr(remote.transport, "remote_version", "") or ""
        rows.append(Check("ssh", "ok", f"connected to {where} ({version}); host key verified"))
        mode = trial.launcher.get("mode")
        state = ("a server of ours with this fingerprint runs (it would be reused)" if same else
                 "a server of ours with another fingerprint runs (it would be restarted)"
                 if running else "no server of ours runs")
        rows.append(Check(f"server ({mode})", "ok", state))
        rows += lau.checks(launch, trial.server.port, trial, port_owned=running)
    except LaunchFailure as f:
        rows.append(Check("ssh" if f.reason.startswith("ssh_") else f.reason, "fail",
                          f"{f.reason}: {f.message}"))
    finally:
        lau.stop()  # owns nothing here: only closes the connection
    return where, rows


def _engine_rows(trial: "TrialConfig") -> list["Check"]:
    """A server built by ``python -m sweep.engines``: is its cache entry complete?"""
    from launchers._ssh_preflight import Check

    install = trial.server.install
    if not install or trial.launcher.name == "ssh":
        return []
    from sweep._engine_build import complete

    exe = complete(install)
    if exe is None:
        return [Check("engine", "fail", f"{trial.server.name} {install.get('version')} is not built for this "
                      f"CPU ({install.get('cpu_target')}) in {install.get('dir')}: run "
                      f"python -m sweep.engines {trial.server.name}")]
    return [Check("engine", "ok", f"{trial.server.name} {install.get('version')} built: {exe}")]


def print_table(where: str, rows: Sequence["Check"]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"specsweep doctor: {where}", title_justify="left")
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    for row in rows:
        table.add_row(row.name, f"[{STYLE.get(row.status, '')}]{row.status}[/]", row.detail)
    Console(highlight=False).print(table)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in args):
        print(USAGE, end="")
        return 0
    from sweep.config import from_omegaconf
    from sweep.preflight import compose
    from sweep.render import render

    try:
        trial = from_omegaconf(compose(args))
    except ConfigError as err:
        print(err.one_line(), file=sys.stderr)
        return EXIT_CONFIG
    launch = render(trial)
    where, rows = diagnose(trial, launch)
    print_table(where, rows)
    failed = [r for r in rows if r.status == "fail"]
    if failed:
        print(f"{len(failed)} check(s) failed: " + ", ".join(r.name for r in failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
