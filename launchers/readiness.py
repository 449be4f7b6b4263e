"""Wait until a starting server answers its health endpoint.

SGLang's ``/health_generate`` (and ``/health``) return 503 while the model
loads and 200 once a one-token generation works; before the HTTP server is
bound, connections are refused. Both mean "keep waiting". Loading a 590 GB
model takes minutes, so polls back off exponentially (``poll_s`` doubling up
to ``poll_max_s``) -- but a server that *dies* must be reported at once, not
after the next 5 s poll or the 15 min timeout: ``alive()`` is checked every
``poll_s`` even while backing off. Shared by the local and the SSH launcher
(for SSH, ``alive`` asks the remote side), like :func:`fetch_info`, what a
ready server says about itself (its version, its arguments: secrets masked).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Sequence

import httpx

from launchers.base import LaunchFailure
from sweep import secrets
from sweep.io.bounded_http import BoundedTransport

# One health request never blocks longer than this: a hung server must not
# stall crash detection or overshoot the deadline.
REQUEST_TIMEOUT_MAX_S = 5.0
INFO_PATHS = ("/get_server_info", "/server_info")


def health_paths(configured: str | None) -> tuple[str, ...]:
    """``server.health_path`` first, then ``/health`` (older servers and vLLM have only that)."""
    return tuple(dict.fromkeys([configured or "/health", "/health"]))


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _request_timeout(poll_max_s: float, remaining: float) -> httpx.Timeout:
    read = max(0.2, min(REQUEST_TIMEOUT_MAX_S, max(2.0, poll_max_s), remaining))
    return httpx.Timeout(read, connect=min(1.0, read))


def check_health(base_url: str, *, health_paths: Sequence[str] = ("/health_generate", "/health"),
                 api_key: str | None = None, timeout_s: float = 5.0) -> bool:
    """One health check (no waiting): does the server answer 200 now?

    Used before reusing a server; 404 on one path falls through to the next.
    """
    with httpx.Client(timeout=httpx.Timeout(timeout_s, connect=min(1.0, timeout_s)), headers=_headers(api_key),
                      trust_env=False, transport=BoundedTransport(total_s=2 * timeout_s)) as client:
        for path in health_paths:
            try:
                r = client.get(base_url.rstrip("/") + path)
            except httpx.HTTPError:
                return False
            if r.status_code == 404:
                continue
            return r.status_code == 200
    return False


def wait_ready(base_url: str, *, health_paths: Sequence[str] = ("/health_generate", "/health"),
               timeout_s: float, poll_s: float, poll_max_s: float, alive: Callable[[], bool],
               api_key: str | None = None,
               on_wait: Callable[[float], None] | None = None) -> float:
    """Block until ``base_url`` is healthy; return the seconds waited.

    Raises ``LaunchFailure("crashed", ...)`` as soon as ``alive()`` is False
    (the caller replaces the reason with the one mined from the log and adds
    the log tail) and ``LaunchFailure("timeout", ...)`` after ``timeout_s``.
    ``on_wait(elapsed)`` is called after each unsuccessful poll (progress).
    A 404 on a health path moves on to the next one (older servers and vLLM
    have only ``/health``). ``trust_env=False``: an ``HTTP_PROXY`` meant for
    the internet must not intercept polls of a server on this network.
    """
    paths = [p if p.startswith("/") else "/" + p for p in dict.fromkeys(health_paths)] or ["/health"]
    base = base_url.rstrip("/")
    poll_s = max(0.01, poll_s)
    poll_max_s = max(poll_s, poll_max_s)
    start = time.monotonic()
    deadline = start + timeout_s
    delay = poll_s
    idx = 0
    last = "no answer yet"
    with httpx.Client(headers=_headers(api_key), trust_env=False,
                      transport=BoundedTransport(total_s=2 * REQUEST_TIMEOUT_MAX_S)) as client:
        while True:
            if not alive():
                raise LaunchFailure("crashed", f"server process exited while starting ({last})")
            remaining = deadline - time.monotonic()
            try:
                r = client.get(base + paths[idx], timeout=_request_timeout(poll_max_s, max(remaining, 0.2)))
            except httpx.ConnectError:
                last = "connection refused"
            except httpx.TimeoutException:
                last = f"{paths[idx]} did not answer in time"
            except httpx.HTTPError as exc:  # reset, protocol error: still starting or dying
                last = f"{paths[idx]}: {type(exc).__name__}"
            else:
                if r.status_code == 200:
                    return time.monotonic() - start
                if r.status_code == 404 and idx + 1 < len(paths):
                    idx += 1
                    continue  # try the fallback path right away
                last = f"{paths[idx]} answered HTTP {r.status_code}"
            elapsed = time.monotonic() - start
            if on_wait is not None:
                on_wait(elapsed)
            if time.monotonic() >= deadline:
                raise LaunchFailure("timeout", f"not ready after {timeout_s:g} s ({last})")
            _sleep_watching(min(delay, max(0.0, deadline - time.monotonic())), poll_s, alive, last)
            delay = min(delay * 2, poll_max_s)


def _sleep_watching(total: float, step: float, alive: Callable[[], bool], last: str) -> None:
    """Sleep ``total`` seconds, checking ``alive()`` every ``step`` seconds."""
    end = time.monotonic() + total
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(step, left))
        if not alive():
            raise LaunchFailure("crashed", f"server process exited while starting ({last})")


def fetch_info(base_url: str, api_key: str | None, secret_values: Iterable[str] = (),
               paths: Sequence[str] = INFO_PATHS) -> dict[str, Any]:
    """Version and server args from the first of ``paths`` that answers (``server.info_paths``:
    SGLang's /get_server_info, llama.cpp's /props); {} if none works.

    Secrets masked: SGLang echoes every server argument, the API key included.
    """
    try:
        with httpx.Client(timeout=5.0, headers=_headers(api_key), trust_env=False,
                          transport=BoundedTransport(total_s=10.0)) as client:
            for path in paths:
                try:
                    r = client.get(base_url.rstrip("/") + path)
                    data = r.json() if r.status_code == 200 else None
                except (httpx.HTTPError, ValueError):
                    continue
                if isinstance(data, dict):
                    return dict(secrets.mask_tree(data, secrets.redactor(secret_values)))
    except Exception:  # noqa: BLE001 - info is a nicety: never fail a ready server over it
        pass
    return {}
