"""Small helpers of the ssh launcher: addresses."""

from __future__ import annotations

import socket

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def loopback(host: str) -> bool:
    return host in LOOPBACK or host.startswith("127.")


def tcp_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
