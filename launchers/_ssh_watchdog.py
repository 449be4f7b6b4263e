"""A watchdog on the box that stops a process-mode server when its controller goes.

Why: ``launcher.mode=process`` starts the server detached
(``setsid nohup``), so nothing on the box notices when the controller is
SIGKILLed -- the server would hold the GPUs until the next run. The local
launcher's reaper (:mod:`launchers._reaper`) cannot help: it runs on the
controller's machine. So, while a controller uses a remote server, it keeps
one more SSH channel open running a small ``sh`` script (``_HEAD`` + ``_TAIL``) on the box that
blocks reading its stdin. The controller never writes to it except
``release`` (a kept server at a normal exit: leave it) or ``stop`` (the
launcher stopped it itself). When the controller dies, its kernel closes
the TCP connection, sshd closes the channel, and the script reads end of
file.

What it can and cannot know: end of file also comes from a dropped
connection or a restarted sshd, so the script first waits
``launcher.remote_lease_s``: a controller that reconnects in that time
starts a new watchdog, which records itself in ``<run>/watch``, and the old
one leaves. Nobody took over: it stops the server -- the group if it still
carries this start's token, and every process carrying the token
(``stop_ours`` of :mod:`launchers._ssh_process`), SIGTERM then SIGKILL after
``launcher.reap_grace_s`` -- and notes it in ``server.log``. A connection
that dies *silently* (a cable pulled, the controller's machine powered off)
gives no end of file until sshd itself gives up on the connection
(``ClientAliveInterval`` x ``ClientAliveCountMax`` on the box; TCP keepalive
otherwise), so that bound is the box's sshd configuration, not ours; a
watchdog killed along with sshd (``pkill sshd``) protects nothing. The next
run on the box stops or reuses whatever is left either way.

Systemd mode has no watchdog: the unit belongs to systemd and keeps running
(``systemctl stop UNIT`` or the next run).
"""

from __future__ import annotations

import logging
import shlex
import time
from typing import TYPE_CHECKING, Any

from launchers._ssh_process import _FUNCS

if TYPE_CHECKING:
    from launchers._ssh_conn import Remote
    from sweep.launch import LauncherSettings, SSHSettings

log = logging.getLogger("launchers.ssh")

_HEAD = r"""
trap '' HUP PIPE
cd {run} 2>/dev/null || {{ echo 'gone'; exit 0; }}
tok=$(cat token 2>/dev/null); pg=$(cat pid 2>/dev/null)
[ -n "$tok" ] || {{ echo 'gone'; exit 0; }}
"""
_TAIL = r"""
echo $$ > watch.tmp && mv watch.tmp watch
echo "armed $$"
exec >/dev/null 2>&1
IFS= read -r line || line=
case "$line" in release|stop) exit 0;; esac
i=0
while [ $i -lt {lease} ]; do
  [ "$(cat watch 2>/dev/null)" = "$$" ] || exit 0
  sleep 0.1; i=$((i+1))
done
[ "$(cat token 2>/dev/null)" = "$tok" ] || exit 0
if running || [ -n "$(marked)" ]; then
  stop_ours {grace}
  rm -f pid
  echo "===== specsweep $(date -u '+%Y-%m-%dT%H:%M:%S+00:00') remote watchdog: the controller's \
SSH session ended and no controller took over within {lease_s:g} s: server stopped =====" >> server.log
fi
"""


