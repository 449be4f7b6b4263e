"""The SSH connection of the ssh launcher: who we talk to, and how it fails.

Fabric 3 builds the connection (``~/.ssh/config`` aliases, ``ProxyJump``
gateways, key files, timeouts). Two things are deliberately *not* Fabric's
defaults:

* **Host keys.** Fabric's ``Connection`` trusts any unknown host key
  (paramiko ``AutoAddPolicy``). A launcher that types secrets and restarts
  servers must not: we load ``/etc/ssh/ssh_known_hosts`` and the user's
  known_hosts (``launcher.known_hosts`` replaces ``~/.ssh/known_hosts``, like
  OpenSSH's ``UserKnownHostsFile``) and, by default, *reject* unknown hosts
  (``launcher.host_key_policy=reject``; ``accept-new`` trusts and records a
  first-seen key, as ``StrictHostKeyChecking=accept-new``). A *changed* key
  is always refused. Gateways get the same policy.
* **Commands** run on raw paramiko channels (:meth:`Remote.run`), not
  ``Connection.run``: we need stdin without a pty, a hard timeout per
  command, exit codes, and exceptions that never quote the command line
  (it may carry an API key).

Every failure becomes a :class:`~launchers.base.LaunchFailure` with an SSH
reason: ``ssh_unreachable`` (refused, timeout, DNS), ``ssh_auth``,
``ssh_host_key`` (unknown or changed key), ``ssh_dropped`` (an established
connection died). Passwords and key passphrases come only from the
environment (:data:`PASSWORD_ENV`, :data:`PASSPHRASE_ENV`), never from the
config (:mod:`sweep.compose.settings` refuses them there), and their names
make :mod:`sweep.secrets` mask their values in everything we write.
"""

from __future__ import annotations

import logging
import os
import select
import shlex
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from launchers.base import LaunchFailure

if TYPE_CHECKING:
    from sweep.launch import SSHSettings

PASSWORD_ENV = "SPECSWEEP_SSH_PASSWORD"
PASSPHRASE_ENV = "SPECSWEEP_SSH_PASSPHRASE"
GLOBAL_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"


@dataclass(frozen=True, slots=True)
class Result:
    rc: int
    out: str
    err: str

    @property
    def ok(self) -> bool:
        return self.rc == 0


# --------------------------------------------------------------------------- failures


