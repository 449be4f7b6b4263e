"""TEST DOUBLE: a deliberately misbehaving OpenAI-style streaming server.

The real simulator behaves; this small server (raw asyncio over real
loopback HTTP/1.1, chunked transfer encoding, keep-alive) misbehaves on
purpose so the harness's error handling is exercised against real sockets:
malformed SSE, non-JSON bodies, 4xx/5xx, a disconnect mid-stream, a stall,
an error event, a stream without usage. The request's ``model`` field picks
the behaviour; ``mixed:<a>,<b>,...`` cycles through behaviours per request.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from typing import Any

from _support import free_port

TOKENS_PER_CHUNK = 4
CHUNKS = 3



def _event(obj: Any) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def _chunk(i: int, *, meta: bool = True) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "delta": {"content": f"tok{i} " * TOKENS_PER_CHUNK},
                              "finish_reason": None}
    if meta:
        choice["meta_info"] = {"completion_tokens": (i + 1) * TOKENS_PER_CHUNK, "spec_verify_ct": i + 1}
    return {"id": "x", "object": "chat.completion.chunk", "choices": [choice]}


def _good_events(usage: bool = True) -> list[bytes]:
    evs = [_event({"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]})]
    evs += [_event(_chunk(i)) for i in range(CHUNKS)]
    evs.append(_event({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}))
    if usage:
        n = CHUNKS * TOKENS_PER_CHUNK
        evs.append(_event({"choices": [], "usage": {"prompt_tokens": 17, "completion_tokens": n,
                                                    "total_tokens": 17 + n}}))
    evs.append(b"data: [DONE]\n\n")
    return evs


class MisbehavingServer:
    """Runs in a background thread; ``url`` is http://127.0.0.1:<free port>."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.requests = 0
        self.connections = 0
        # every chat request's last message and max_tokens, in arrival order
        self.prompts: list[tuple[str, int | None]] = []
        self._cycles: dict[str, itertools.cycle[str]] = {}
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="misbehaving-server")
        self._server: asyncio.AbstractServer | None = None

    def __enter__(self) -> "MisbehavingServer":
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("test double did not start")
        return self

    def __exit__(self, *exc: Any) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
            self._ready.set()

        self._loop.run_until_complete(start())
        self._loop.run_forever()
        self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:  # keep-alive: several requests per connection
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, v in
                           (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
                body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                if not await self._respond(method, path, body, writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _respond(self, method: str, path: str, body: bytes, w: asyncio.StreamWriter) -> bool:
        """Write one response; return False when the connection must close."""
        if path != "/v1/chat/completions":
            await _plain(w, 404, b'{"detail": "Not Found"}', "application/json")
            return True
        self.requests += 1
        payload = json.loads(body)
        model = payload.get("model", "ok")
        messages = payload.get("messages") or [{}]
        self.prompts.append((str(messages[-1].get("content", "")), payload.get("max_tokens")))
        if model.startswith("mixed:"):
            cyc = self._cycles.setdefault(model, itertools.cycle(model[6:].split(",")))
            model = next(cyc)
        if model == "http_400":
            await _plain(w, 400, b'{"object": "error", "message": "bad request: max_tokens too large"}',
                         "application/json")
            return True
        if model == "http_500":
            await _plain(w, 500, b"Internal Server Error", "text/plain")
            return True
        if model == "mislabeled_sse":  # an SSE body sent as application/json, all at once
            await _plain(w, 200, b"".join(_good_events()), "application/json")
            return True
        if model == "non_json":
            await _plain(w, 200, b"<html><body>gateway says hello</body></html>", "text/html")
            return True
        await _sse_head(w)
        if model == "ok":
            events = _good_events()
        elif model == "slow_ok":  # 50 ms before the first token
            await asyncio.sleep(0.05)
            events = _good_events()
        elif model == "no_usage":
            events = _good_events(usage=False)
        elif model == "malformed_sse":
            events = _good_events()[:2] + [b'data: {"choices": [{"delta": \n\n']
        elif model == "wrong_shape":
            events = _good_events()[:2] + [_event({"choices": {"0": "not a list"}})]
        elif model == "usage_list":  # usage of the wrong shape (an AttributeError ended the trial)
            events = _good_events(usage=False)[:-1] + [_event({"choices": [], "usage": [1, 2]}), b"data: [DONE]\n\n"]
        elif model == "usage_past_max_tokens":  # more tokens than the request allowed (max_tokens=16)
            events = _good_events(usage=False)[:-1] + [
                _event({"choices": [], "usage": {"prompt_tokens": 17, "completion_tokens": 100000}}),
                b"data: [DONE]\n\n"]
        elif model == "usage_fewer":  # 64 events of text, 3 tokens by usage (was scored 2,304 tok/s, ok)
            events = _good_events(usage=False)[:1] + [_event(_chunk(i % CHUNKS, meta=False)) for i in range(64)] + [
                _event({"choices": [], "usage": {"prompt_tokens": 17, "completion_tokens": 3}}), b"data: [DONE]\n\n"]
        elif model == "usage_twice":  # two usage blocks of one answer that disagree
            n = CHUNKS * TOKENS_PER_CHUNK
            events = _good_events()[:-1] + [_event({"choices": [], "usage": {"prompt_tokens": 17,
                                                                             "completion_tokens": n - 1}}),
                                            b"data: [DONE]\n\n"]
        elif model in ("running_short", "running_exact"):  # continuous usage; the final block short or equal
            n = CHUNKS * TOKENS_PER_CHUNK
            evs = [_event({**_chunk(i), "usage": {"prompt_tokens": 17, "completion_tokens": (i + 1) * TOKENS_PER_CHUNK}})
                   for i in range(CHUNKS)]
            final = n + 2 if model == "running_short" else n
            events = _good_events()[:1] + evs + [_event({"choices": [], "usage": {"prompt_tokens": 17,
                                                                                  "completion_tokens": final}}),
                                                 b"data: [DONE]\n\n"]
        elif model == "one_event":  # every token in one content event: no gap, the ITL is unknown
            n = CHUNKS * TOKENS_PER_CHUNK
            events = _good_events()[:1] + [_event(_chunk(0, meta=False)),
                                           _event({"choices": [], "usage": {"prompt_tokens": 17,
                                                                            "completion_tokens": n}}),
                                           b"data: [DONE]\n\n"]
        elif model == "content_not_text":
            events = _good_events()[:1] + [_event({"choices": [{"index": 0, "delta": {"content": 5}}]})]
        elif model == "finish_not_text":
            events = _good_events()[:2] + [_event({"choices": [{"index": 0, "delta": {}, "finish_reason": [1]}]})]
        elif model == "crlf":
            events = [ev.replace(b"\n", b"\r\n") for ev in _good_events()]
        elif model == "error_event":
            events = _good_events()[:2] + [_event({"error": {"message": "boom", "code": 500}})]
        elif model == "disconnect":
            for ev in _good_events()[:3]:
                await _write_chunk(w, ev)
            w.transport.abort()  # no terminating chunk: the body is cut short
            return False
        elif model == "endless_event":  # one event that never ends: 64 KiB writes, no blank line, for good
            await _write_chunk(w, b'data: {"choices": [{"index": 0, "text": "')
            for _ in range(100_000):
                await _write_chunk(w, b"x" * 65536)
            return False
        elif model == "stall":
            await _write_chunk(w, _good_events()[1])
            await asyncio.sleep(30)
            return False
        else:
            events = [_event({"error": {"message": f"unknown behaviour {model}"}})]
        for ev in events:
            await _write_chunk(w, ev)
        await _write_chunk(w, b"")
        return True


async def _plain(w: asyncio.StreamWriter, status: int, body: bytes, ctype: str) -> None:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}[status]
    w.write(f"HTTP/1.1 {status} {reason}\r\ncontent-type: {ctype}\r\n"
            f"content-length: {len(body)}\r\n\r\n".encode() + body)
    await w.drain()


async def _sse_head(w: asyncio.StreamWriter) -> None:
    w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n")
    await w.drain()


async def _write_chunk(w: asyncio.StreamWriter, data: bytes) -> None:
    w.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    await w.drain()
