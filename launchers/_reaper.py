"""A watchdog per started server: when its owner dies, the server dies too.

Why a process of its own: nothing inside a SIGKILLed controller runs, and
``PR_SET_PDEATHSIG`` (:mod:`launchers._local_process`) only reaches the group
leader, fires when the spawning *thread* ends, and sends a signal a server
may ignore or sit on (uvicorn's "Waiting for background tasks to complete",
an engine finishing in-flight work); a ``setsid``'d grandchild never hears of
it. So the controller starts, before every server, a small stdlib-only
process (``python -I -S _reaper.py``) in its own session (a Ctrl-C or a kill
of the controller's group does not reach it) holding the read end of a pipe
whose write end only the controller holds. Lines on that pipe:

* ``watch <pgid> <start ticks>``: the server's group (the leader's start time
  proves it is the one spawned);
* ``snapshot``: note every process of the server now, answer ``ok`` on
  stdout (the owner asks right before it signals the group);
* ``release``: a normal end hands the server over (``keep_server``): leave;
* ``stop``: the owner stopped the server: stop what escaped the group, leave;
* end of file without ``release``/``stop`` -- the owner died -- or a change of
  the reaper's parent pid, or the death of an *anchor*
  (``SPECSWEEP_REAP_WITH=pid:ticks,...``, which the host pool's controller
  sets for its workers): reap.

Reaping: SIGTERM (+ SIGCONT for a stopped member), SIGINT at half the grace
(uvicorn's "second Ctrl-C"), SIGKILL at ``--grace`` s, rescanning until
nothing is left. "The server" is: its group while it has never been empty
(an id that emptied may be recycled and is never signalled again); every
process whose environment carries ``SPECSWEEP_SERVER_MARK=<mark>`` (set by
the launcher, inherited whatever session a descendant moves to); every
descendant of those; every process noted earlier by (pid, start time) --
every ``SNAPSHOT_S`` and on ``snapshot``. Without ``/proc`` only the group.
One line in the server log says why and how long it took. Limits:
docs/ARCHITECTURE.md ("Lifecycle").
"""

from __future__ import annotations

import datetime as _dt
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

MARK_ENV = "SPECSWEEP_SERVER_MARK"
ANCHORS_ENV = "SPECSWEEP_REAP_WITH"
TICK_S = 0.25  # how often the reaper checks its parent, anchors and group while idle
SCAN_S = 0.1  # how often it rescans while reaping
SNAPSHOT_S = 5.0  # how often it notes the server's processes while idle (~5 ms of CPU each)


# --------------------------------------------------------------- /proc


def _stat(pid: int | str) -> list[bytes] | None:
    """``/proc/<pid>/stat`` from field 3 (state) on; None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2:].split()


def start_ticks(pid: int) -> int | None:
    f = _stat(pid)
    return int(f[19]) if f is not None and len(f) > 19 else None


def alive_as(pid: int, ticks: int | None) -> bool:
    """``pid`` runs (not a zombie) and, when ``ticks`` is given, started at that time."""
    f = _stat(pid)
    if f is None or len(f) < 20 or f[0] in (b"Z", b"X"):
        return False
    return ticks is None or int(f[19]) == ticks


def anchor_spec(pid: int | None = None) -> str:
    """``pid:ticks`` for :data:`ANCHORS_ENV` (this process by default)."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{start_ticks(pid) or 0}"


def reap_with_me() -> dict[str, str]:
    """The environment entry that makes the reapers of a child's servers watch this process too
    (added to what this process already carries)."""
    return {ANCHORS_ENV: ",".join(a for a in (os.environ.get(ANCHORS_ENV), anchor_spec()) if a)}


def parse_anchors(text: str) -> list[tuple[int, int | None]]:
    out = []
    for item in text.split(","):
        pid, _, ticks = item.strip().partition(":")
        if pid.isdigit():
            out.append((int(pid), int(ticks) if ticks.isdigit() and int(ticks) else None))
    return out


