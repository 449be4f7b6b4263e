"""wait_ready(): backoff over real HTTP, 404 fallback, fast crash detection, timeout."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest
from launcher_helpers import free_port

from launchers.base import LaunchFailure
from launchers.readiness import check_health, wait_ready


class _State:
    ready_at = 0.0
    health_generate = True
    hits: list[str] = []
    auth: list[str | None] = []


@pytest.fixture
def http() -> Iterator[tuple[str, type[_State]]]:
    state = type("S", (_State,), {"hits": [], "auth": []})

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def do_GET(self) -> None:
            state.hits.append(self.path)
            state.auth.append(self.headers.get("Authorization"))
            if self.path == "/health_generate" and not state.health_generate:
                code = 404
            elif self.path in ("/health", "/health_generate"):
                code = 200 if time.monotonic() >= state.ready_at else 503
            else:
                code = 404
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", state
    finally:
        srv.shutdown()
        srv.server_close()


def test_waits_through_503_then_ready(http: tuple[str, type[_State]]) -> None:
    url, state = http
    state.ready_at = time.monotonic() + 0.6
    waits: list[float] = []
    waited = wait_ready(url, timeout_s=5, poll_s=0.05, poll_max_s=0.2, alive=lambda: True,
                        api_key="k3y", on_wait=waits.append)
    assert 0.5 <= waited < 2.0
    assert waits and all(b >= a for a, b in zip(waits, waits[1:]))
    assert set(state.hits) == {"/health_generate"}
    assert state.auth[0] == "Bearer k3y"
    # backoff: far fewer polls than 0.6 s / 0.05 s
    assert len(state.hits) < 10


def test_falls_back_to_health_on_404(http: tuple[str, type[_State]]) -> None:
    url, state = http
    state.health_generate = False
    wait_ready(url, timeout_s=5, poll_s=0.05, poll_max_s=0.2, alive=lambda: True)
    assert state.hits[:2] == ["/health_generate", "/health"]
    assert check_health(url)


def test_connection_refused_then_crash_is_detected_within_poll_s() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    dies_at = time.monotonic() + 0.5
    t0 = time.monotonic()
    with pytest.raises(LaunchFailure) as err:
        # poll_max_s is large: crash detection must not wait for the next poll
        wait_ready(url, timeout_s=30, poll_s=0.1, poll_max_s=10, alive=lambda: time.monotonic() < dies_at)
    assert err.value.reason == "crashed"
    assert time.monotonic() - t0 < 0.5 + 0.4
    assert "connection refused" in err.value.message


def test_timeout(http: tuple[str, type[_State]]) -> None:
    url, state = http
    state.ready_at = time.monotonic() + 3600
    t0 = time.monotonic()
    with pytest.raises(LaunchFailure) as err:
        wait_ready(url, timeout_s=0.7, poll_s=0.05, poll_max_s=0.3, alive=lambda: True)
    assert err.value.reason == "timeout"
    assert 0.7 <= time.monotonic() - t0 < 1.5
    assert "HTTP 503" in err.value.message
    assert not check_health(url)