class Watchdog:
    """The controller's end: one open channel running the watchdog script on the box."""

    def __init__(self, chan: Any, pid: int, remote: Remote, run_dir: str) -> None:
        self.chan = chan
        self.pid = pid  # on the box
        self.remote, self.run_dir = remote, run_dir

    @classmethod
    def arm(cls, remote: Remote, run_dir: str, *, lease_s: float, grace_s: float,
            timeout: float = 15.0) -> Watchdog | None:
        """Start the watchdog for whatever server of ours runs in ``run_dir`` (None: none)."""
        script = (_HEAD.format(run=shlex.quote(run_dir)) + _FUNCS
                  + _TAIL.format(lease=max(1, int(lease_s * 10)), lease_s=lease_s,
                                 grace=max(1, int(grace_s * 10))))
        chan = remote.transport.open_session(timeout=remote.target.connect_timeout)
        chan.exec_command("sh -c " + shlex.quote(script))
        out = b""
        deadline = time.monotonic() + timeout
        while b"\n" not in out and time.monotonic() < deadline and not chan.exit_status_ready():
            if chan.recv_ready():
                out += chan.recv(256)
            else:
                time.sleep(0.02)
        word, _, pid = out.decode(errors="replace").strip().partition(" ")
        if word != "armed" or not pid.isdigit():
            chan.close()
            if word != "gone":
                log.warning("no watchdog on %s (%r): if this controller is killed, the server "
                            "keeps running until the next run", remote.target.host, out[:80])
            return None
        return cls(chan, int(pid), remote, run_dir)

    def alive(self) -> bool:
        transport = self.chan.get_transport()
        return (not self.chan.closed and not self.chan.exit_status_ready()
                and transport is not None and transport.is_active())

    def _say(self, word: str) -> None:
        try:
            if self.alive():
                self.chan.sendall(word.encode() + b"\n")
                deadline = time.monotonic() + 5.0  # let it read the word before the channel goes
                while not self.chan.exit_status_ready() and time.monotonic() < deadline:
                    time.sleep(0.02)
        except Exception:  # noqa: BLE001 - a dead channel: its script reads EOF instead
            pass
        finally:
            self.chan.close()

    def release(self) -> None:
        """Hand the server over (``keep_server`` at a normal exit): the watchdog leaves it.

        On a dead channel (a drop, or paramiko's own atexit hook, which closes every
        connection before ours runs) the watchdog is past its end of file and in its
        lease: naming someone else in ``<run>/watch``, over a new connection, sends it away.
        """
        if self.alive():
            self._say("release")
            return
        self.chan.close()
        try:
            self.remote.run(f"echo released > {shlex.quote(self.run_dir)}/watch",
                            what="releasing the kept server")
        except Exception as exc:  # noqa: BLE001 - say what happens next, never fail the run
            log.warning("could not tell the watchdog on %s that the server is kept (%s): it "
                        "stops the server once its lease ends", self.remote.target.host, exc)

    def stop(self) -> None:
        """The launcher stopped the server itself."""
        self._say("stop")


class Guarded:
    """The watchdog side of :class:`launchers.ssh.SSHLauncher`, which provides the rest."""

    settings: LauncherSettings
    _lock: Any
    _backend: Any
    _remote: Remote | None
    _owned: bool
    _watchdog: Watchdog | None

    if TYPE_CHECKING:
        @property
        def ssh(self) -> SSHSettings: ...

    def announce_kept(self) -> str | None:
        """``keep_server`` at a normal end: the server stays; its watchdog is told so.

        Called by ``launchers.stop_all``; the line it logged, or None.
        """
        with self._lock:
            if not self._owned or self._backend is None:
                return None
            self._unguard(release=True)
            line = (f"keep_server: {self._backend.describe()} on {self.ssh.host} stays up after "
                    "this run; the next run with the same launch reuses it")
            log.warning("%s", line)
            return line

    def _guard(self) -> None:
        """Process mode: make sure a watchdog on the box ties the server to this session."""
        if self._backend is None or self._backend.name != "process" or not self._owned:
            return
        if self._watchdog is not None and self._watchdog.alive():
            return
        assert self._remote is not None
        try:
            self._watchdog = Watchdog.arm(self._remote, self._backend.run_dir,
                                          lease_s=self.ssh.remote_lease_s,
                                          grace_s=self.settings.reap_grace_s)
        except Exception as exc:  # noqa: BLE001 - a protection, never a failed trial
            self._watchdog = None
            log.warning("no watchdog on %s (%s): if this controller is killed, the server keeps "
                        "running until the next run", self.ssh.host, exc)

    def _unguard(self, *, release: bool = False) -> None:
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            if release:
                watchdog.release()
            else:
                watchdog.stop()