def server_processes(mark: str | None, pgid: int | None,
                     known: dict[int, int] | None = None) -> dict[int, int]:
    """Live processes of the server, pid -> start ticks.

    Members of group ``pgid``, carriers of ``mark``, processes in ``known``
    (pid -> start ticks: seen earlier, still the same process), and every
    descendant of those. Zombies never count.
    """
    if not os.path.isdir("/proc/self"):
        return {}
    needle = f"{MARK_ENV}={mark}".encode() if mark else None
    me = os.getpid()
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    found: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        f = _stat(name)
        if f is None or len(f) < 20 or f[0] in (b"Z", b"X"):
            continue
        pid = int(name)
        parents[pid], ticks[pid] = int(f[1]), int(f[19])
        if (pgid is not None and int(f[2]) == pgid) or (known and known.get(pid) == ticks[pid]):
            found.add(pid)
        elif needle is not None:
            try:
                with open(f"/proc/{name}/environ", "rb") as fh:
                    if needle in fh.read().split(b"\0"):
                        found.add(pid)
            except OSError:
                pass
    grew = True
    while grew:  # descendants that dropped both the group and the mark
        grew = False
        for pid, ppid in parents.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    return {pid: ticks[pid] for pid in found}


# --------------------------------------------------------------- the owner's side


class Reaper:
    """The owner's end of one server's reaper (see the module docstring)."""

    def __init__(self, proc: subprocess.Popen[bytes], write_fd: int) -> None:
        self.proc = proc
        self._fd: int | None = write_fd

    @classmethod
    def start(cls, *, mark: str | None, grace_s: float, log_path: Path | None) -> Reaper:
        """Start the reaper process; raises OSError if it cannot be started."""
        r, w = os.pipe()  # both ends non-inheritable: no other child of ours gets the write end
        argv = [sys.executable, "-I", "-S", __file__, "--grace", f"{float(grace_s):g}"]
        if mark:
            argv += ["--mark", mark]
        if log_path is not None:
            argv += ["--log", str(log_path)]
        try:
            proc = subprocess.Popen(argv, stdin=r, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, start_new_session=True,
                                    close_fds=True)
        except OSError:
            os.close(w)
            raise
        finally:
            os.close(r)
        return cls(proc, w)

    def _send(self, line: str) -> bool:
        if self._fd is None:
            return False
        try:
            os.write(self._fd, line.encode() + b"\n")
            return True
        except OSError:  # it died: nothing listens any more
            return False

    def _close(self, timeout: float) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:  # pragma: no cover - stuck in a kill loop
            pass
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def watch(self, pgid: int, ticks: int | None) -> None:
        """Tell the reaper which process group is the server's."""
        self._send(f"watch {int(pgid)} {int(ticks or 0)}")

    def snapshot(self, timeout: float = 2.0) -> bool:
        """Have the reaper note every process of the server now, and wait until it has.

        Called before the owner signals the group: a child that left the group
        and cleared its environment is then still known once its parent is gone.
        """
        if not self._send("snapshot") or self.proc.stdout is None:
            return False
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        return bool(ready) and self.proc.stdout.readline().strip() == b"ok"

    def release(self) -> None:
        """Hand the server over (a kept server at a normal exit): the reaper leaves it alone."""
        self._send("release")
        self._close(timeout=5.0)

    def stop(self, timeout: float) -> None:
        """The owner stopped the server: stop what escaped its group, wait for the reaper."""
        self._send("stop")
        self._close(timeout=timeout)

    def alive(self) -> bool:
        return self._fd is not None and self.proc.poll() is None


# --------------------------------------------------------------- the reaper process


def _note(log: str | None, what: str) -> None:
    if not log:
        return
    when = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    try:
        with open(log, "ab") as f:
            f.write(f"===== specsweep {when} reaper: {what} =====\n".encode())
    except OSError:
        pass


def _signal(pids: Iterable[int], pgid: int | None, sig: int) -> None:
    if pgid is not None:
        try:
            os.killpg(pgid, sig)
        except OSError:
            pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


