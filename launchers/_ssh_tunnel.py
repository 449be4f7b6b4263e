"""A local port forward (``ssh -L``) over the launcher's SSH connection.

Used when the server port cannot be reached directly: SGLang listens on the
remote loopback by default, and GPU boxes sit behind firewalls. Why not
Fabric's ``Connection.forward_local``: its listener thread dies on the first
connection the remote side refuses -- and "refused" is exactly what every
readiness poll sees while a server is still loading. Here a refused channel
just closes that one local connection (the poller sees a connection error
and keeps waiting), the listener binds an ephemeral port itself (no race on
"find a free port"), and each forwarded connection gets its own thread.
"""

from __future__ import annotations

import select
import socket
import threading
from typing import Any

CHUNK = 65536


class LocalForward:
    """Listen on 127.0.0.1:<ephemeral> and forward to ``remote_host:remote_port``."""

    def __init__(self, transport: Any, remote_host: str, remote_port: int) -> None:
        self.transport = transport
        self.remote = (remote_host, int(remote_port))
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._sock.settimeout(0.2)
        self.port: int = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept_loop, daemon=True,
                                        name=f"ssh-forward-{self.port}")
        self._thread.start()

    @property
    def active(self) -> bool:
        return (not self._stop.is_set() and self._thread.is_alive()
                and self.transport is not None and self.transport.is_active())

    def close(self) -> None:
        self._stop.set()
        try:
            self._sock.close()
        except OSError:
            pass
        self._thread.join(timeout=2.0)

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, peer = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._forward, args=(client, peer), daemon=True,
                             name=f"ssh-forward-{self.port}-conn").start()

    def _forward(self, client: socket.socket, peer: tuple[str, int]) -> None:
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            chan = self.transport.open_channel("direct-tcpip", self.remote, peer, timeout=10.0)
        except Exception:  # noqa: BLE001 - refused/closed: drop this connection only
            client.close()
            return
        try:
            _pump(client, chan, self._stop)
        except Exception:  # noqa: BLE001 - a peer went away: end this connection only
            pass
        finally:
            chan.close()
            client.close()


def _pump(sock: socket.socket, chan: Any, stop: threading.Event) -> None:
    """Copy bytes both ways until either side closes."""
    while not stop.is_set():
        readable, _, _ = select.select([sock, chan], [], [], 0.5)
        if sock in readable:
            try:
                data = sock.recv(CHUNK)
            except OSError:
                return
            if not data:
                chan.shutdown_write()
                _drain(chan, sock, stop)
                return
            chan.sendall(data)
        if chan in readable:
            data = chan.recv(CHUNK)
            if not data:
                return
            try:
                sock.sendall(data)
            except OSError:
                return


def _drain(chan: Any, sock: socket.socket, stop: threading.Event) -> None:
    """The client half-closed: deliver what the server still sends."""
    while not stop.is_set():
        readable, _, _ = select.select([chan], [], [], 0.5)
        if chan in readable:
            data = chan.recv(CHUNK)
            if not data:
                return
            try:
                sock.sendall(data)
            except OSError:
                return
