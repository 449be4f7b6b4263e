"""What a local launcher remembers about a server it started, across processes.

A server started with ``launcher.keep_server=true`` outlives the controller
that started it; the next ``python -m sweep`` is a new process with no
memory of it and would only see "port in use". So every server the local
launcher starts is described in a small JSON file,
``<state_dir>/<host>_<port>.json`` (default state dir:
``${XDG_STATE_HOME:-~/.local/state}/specsweep/servers``), written atomically
right after the process is spawned and removed when the launcher stops it.

Why a state file alone is not trusted: pids are recycled. A file naming pid
N only means "ours" if the process now running as N is the very one we
started -- same boot (``/proc/sys/kernel/random/boot_id``) and same start
time in clock ticks since boot (field 22 of ``/proc/<pid>/stat``), and it
still leads its own process group. Anything else makes the file *stale*: it
is removed and the process it names is never signalled. Without ``/proc``
(not Linux) nothing can be verified, so nothing is ever adopted or killed.

The controller that owns the server is recorded the same way (pid + start
ticks), so a second run on the same port never takes over a server that a
*live* run is still using; once that owner has exited, the server is free to
be adopted (reused) or replaced.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from sweep.io.atomic import write_atomic

if TYPE_CHECKING:
    from sweep.launch import LauncherSettings

VERSION = 1
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


# --------------------------------------------------------------- process identity


def boot_id() -> str | None:
    """This boot's random id (Linux); start ticks only compare within one boot."""
    try:
        return _BOOT_ID.read_text().strip() or None
    except OSError:
        return None


def _stat_fields(pid: int) -> list[bytes] | None:
    """``/proc/<pid>/stat`` from field 3 (state) on; None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:].split()  # the command name may hold spaces and ")"


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (None: no such process)."""
    f = _stat_fields(pid)
    if f is None or len(f) < 20:
        return None
    return int(f[19])  # field 22 (starttime); f[0] is field 3


def same_process(pid: int | None, ticks: int | None, boot: str | None) -> bool:
    """Whether ``pid`` is running (not a zombie) and is the process recorded as (ticks, boot)."""
    if not pid or pid <= 0 or ticks is None or boot is None or boot != boot_id():
        return False
    f = _stat_fields(pid)
    if f is None or len(f) < 20 or f[0] in (b"Z", b"X"):
        return False
    return int(f[19]) == ticks


def own_identity() -> tuple[int, int | None]:
    """(pid, start ticks) of this process."""
    return os.getpid(), start_ticks(os.getpid())


# --------------------------------------------------------------- the state file


@dataclass
class ServerState:
    host: str
    port: int
    base_url: str
    pid: int
    pgid: int
    start_ticks: int | None
    boot_id: str | None
    fingerprint: str
    log_path: str
    command: str  # redacted shell line, for humans
    started: str  # ISO time the process was spawned
    keep_server: bool
    owner_pid: int
    owner_start_ticks: int | None
    version: int = VERSION
    # SPECSWEEP_SERVER_MARK of its processes: the reaper of whoever adopts it finds them all
    mark: str | None = None

    def is_running(self) -> bool:
        """The recorded process is alive and really the one we started (never a recycled pid)."""
        if not same_process(self.pid, self.start_ticks, self.boot_id):
            return False
        try:
            return os.getpgid(self.pid) == self.pgid
        except OSError:
            return False

    def owner_alive(self) -> bool:
        """The controller that owns the server still runs (same boot, same start time)."""
        return same_process(self.owner_pid, self.owner_start_ticks, self.boot_id)

    def owned_by_me(self) -> bool:
        return (self.owner_pid, self.owner_start_ticks) == own_identity()

    def stop_command(self) -> str:
        return f"kill -TERM -- -{self.pgid}"


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or ""
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "state"
    return root / "specsweep" / "servers"


def state_dir(settings: LauncherSettings | None) -> Path:
    """``launcher.state_dir`` (``~`` expanded) or the XDG default."""
    value = settings.state_dir if settings is not None else None
    return Path(os.path.expanduser(str(value))) if value else default_state_dir()


def state_path(directory: Path, host: str, port: int) -> Path:
    safe = re.sub(r"[^A-Za-z0-9.-]", "-", host or "any") or "any"
    return directory / f"{safe}_{int(port)}.json"


def write_state(path: Path, state: ServerState) -> None:
    """Atomically (temp file + fsync + rename) write ``state``; owner-only permissions.

    The directory is created 0700 here and the file 0600 (``private``): it names the
    user's server processes, their command and port, for this user's next run only.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomic(path, dict(sorted(asdict(state).items())), private=True)  # flat: same bytes as sort_keys


def read_state(path: Path) -> ServerState | None:
    """The state in ``path``; None if there is none. Raises ValueError if it is unreadable."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(raw)
        if not isinstance(doc, Mapping):
            raise ValueError("not a JSON object")
        known = {f.name for f in fields(ServerState)}
        state = ServerState(**{k: v for k, v in doc.items() if k in known})
        state.pid, state.pgid, state.port = int(state.pid), int(state.pgid), int(state.port)
        return state
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path} is not a specsweep server state file ({exc})") from None


def remove_state(path: Path | None, pid: int | None = None) -> bool:
    """Remove ``path`` -- only if it still names ``pid`` (when given): never a newer server's file."""
    if path is None:
        return False
    if pid is not None:
        try:
            current = read_state(path)
        except ValueError:
            current = None
        if current is None or current.pid != pid:
            return False
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False


def states_on_port(directory: Path, port: int) -> list[tuple[Path, ServerState]]:
    """Every readable state file for ``port`` (any host)."""
    out = []
    try:
        candidates = sorted(directory.glob(f"*_{int(port)}.json"))
    except OSError:
        return []
    for p in candidates:
        try:
            st = read_state(p)
        except ValueError:
            continue
        if st is not None:
            out.append((p, st))
    return out


# --------------------------------------------------------------- an adopted process


class AdoptedProcess:
    """The part of ``subprocess.Popen`` the launcher uses, for a server it did not spawn.

    It is not our child: no exit status, no reaping (its parent -- init or a
    subreaper -- does that). ``poll()`` is None while the recorded process
    still runs; a zombie or a different process behind the pid counts as gone.
    """

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.pid = state.pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and not same_process(self.pid, self.state.start_ticks,
                                                        self.state.boot_id):
            self.returncode = 0  # unknown: not our child
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
            time.sleep(0.05)
        assert self.returncode is not None
        return self.returncode