class _Watch:
    """What the reaper process knows about the server, and how it tells it is still ours."""

    def __init__(self, mark: str | None) -> None:
        self.mark = mark
        self.pgid: int | None = None
        self.known: dict[int, int] = {}  # pid -> start ticks of every process seen so far

    def set_group(self, pgid: int, ticks: int) -> None:
        """Trust the id only if its leader is the process the owner spawned (a zombie leader
        still reserves the id). Without /proc nothing can be checked: the group is taken."""
        f = _stat(pgid)
        if f is None:
            if not os.path.isdir("/proc/self") and self._group_exists(pgid):
                self.pgid = pgid
            return
        if len(f) > 19 and (not ticks or int(f[19]) == ticks):
            self.pgid = pgid

    @staticmethod
    def _group_exists(pgid: int) -> bool:
        try:
            os.killpg(pgid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True

    def check_group(self) -> None:
        """Forget the group once it is empty: its id may be recycled later."""
        if self.pgid is not None and not self._group_exists(self.pgid):
            self.pgid = None

    def scan(self) -> set[int]:
        """The server's live processes now; remembered (by start time) from here on."""
        self.check_group()
        now = server_processes(self.mark, self.pgid, self.known)
        self.known = now if now else {}
        return set(now)


def reap(watch: _Watch, grace_s: float) -> tuple[int, int, float]:
    """SIGTERM, SIGINT at grace/2, SIGKILL at grace, until nothing is left.

    Returns (processes signalled, processes SIGKILLed, seconds taken).
    """
    has_proc = os.path.isdir("/proc/self")
    t0 = time.monotonic()
    seen: set[int] = set()
    killed: set[int] = set()
    nudged = False
    while True:
        if has_proc:
            pids = watch.scan()
        else:
            watch.check_group()
            pids = set()
        # With /proc, zombies do not count (an init that never reaps would keep them forever).
        done = not pids if has_proc else watch.pgid is None
        if done:
            break
        elapsed = time.monotonic() - t0
        if not seen or pids - seen:
            for sig in (signal.SIGTERM, signal.SIGCONT):  # CONT: a stopped member acts on TERM
                _signal(pids - seen, watch.pgid if not seen else None, sig)
            seen |= pids
        if elapsed >= grace_s:
            _signal(pids, watch.pgid, signal.SIGKILL)
            killed |= pids
        elif not nudged and elapsed >= grace_s / 2:
            _signal(pids, watch.pgid, signal.SIGINT)
            nudged = True
        if elapsed > grace_s + 30.0:  # pragma: no cover - unkillable (D state): give up
            break
        time.sleep(SCAN_S)
    return len(seen), len(killed), time.monotonic() - t0


def _anchors_alive(anchors: list[tuple[int, int | None]]) -> bool:
    return all(alive_as(pid, ticks) for pid, ticks in anchors)


def _ack() -> None:
    try:
        os.write(1, b"ok\n")
    except OSError:  # the owner is gone; the verdict follows from the pipe
        pass


def _wait_for_verdict(watch: _Watch, anchors: list[tuple[int, int | None]]) -> str:
    """Block until the owner says ``release``/``stop`` or dies; the verdict.

    Meanwhile the server's processes are noted every ``SNAPSHOT_S`` (and on
    ``snapshot``), so one that left the group, cleared its environment and
    lost its parent is still known when the time comes.
    """
    owner = os.getppid()
    buf = b""
    next_snapshot = time.monotonic() + SNAPSHOT_S
    while True:
        ready, _, _ = select.select([0], [], [], TICK_S)
        if ready:
            data = os.read(0, 4096)
            if not data:
                return "died"
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                word, *rest = line.decode("ascii", "replace").split() or [""]
                if word == "watch" and len(rest) == 2 and rest[0].isdigit() and rest[1].isdigit():
                    watch.set_group(int(rest[0]), int(rest[1]))
                elif word == "snapshot":
                    watch.scan()
                    _ack()
                elif word in ("release", "stop"):
                    return word
        if _TERM[0]:
            return "sigterm"
        if os.getppid() != owner:
            return "died"
        if not _anchors_alive(anchors):
            return "anchor"
        if time.monotonic() >= next_snapshot:
            watch.scan()
            next_snapshot = time.monotonic() + SNAPSHOT_S
        else:
            watch.check_group()


_TERM = [False]


def main(argv: list[str]) -> int:
    opts = dict(zip(argv[::2], argv[1::2]))
    grace = float(opts.get("--grace", "3"))
    log = opts.get("--log")
    watch = _Watch(opts.get("--mark") or None)
    anchors = parse_anchors(os.environ.get(ANCHORS_ENV, ""))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the owner's business
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # acks to a dead owner: EPIPE, not death
    signal.signal(signal.SIGTERM, lambda *_: _TERM.__setitem__(0, True))
    verdict = _wait_for_verdict(watch, anchors)
    if verdict == "release":
        return 0
    n, killed, took = reap(watch, grace)
    if verdict == "stop":
        if n:
            _note(log, f"{n} process(es) had escaped the server's process group: stopped "
                  f"({killed} by SIGKILL at {grace:g} s)")
        return 0
    why = {"died": "its controller died", "anchor": "the controller of its pool died",
           "sigterm": "the reaper got SIGTERM"}[verdict]
    if n:
        _note(log, f"{why}: stopped the server's {n} process(es) in {took:.1f} s ({killed} by "
              f"SIGKILL at {grace:g} s)")
    else:
        _note(log, f"{why}: nothing of the server was left to stop")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
