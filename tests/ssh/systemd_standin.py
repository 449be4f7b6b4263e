"""STAND-IN for ``systemctl`` and ``journalctl`` -- tests only.

There is no systemd PID 1 in the test container, so the ssh launcher's
``mode=systemd`` runs against this stand-in, placed first on the remote PATH
of the test sshd. It is deliberately *stricter* than systemd where that
catches launcher bugs:

* unit files are parsed with systemd's documented rules (quoting, C escapes,
  ``%%``, ``$$``/``${VAR}`` expansion, ``\\;``, drop-ins, ``EnvironmentFile=``)
  by standin_unitfile.py, written independently of the launcher's writer;
  anything it does not understand is an error, not a guess;
* ``restart`` uses the unit as loaded by the last ``daemon-reload``, and fails
  if the file changed since (real systemd would only warn and run the old
  command);
* the parsed argv and environment are saved (``loaded/<unit>.json``) so tests
  compare them with the rendered launch word for word.

The service runs as a process group under a small supervisor that stamps
each output line with the time (the "journal"); ``stop`` signals the group.
Usage: ``systemd_standin.py --config CFG.json systemctl|journalctl ARGS...``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from standin_unitfile import UnitError, expand_env, load_unit, parse_env_file

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


# ------------------------------------------------------------------ state


class Standin:
    def __init__(self, config: dict[str, Any]) -> None:
        self.unit_dirs = list(config["unit_dirs"])
        self.state = Path(config["state_dir"])
        self.state.mkdir(parents=True, exist_ok=True)

    def _dir(self, unit: str) -> Path:
        d = self.state / unit
        d.mkdir(parents=True, exist_ok=True)
        return d

    def _read(self, unit: str, name: str, default: str = "") -> str:
        p = self._dir(unit) / name
        return p.read_text().strip() if p.exists() else default

    def _write(self, unit: str, name: str, value: str) -> None:
        (self._dir(unit) / name).write_text(value)

    def _group_alive(self, unit: str) -> bool:
        pg = self._read(unit, "pgid")
        if not pg:
            return False
        try:
            os.killpg(int(pg), 0)
        except ProcessLookupError:
            return False
        return any(_pgrp(p) == int(pg) and _state(p) not in "ZX"
                   for p in map(int, filter(str.isdigit, os.listdir("/proc"))))

    def active_state(self, unit: str) -> str:
        status = self._read(unit, "status", "inactive")
        if status == "active" and not self._group_alive(unit):
            return "failed"
        return status

    def daemon_reload(self) -> int:
        units = {p.name for d in self.unit_dirs for p in Path(d).glob("*.service")}
        rc = 0
        for unit in sorted(units):
            try:
                loaded = load_unit(unit, self.unit_dirs)
            except UnitError as exc:
                print(f"stand-in systemd: {unit}: {exc}", file=sys.stderr)
                (self._dir(unit) / "loaded.json").unlink(missing_ok=True)
                rc = 1
                continue
            self._write(unit, "loaded.json", json.dumps(loaded, indent=1))
        return rc

    def start(self, unit: str) -> int:
        p = self._dir(unit) / "loaded.json"
        if not p.exists():
            print(f"Failed to start {unit}: Unit {unit} not found or failed to load.", file=sys.stderr)
            return 5
        loaded = json.loads(p.read_text())
        for f, content in loaded["files"].items():
            if not Path(f).is_file() or Path(f).read_text() != content:
                print(f"stand-in systemd: {f} changed on disk since daemon-reload", file=sys.stderr)
                return 1
        env = {"PATH": DEFAULT_PATH, "LANG": "C.UTF-8", **loaded["env"]}
        for ef in loaded["env_files"]:
            optional = ef.startswith("-")
            path = Path(ef.lstrip("-"))
            if not path.is_file():
                if optional:
                    continue
                print(f"Failed to load environment file {path}", file=sys.stderr)
                return 1
            env.update(parse_env_file(path.read_text()))
        argv = expand_env(loaded["argv_raw"], env)
        loaded["argv"] = argv
        p.write_text(json.dumps(loaded, indent=1))
        self._write(unit, "status", "active")
        self._write(unit, "exit", "")
        sup = subprocess.Popen([sys.executable, __file__, "--supervise", str(self.state), unit],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        self._write(unit, "pgid", str(sup.pid))
        return 0

    def stop(self, unit: str) -> int:
        if self._group_alive(unit):
            pg = int(self._read(unit, "pgid"))
            loaded = json.loads(self._read(unit, "loaded.json", "{}") or "{}")
            self._write(unit, "status", "deactivating")
            _kill(pg, signal.SIGTERM)
            deadline = time.monotonic() + float(loaded.get("stop_s", 90))
            while self._group_alive(unit) and time.monotonic() < deadline:
                time.sleep(0.05)
            if self._group_alive(unit):
                _kill(pg, signal.SIGKILL)
                while self._group_alive(unit):
                    time.sleep(0.05)
        if self.active_state(unit) != "failed":
            self._write(unit, "status", "inactive")
        return 0


def _pgrp(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        return int(stat[stat.rfind(b")") + 2:].split()[2])
    except (OSError, IndexError, ValueError):
        return -1


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        return stat[stat.rfind(b")") + 2:].split()[0].decode()
    except (OSError, IndexError):
        return "X"


def _kill(pg: int, sig: int) -> None:
    try:
        os.killpg(pg, sig)
    except ProcessLookupError:
        pass


def supervise(state_dir: str, unit: str) -> None:
    """Run the service (same process group), stamping each output line into the journal."""
    d = Path(state_dir) / unit
    loaded = json.loads((d / "loaded.json").read_text())
    env = {"PATH": DEFAULT_PATH, "LANG": "C.UTF-8", **loaded["env"]}
    for ef in loaded["env_files"]:
        if Path(ef.lstrip("-")).is_file():
            env.update(parse_env_file(Path(ef.lstrip("-")).read_text()))
    with open(d / "journal", "a", encoding="utf-8") as journal:
        try:
            proc = subprocess.Popen(loaded["argv"], cwd=loaded["workdir"], env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT)
        except OSError as exc:
            journal.write(f"{time.time():.6f}\t{unit}: Failed to execute: {exc}\n")
            (d / "exit").write_text("203")
            (d / "status").write_text("failed")
            return
        assert proc.stdout is not None
        for raw in iter(proc.stdout.readline, b""):
            journal.write(f"{time.time():.6f}\t{raw.decode('utf-8', 'replace').rstrip()}\n")
            journal.flush()
        code = proc.wait()
    (d / "exit").write_text(str(code))
    (d / "status").write_text("inactive" if code == 0 else "failed")


# ------------------------------------------------------------------ commands


def systemctl(si: Standin, args: list[str]) -> int:
    if args == ["--version"]:
        print("systemd 252 (specsweep test STAND-IN)")
        return 0
    if not args:
        print("stand-in systemctl: no command", file=sys.stderr)
        return 1
    cmd, rest = args[0], args[1:]
    if cmd == "daemon-reload" and not rest:
        return si.daemon_reload()
    if cmd in ("start", "restart", "stop", "is-active") and len(rest) == 1:
        unit = rest[0]
        if cmd == "is-active":
            state = si.active_state(unit)
            print(state)
            return 0 if state == "active" else 3
        if cmd == "stop":
            return si.stop(unit)
        if cmd == "restart":
            si.stop(unit)
        return si.start(unit)
    if cmd == "show" and len(rest) == 4 and rest[0] == "-p" and rest[2] == "--value":
        prop, unit = rest[1], rest[3]
        if prop == "ExecMainStatus":
            print(si._read(unit, "exit", "0") or "0")
            return 0
        if prop == "MainPID":
            print(si._read(unit, "pgid", "0") if si.active_state(unit) == "active" else "0")
            return 0
    if cmd == "cat" and len(rest) == 1:
        try:
            loaded = load_unit(rest[0], si.unit_dirs)
        except UnitError as exc:
            print(f"No files found for {rest[0]}: {exc}", file=sys.stderr)
            return 1
        for f, content in loaded["files"].items():
            print(f"# {f}\n{content}")
        return 0
    print(f"stand-in systemctl: unsupported arguments {args}", file=sys.stderr)
    return 1


def journalctl(si: Standin, args: list[str]) -> int:
    unit, since, cat = None, None, False
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-u":
            unit, i = args[i + 1], i + 2
        elif a == "--since":
            since, i = args[i + 1], i + 2
        elif a == "-o":
            if args[i + 1] != "cat":
                print(f"stand-in journalctl: unsupported output {args[i + 1]}", file=sys.stderr)
                return 1
            cat, i = True, i + 2
        elif a in ("--no-pager", "-q"):
            i += 1
        else:
            print(f"stand-in journalctl: unsupported argument {a}", file=sys.stderr)
            return 1
    if unit is None:
        print("stand-in journalctl: -u UNIT is required", file=sys.stderr)
        return 1
    t0 = 0.0
    if since:
        t0 = (float(since[1:]) if since.startswith("@")
              else datetime.strptime(since, "%Y-%m-%d %H:%M:%S").timestamp())
    journal = si.state / unit / "journal"
    if not journal.exists():
        return 0
    for line in journal.read_text(encoding="utf-8").splitlines():
        stamp, _, text = line.partition("\t")
        if float(stamp) >= t0:
            prefix = "" if cat else time.strftime("%b %d %H:%M:%S ", time.localtime(float(stamp))) + f"standin {unit}: "
            print(prefix + text)
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--supervise"]:
        supervise(argv[1], argv[2])
        return 0
    if argv[:1] != ["--config"] or len(argv) < 3:
        print("usage: systemd_standin.py --config CFG systemctl|journalctl ARGS", file=sys.stderr)
        return 2
    si = Standin(json.loads(Path(argv[1]).read_text()))
    tool, args = argv[2], argv[3:]
    return systemctl(si, args) if tool == "systemctl" else journalctl(si, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
