"""One keep-alive HTTP/1.1 connection for streamed benchmark requests.

Why not httpx here (it still serves every admin request): the benchmark's
numbers depend on exactly when a request leaves and when each byte
arrives, and on how little CPU the client spends per chunk.

* The request (head + JSON body, encoded before the clock starts) goes out
  in ONE ``transport.write``; TTFT is measured from that hand-off, not from
  before the client library built the request.
* The body reaches the caller from ``data_received`` (one call per network
  read, chunked framing removed, with the arrival time), with no async
  generator between the socket and the SSE parser. On a streaming cell
  that is most of the client's CPU per token.
* :meth:`HttpConnection.connect` opens the connection ahead of time, so a
  cell can open and warm all C connections before its window.

Scope: what a benchmark needs from HTTP/1.1 -- one request in flight per
connection, Content-Length / chunked / until-close bodies, keep-alive,
TLS (https), TCP_NODELAY (asyncio sets it for TCP sockets). Every failure
raises :class:`TransportError` with a kind the client records.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Callable
from urllib.parse import urlsplit

from sweep.errors import EXIT_FAILED, SweepError

Sink = Callable[[bytes, float], None]

_SSL: ssl.SSLContext | None = None


class TransportError(SweepError):
    """A request that did not complete; ``kind`` is the client's error kind.

    The client records it as a failed request (``bench_errors`` decides the
    trial); it reaches a boundary only through a bug (exit 1).

    ``unanswered``: the connection closed before any byte of a response
    (on a reused keep-alive connection: the server closed it as the request
    went out, so the request never reached it and may be sent again).
    """

    exit_code = EXIT_FAILED

    def __init__(self, kind: str, detail: str, *, unanswered: bool = False) -> None:
        super().__init__(detail)
        self.kind = kind
        self.unanswered = unanswered


def _ssl_context() -> ssl.SSLContext:
    global _SSL
    if _SSL is None:
        _SSL = ssl.create_default_context()
    return _SSL


class _Protocol(asyncio.Protocol):
    """Parses one response at a time; body bytes go to the current sink."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.done: asyncio.Future[bool] | None = None   # result: keep-alive
        self.on_head: Callable[[int, dict[str, str]], Sink] | None = None
        self.sink: Sink | None = None
        self._buf = b""
        self._state = "idle"      # idle | head | length | chunk_size | chunk_data | chunk_crlf | trailer | close
        self._left = 0
        self._keep = True

    # -- asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._state == "close":
            self._finish(keep=False)
        elif self._state == "head" and not self._buf:
            self._fail(TransportError("disconnect", "connection closed before any byte of a response",
                                      unanswered=True))
        elif self._state != "idle":
            self._fail(TransportError("disconnect", "connection closed before the response ended"))

    def eof_received(self) -> bool | None:
        return False  # close the transport; connection_lost decides what that meant

    def data_received(self, data: bytes) -> None:
        try:
            self._received(data)
        except TransportError as exc:  # the response is malformed, or its sink refused it: closed here
            self._fail(exc)
            if self.transport is not None:
                self.transport.abort()

    def _received(self, data: bytes) -> None:
        now = time.perf_counter()
        state = self._state
        if state == "chunk_size" and not self._buf:
            # Fast path: one read = one whole chunk (a server's one write per step).
            nl = data.find(b"\r\n")
            if nl > 0:
                try:
                    size = int(data[:nl].split(b";", 1)[0], 16)
                except ValueError:
                    size = -1
                end = nl + 2 + size
                if size > 0 and len(data) >= end + 2 and data[end:end + 2] == b"\r\n":
                    self.sink(data[nl + 2:end], now)  # type: ignore[misc]
                    if len(data) == end + 2:
                        return
                    data = data[end + 2:]
        if self._buf:
            data = self._buf + data
            self._buf = b""
        self._parse(data, now)

    # -- parsing
    def _parse(self, data: bytes, now: float) -> None:
        while data:
            state = self._state
            if state == "head":
                end = data.find(b"\r\n\r\n")
                if end < 0:
                    if len(data) > 65536:
                        raise TransportError("http_error", "response head larger than 64 KiB")
                    self._buf = data
                    return
                self._on_head(data[:end])
                data = data[end + 4:]
            elif state == "chunk_size":
                nl = data.find(b"\r\n")
                if nl < 0:
                    self._buf = data
                    return
                try:
                    size = int(data[:nl].split(b";", 1)[0], 16)
                except ValueError:
                    raise TransportError("disconnect", "malformed chunked body") from None
                data = data[nl + 2:]
                if size == 0:
                    self._state = "trailer"
                else:
                    self._left, self._state = size, "chunk_data"
            elif state == "chunk_data":
                take = data[:self._left]
                self._left -= len(take)
                data = data[len(take):]
                self.sink(take, now)  # type: ignore[misc]
                if self._left == 0:
                    self._state = "chunk_crlf"
            elif state == "chunk_crlf":
                if len(data) < 2:
                    self._buf = data
                    return
                data = data[2:]
                self._state = "chunk_size"
            elif state == "trailer":
                nl = data.find(b"\r\n")
                if nl < 0:
                    self._buf = data
                    return
                data = data[nl + 2:]
                if nl == 0:  # the empty line that ends the trailer
                    self._finish(self._keep)
                    return
            elif state == "length":
                take = data[:self._left]
                self._left -= len(take)
                data = data[len(take):]
                self.sink(take, now)  # type: ignore[misc]
                if self._left == 0:
                    self._finish(self._keep)
                    return
            elif state == "close":
                self.sink(data, now)  # type: ignore[misc]
                return
            else:  # bytes nobody asked for (idle): the connection cannot be trusted
                raise TransportError("http_error", "unexpected bytes outside a response")

    def _on_head(self, raw: bytes) -> None:
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise TransportError("http_error", f"not an HTTP/1.x response: {lines[0][:80]!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        if 100 <= status < 200:  # an interim response: the real one follows
            return
        self._keep = headers.get("connection", "").lower() != "close" and parts[0] != "HTTP/1.0"
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._state = "chunk_size"
        elif "content-length" in headers:
            try:
                self._left = int(headers["content-length"])
            except ValueError:
                raise TransportError("http_error", "malformed Content-Length") from None
            self._state = "length"
        else:
            self._state, self._keep = "close", False
        assert self.on_head is not None
        self.sink = self.on_head(status, headers)  # before any body byte of this read is passed on
        if self._state == "length" and self._left == 0:
            self._finish(self._keep)

    def _finish(self, keep: bool) -> None:
        self._state = "idle"
        self.sink = None
        if self.done is not None and not self.done.done():
            self.done.set_result(keep)

    def _fail(self, exc: TransportError) -> None:
        self._state = "idle"
        self.sink = None
        fut = self.done
        if fut is not None and not fut.done():
            fut.set_exception(exc)


class HttpConnection:
    """One HTTP/1.1 keep-alive connection to ``base_url`` (reconnects when closed)."""

    def __init__(self, base_url: str, *, api_key: str | None = None, connect_timeout: float = 10.0) -> None:
        parts = urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path
        self.connect_timeout = connect_timeout
        self.headers: dict[str, str] = {}
        if api_key:
            self.headers["authorization"] = f"Bearer {api_key}"
        host_header = self.host if ":" not in self.host else f"[{self.host}]"
        default_port = 443 if self.tls else 80
        self._host_header = host_header if self.port == default_port else f"{host_header}:{self.port}"
        self._proto: _Protocol | None = None
        self.connects = 0

    async def __aenter__(self) -> "HttpConnection":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def open(self) -> bool:
        return self._proto is not None and not self._proto.closed

    async def connect(self) -> None:
        """Open the TCP (and TLS) connection now, unless one is open."""
        if self.open:
            return
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, proto = await loop.create_connection(
                    _Protocol, self.host, self.port,
                    ssl=_ssl_context() if self.tls else None,
                    server_hostname=self.host if self.tls else None)
        except TimeoutError:
            raise TransportError("connect", f"connect to {self.host}:{self.port} timed out") from None
        except OSError as exc:
            raise TransportError("connect", f"{type(exc).__name__}: {exc}") from None
        self._proto = proto
        self.connects += 1

    def encode(self, method: str, path: str, body: bytes) -> bytes:
        """The whole request as bytes (built before any clock starts)."""
        lines = [f"{method} {self.prefix}{path} HTTP/1.1", f"host: {self._host_header}",
                 "user-agent: specsweep", "accept: */*", "content-type: application/json",
                 f"content-length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in self.headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    async def send(self, request: bytes, on_head: Callable[[int, dict[str, str]], Sink],
                   started: Callable[[float], None] | None = None) -> None:
        """Send ``request``; ``on_head(status, headers)`` returns the body sink.

        ``started(t)`` gets the ``perf_counter`` just before the bytes are
        handed to the transport. Returns when the response has ended; raises
        :class:`TransportError` (the connection is then closed).
        """
        await self.connect()
        proto = self._proto
        assert proto is not None and proto.transport is not None
        loop = asyncio.get_running_loop()
        proto.done = loop.create_future()
        proto.on_head, proto.sink, proto._state = on_head, None, "head"
        if started is not None:
            started(time.perf_counter())
        proto.transport.write(request)
        try:
            keep = await proto.done
        except BaseException:
            self._drop()
            raise
        if not keep:
            self._drop()

    def _drop(self) -> None:
        if self._proto is not None and self._proto.transport is not None:
            self._proto.transport.abort()
        self._proto = None

    async def aclose(self) -> None:
        if self._proto is not None and self._proto.transport is not None:
            self._proto.transport.close()
        self._proto = None
