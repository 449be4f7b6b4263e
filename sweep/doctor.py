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

import sys
from typing import TYPE_CHECKING, Sequence

from sweep import errors

if TYPE_CHECKING:
    from launchers.doctor import Check
    from sweep.compose.config import TrialConfig

USAGE = """usage: python -m sweep.doctor [OVERRIDE ...]

Run the pre-flight checks for the composed config without starting anything,
e.g.  python -m sweep.doctor launcher=ssh launcher.host=gpu-box hardware=b300
"""
STYLE = {"ok": "green", "warn": "yellow", "skip": "dim", "fail": "bold red"}


def _engine_rows(trial: "TrialConfig") -> list["Check"]:
    """An engine installed by ``python -m sweep.engines``: is its cache entry complete (on this machine)?"""
    from launchers.doctor import Check
    from sweep.engines import InstallError, missing, paths, status

    install = trial.server.install
    if not install or trial.launcher.backend.remote:
        return []
    model = trial.raw.get("model") or {}
    name, version = trial.server.name, install.get("version")
    try:
        gone = missing(install, model)
        found = paths(install, model)
    except InstallError as err:
        return [Check("engine", "fail", str(err))]
    if "server" in gone:
        rows = [Check("engine", "fail", f"{name} {version} is not installed for this CPU "
                      f"({install.get('cpu_target')}) in {install.get('dir')}: run python -m sweep.engines {name}")]
    else:
        rows = [Check("engine", "ok", f"{name} {version} installed: {found['server']}")]
    weights = [k for k in gone if k != "server"]
    if weights:
        rows.append(Check("engine weights", "fail", f"missing: {', '.join(f'{k} ({found[k]})' for k in weights)}; "
                          f"run python -m sweep.engines {name}"))
    for part, state in status(install).items():
        if state != "ok":
            rows.append(Check(f"engine {part}", "warn", f"unavailable: {state}"))
    return rows


def _box_row(trial: "TrialConfig") -> "Check":
    """The box's state now, over a second (sweep/bench/boxstate.py): what a trial's policy
    (``workload.busy_box``) would find. Only for a box this machine is (``launcher=local``)."""
    from rich.markup import escape

    from launchers.doctor import Check
    from sweep.bench import boxstate

    if trial.launcher.backend.remote:
        return Check("box state", "skip", "the box is remote: its trials record its state per cell")
    wl = trial.workload
    state = boxstate.Watch(busy_load=wl.busy_load).now(1.0)
    policy = f" -- workload.busy_box={wl.busy_box}" + (f" (waits up to {wl.busy_wait_s:g} s)"
                                                         if wl.busy_box != "mark" else "")
    if state.get("busy"):
        return Check("box state", "warn", escape(f"busy: {boxstate.describe(state)}{policy}"))
    status = "ok" if state.get("busy") is False else "skip"
    return Check("box state", status, escape(f"{boxstate.describe(state) or 'not readable here'}{policy}"))


def print_table(where: str, rows: Sequence[Check]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"specsweep doctor: {where}", title_justify="left")
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    for row in rows:
        table.add_row(row.name, f"[{STYLE.get(row.status, '')}]{row.status}[/]", row.detail)
    Console(highlight=False).print(table)


@errors.command("sweep.doctor")
def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in args):
        print(USAGE, end="")
        return 0
    flags = [a for a in args if a.startswith("-")]
    if flags:  # overrides only (Hydra's grammar would call it a lexer error)
        raise errors.ConfigError(flags[0], "is no option of python -m sweep.doctor: it takes config overrides "
                                 "only (python -m sweep.doctor --help)")
    from launchers.doctor import diagnose
    from sweep import secrets
    from sweep.compose.cmdline import compose
    from sweep.compose.config import from_omegaconf
    from sweep.compose.render import render

    secrets.install_log_masking()
    trial = from_omegaconf(compose(args))  # a ConfigError: one line, exit 2
    launch = render(trial)
    where, rows = diagnose(trial.launcher, launch, trial.server)
    rows = _engine_rows(trial) + rows + [_box_row(trial)]
    print_table(where, rows)
    failed = [r for r in rows if r.status == "fail"]
    if failed:
        print(f"{len(failed)} check(s) failed: " + ", ".join(r.name for r in failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