def _connect_failure(exc: BaseException, target: SSHSettings) -> LaunchFailure:
    """Map an exception raised while connecting to the reason a user can act on."""
    from paramiko.ssh_exception import (AuthenticationException, BadHostKeyException,
                                        ChannelException, NoValidConnectionsError, SSHException)

    where = target.label
    if isinstance(exc, BadHostKeyException):
        return LaunchFailure("ssh_host_key", f"the host key of {exc.hostname} does not match "
                             f"{target.user_known_hosts} (expected {exc.expected_key.get_name()} "
                             f"{exc.expected_key.get_base64()[:16]}..., got "
                             f"{exc.key.get_name()} {exc.key.get_base64()[:16]}...): the box was "
                             "reinstalled or someone is in between; verify it, then remove the old "
                             f"line (ssh-keygen -R '[{target.host}]:{target.port}' -f "
                             f"{target.user_known_hosts})")
    if isinstance(exc, UnknownHostKey):
        return LaunchFailure("ssh_host_key", f"{exc.hostname} is not in {target.user_known_hosts} "
                             "or /etc/ssh/ssh_known_hosts; add its key (ssh-keyscan -p "
                             f"{target.port} {target.host} >> {target.user_known_hosts}, after "
                             "checking the fingerprint) or set launcher.host_key_policy=accept-new")
    if isinstance(exc, AuthenticationException):
        keys = ", ".join(target.key_filename) or "default keys / agent"
        return LaunchFailure("ssh_auth", f"authentication to {where} failed with {keys} "
                             f"({type(exc).__name__}: {_first_line(exc)}); check launcher.user, "
                             f"launcher.key_filename, {PASSPHRASE_ENV} for an encrypted key, or "
                             f"{PASSWORD_ENV}")
    if isinstance(exc, ChannelException):
        return LaunchFailure("ssh_unreachable", f"the gateway could not open a connection to "
                             f"{target.host}:{target.port} ({_first_line(exc)})")
    if isinstance(exc, NoValidConnectionsError):
        return LaunchFailure("ssh_unreachable", f"connection refused by {where}: is sshd running "
                             "and launcher.port right?")
    if isinstance(exc, socket.gaierror):
        return LaunchFailure("ssh_unreachable", f"cannot resolve {target.host} ({exc.strerror})")
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return LaunchFailure("ssh_unreachable", f"no answer from {where} within "
                             f"{target.connect_timeout:g} s (launcher.connect_timeout)")
    if isinstance(exc, ConnectionRefusedError):
        return LaunchFailure("ssh_unreachable", f"connection refused by {where}")
    if isinstance(exc, OSError) and not isinstance(exc, SSHException):
        return LaunchFailure("ssh_unreachable", f"cannot reach {where}: {exc.strerror or exc}")
    if isinstance(exc, (SSHException, EOFError)):
        return LaunchFailure("ssh_unreachable", f"SSH handshake with {where} failed: {_first_line(exc)}")
    return LaunchFailure("ssh_unreachable", f"cannot connect to {where}: {type(exc).__name__}: "
                         f"{_first_line(exc)}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class UnknownHostKey(Exception):
    """Raised by our reject policy (paramiko's is a bare SSHException)."""

    def __init__(self, hostname: str) -> None:
        super().__init__(f"{hostname} not found in known_hosts")
        self.hostname = hostname


def _host_key_policy(target: SSHSettings) -> Any:
    import paramiko

    class Reject(paramiko.MissingHostKeyPolicy):
        def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:
            raise UnknownHostKey(hostname)

    class AcceptNew(paramiko.MissingHostKeyPolicy):
        """Trust a first-seen key and append it to the user's known_hosts."""

        def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:
            client.get_host_keys().add(hostname, key.get_name(), key)
            path = Path(target.user_known_hosts)
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open(path, "a", encoding="ascii") as f:
                f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")

    return AcceptNew() if target.host_key_policy == "accept-new" else Reject()


# --------------------------------------------------------------------------- the connection


class Remote:
    """One SSH connection (re-opened on demand) and the commands run over it."""

    def __init__(self, target: SSHSettings) -> None:
        if not target.host or target.host == "???":
            raise LaunchFailure("preflight", "error: launcher.host: is required for launcher=ssh "
                                "(e.g. launcher.host=gpu-box)")
        self.target = target
        self._conn: Any = None
        self._lock = threading.RLock()
        self.was_connected = False  # an established connection existed: losing it is ssh_dropped

    # ---- connecting

    def _connect_kwargs(self) -> dict[str, Any]:
        t = self.target
        kw: dict[str, Any] = {"banner_timeout": t.connect_timeout, "auth_timeout": t.connect_timeout,
                              "allow_agent": t.allow_agent}
        if t.key_filename:
            kw["key_filename"] = list(t.key_filename)
            kw["look_for_keys"] = False
        if os.environ.get(PASSWORD_ENV):
            kw["password"] = os.environ[PASSWORD_ENV]
        if os.environ.get(PASSPHRASE_ENV):
            kw["passphrase"] = os.environ[PASSPHRASE_ENV]
        return kw

    def _secure(self, conn: Any) -> None:
        """Our known_hosts files and policy, instead of Fabric's trust-everything default."""
        client = conn.client
        for path in (GLOBAL_KNOWN_HOSTS, self.target.user_known_hosts):
            if os.path.isfile(path):
                client.load_system_host_keys(path)
        client.set_missing_host_key_policy(_host_key_policy(self.target))

    def _build(self) -> Any:
        from fabric import Connection

        quiet = logging.getLogger("paramiko")
        if quiet.level == logging.NOTSET:  # "Connected"/"Authentication successful" at INFO: noise
            quiet.setLevel(logging.WARNING)

        t = self.target
        timeout = max(1, int(round(t.connect_timeout)))
        gateway = None
        if t.gateway:
            for hop in [h.strip() for h in t.gateway.split(",") if h.strip()]:
                gateway = Connection(hop, connect_timeout=timeout, gateway=gateway,
                                     connect_kwargs=self._connect_kwargs())
        conn = Connection(t.host, user=t.user, port=t.port, connect_timeout=timeout,
                          gateway=gateway, connect_kwargs=self._connect_kwargs())
        hop = conn
        while hop is not None and not isinstance(hop, str):  # ProxyJump hops from ~/.ssh/config too
            self._secure(hop)
            hop = hop.gateway
        return conn

    def open(self) -> None:
        """Connect (or reconnect after a drop); raise LaunchFailure with an SSH reason."""
        with self._lock:
            if self.connected:
                return
            reconnect = self.was_connected
            self.close()
            for path in self.target.key_filename:
                if not os.path.isfile(path):
                    raise LaunchFailure("ssh_auth", f"launcher.key_filename: {path} does not exist")
            conn = self._build()
            try:
                conn.open()
            except Exception as exc:  # noqa: BLE001 - every connect error becomes a reason
                _close_quietly(conn)
                failure = _connect_failure(exc, self.target)
                if reconnect and failure.reason == "ssh_unreachable":
                    raise LaunchFailure("ssh_dropped", f"lost the connection to {self.target.label} "
                                        f"and could not reconnect: {failure.message}") from None
                raise failure from None
            conn.transport.set_keepalive(15)
            self._conn = conn
            self.was_connected = True

    @property
    def connected(self) -> bool:
        conn = self._conn
        return conn is not None and conn.transport is not None and conn.transport.is_active()

    @property
    def transport(self) -> Any:
        self.open()
        return self._conn.transport

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            _close_quietly(conn)

    def dropped(self, what: str, exc: BaseException | None = None) -> LaunchFailure:
        """The failure for a connection that died under us (and forget it)."""
        self.close()
        detail = f" ({type(exc).__name__}: {_first_line(exc)})" if exc is not None else ""
        return LaunchFailure("ssh_dropped", f"the SSH connection to {self.target.label} dropped "
                             f"while {what}{detail}; a remote server we started may still run")

    # ---- commands

    def run(self, command: str, *, stdin: str | bytes | None = None, timeout: float = 60.0,
            what: str = "running a remote command") -> Result:
        """Run ``command`` (a shell line; quote every value with shlex.quote) and wait.

        A timeout means the connection stopped answering: it is closed and
        reported as ``ssh_dropped`` (the next call reconnects).
        """
        transport = self.transport
        data = stdin.encode() if isinstance(stdin, str) else stdin
        try:
            chan = transport.open_session(timeout=self.target.connect_timeout)
            try:
                # Always POSIX sh, whatever the login shell (bash, zsh, fish) is.
                chan.exec_command("sh -c " + shlex.quote(command))
                if data:
                    chan.sendall(data)
                chan.shutdown_write()
                return _collect(chan, timeout)
            finally:
                chan.close()
        except _Timeout:
            raise self.dropped(f"{what}: no answer within {timeout:g} s") from None
        except LaunchFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - paramiko raises many types for a dead link
            raise self.dropped(what, exc) from None

    def check(self, command: str, *, what: str, stdin: str | bytes | None = None,
              timeout: float = 60.0, redact: Callable[[str], str] = str) -> Result:
        """:meth:`run`, raising LaunchFailure("crashed") with stderr when it fails."""
        res = self.run(command, stdin=stdin, timeout=timeout, what=what)
        if not res.ok:
            msg = redact((res.err or res.out).strip()[-2000:])
            raise LaunchFailure("crashed", f"{what} failed on {self.target.host} "
                                f"(exit {res.rc}): {msg}", msg)
        return res


class _Timeout(Exception):
    pass


def _collect(chan: Any, timeout: float) -> Result:
    """Read stdout and stderr until the command exits and its output ended (no deadlock on either).

    The exit status alone is not the end: sshd may send it while the last of the
    output is still on its way (seen on a loaded box: a pre-flight's last lines cut
    off), so the channel's EOF (or its close) is waited for too.
    """
    out, err = bytearray(), bytearray()
    deadline = time.monotonic() + timeout
    while True:
        busy = False
        while chan.recv_ready():
            out += chan.recv(65536)
            busy = True
        while chan.recv_stderr_ready():
            err += chan.recv_stderr(65536)
            busy = True
        if chan.exit_status_ready() and (chan.eof_received or chan.closed) \
                and not chan.recv_ready() and not chan.recv_stderr_ready():
            break
        if (chan.closed or not transport_active(chan)) and not chan.exit_status_ready():
            raise EOFError("the channel closed before the command exited")
        if time.monotonic() > deadline:
            raise _Timeout()
        if not busy:
            select.select([chan], [], [], 0.05)
    rc = chan.recv_exit_status()
    if rc == -1 and not transport_active(chan):  # closed by a dying link, not by an exit
        raise EOFError("the connection closed before the command exited")
    return Result(rc=rc, out=out.decode("utf-8", "replace"), err=err.decode("utf-8", "replace"))


def transport_active(chan: Any) -> bool:
    transport = chan.get_transport()
    return transport is not None and transport.is_active()


def _close_quietly(conn: Any) -> None:
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - closing a dead connection may raise anything
        pass
