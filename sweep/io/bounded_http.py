"""httpx transports that bound what a server's small answers may cost: size and total time.

httpx's timeouts are per operation: a server that trickles one byte every few
seconds, or streams a body without end, holds ``client.get("/metrics")`` (or
``/health``, ``/get_server_info``, ``/flush_cache``) for ever and fills memory
with it. Every client of the harness's admin requests is built on these
transports (httpx's own extension point, as its docs suggest for custom
behaviour): a body past ``max_bytes``, or not complete ``total_s`` after the
request went out, raises ``httpx.ReadError`` / ``httpx.ReadTimeout``, which the
callers already treat as "no answer". The streamed completions do not go
through httpx (:mod:`sweep.bench.transport`, bounded per event in
:mod:`sweep.bench.sse`).
"""

from __future__ import annotations

import time
from typing import Any, AsyncIterator, Iterator

import httpx

MAX_BYTES = 16 * 1024 * 1024  # /metrics of a large deployment is ~1 MiB; server info tens of KiB
TOTAL_S = 30.0


def _check(n: int, max_bytes: int, deadline: float, total_s: float) -> None:
    if n > max_bytes:
        raise httpx.ReadError(f"the answer is larger than {max_bytes >> 20} MiB")
    if time.monotonic() > deadline:
        raise httpx.ReadTimeout(f"the answer was not complete within {total_s:g} s")


class _Stream(httpx.SyncByteStream):
    def __init__(self, inner: Any, max_bytes: int, total_s: float) -> None:
        self.inner, self.max_bytes, self.total_s = inner, max_bytes, total_s
        self.deadline = time.monotonic() + total_s

    def __iter__(self) -> Iterator[bytes]:
        n = 0
        for chunk in self.inner:
            n += len(chunk)
            _check(n, self.max_bytes, self.deadline, self.total_s)
            yield chunk

    def close(self) -> None:
        self.inner.close()


class _AsyncStream(httpx.AsyncByteStream):
    def __init__(self, inner: Any, max_bytes: int, total_s: float) -> None:
        self.inner, self.max_bytes, self.total_s = inner, max_bytes, total_s
        self.deadline = time.monotonic() + total_s

    async def __aiter__(self) -> AsyncIterator[bytes]:
        n = 0
        async for chunk in self.inner:
            n += len(chunk)
            _check(n, self.max_bytes, self.deadline, self.total_s)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class BoundedTransport(httpx.HTTPTransport):
    """``httpx.Client(transport=BoundedTransport())``: every answer bounded in size and total time."""

    def __init__(self, *args: Any, max_bytes: int = MAX_BYTES, total_s: float = TOTAL_S, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_bytes, self.total_s = max_bytes, total_s

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        response.stream = _Stream(response.stream, self.max_bytes, self.total_s)
        return response


class AsyncBoundedTransport(httpx.AsyncHTTPTransport):
    """The same for ``httpx.AsyncClient``."""

    def __init__(self, *args: Any, max_bytes: int = MAX_BYTES, total_s: float = TOTAL_S, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_bytes, self.total_s = max_bytes, total_s

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        response.stream = _AsyncStream(response.stream, self.max_bytes, self.total_s)
        return response
