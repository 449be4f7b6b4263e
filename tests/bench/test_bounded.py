"""Admin answers are bounded in size and total time (sweep/bench/bounded.py), against a real
loopback HTTP server that misbehaves on purpose (a TEST DOUBLE): a body without end, a body
trickled one byte at a time. Before, httpx's per-read timeouts let both run for ever."""

from __future__ import annotations

import asyncio
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from launchers.readiness import check_health, fetch_info
from sweep.io import bounded_http as bounded
from sweep.bench.client import make_admin_client
from sweep.bench.matrix import flush_cache
from sweep.bench.serverstats import fetch_metrics


class Endless(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_args: object) -> None:
        pass

    def _endless(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()  # no length, no chunking: the body ends when the connection does
        try:
            if self.path.startswith("/trickle") or self.path == "/get_server_info":
                for _ in range(600):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.1)
            else:
                for _ in range(10_000):
                    self.wfile.write(b"sglang:x 1\n" * 6000)
        except OSError:
            pass

    def do_GET(self) -> None:
        if self.path == "/health":
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")
            return
        self._endless()

    do_POST = _endless


@pytest.fixture(scope="module")
def endless() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_metrics_without_end_are_cut_by_size(endless: str) -> None:
    t0 = time.monotonic()
    assert fetch_metrics(endless, timeout_s=5) == {}
    assert time.monotonic() - t0 < 60


def test_server_info_trickled_is_cut_by_total_time(endless: str) -> None:
    t0 = time.monotonic()
    assert fetch_info(endless, None, paths=("/get_server_info",)) == {}
    assert time.monotonic() - t0 < 30  # 10 s bound; the double would trickle for 60 s


def test_a_health_answer_is_still_read(endless: str) -> None:
    assert check_health(endless, health_paths=("/health",))


def test_the_async_admin_client_is_bounded_too(endless: str) -> None:
    async def go() -> str:
        async with make_admin_client(endless, timeout_s=2) as admin:
            return await flush_cache(admin, attempts=1)
    t0 = time.monotonic()
    assert asyncio.run(go()) == "failed"
    assert time.monotonic() - t0 < 30


def test_the_bound_raises_what_callers_already_catch() -> None:
    import httpx

    with pytest.raises(httpx.ReadError, match="larger than 1 MiB"):
        bounded._check(2 << 20, 1 << 20, time.monotonic() + 9, 9)
    with pytest.raises(httpx.ReadTimeout, match="within 3 s"):
        bounded._check(1, 1 << 20, time.monotonic() - 1, 3)
