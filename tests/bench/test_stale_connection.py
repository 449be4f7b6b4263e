"""A kept-alive connection the server closed before answering: the request is sent once more.

llama-server closes the connection after every streamed response although it
advertises ``Keep-Alive`` (tests/engines shows it on the real binary); a
client that reuses the connection at once races that close and gets "Server
disconnected without sending a response" for a request the server never
read. The TEST DOUBLE below (raw asyncio over real loopback sockets) does the
same deterministically: it answers one request per connection with a
complete stream, then closes the connection when the next request arrives.
"""

from __future__ import annotations

import asyncio
import json

from sweep.bench.client import build_payload, make_client, stream_chat

CHUNK = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "length"}]}
USAGE = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
BODY = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in (CHUNK, USAGE)) + b"data: [DONE]\n\n"
RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nKeep-Alive: timeout=5, max=100\r\n"
            b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY)


async def _read_request(reader: asyncio.StreamReader) -> bool:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length"))
    await reader.readexactly(length)
    return True


async def _scenario(answer_per_connection: int) -> tuple[list, int]:
    connections = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        try:
            for _ in range(answer_per_connection):
                await _read_request(reader)
                writer.write(RESPONSE)
                await writer.drain()
            await _read_request(reader)  # the next request on this connection: no answer
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    payload = build_payload("m", "hi", max_tokens=1)
    async with server, make_client(f"http://127.0.0.1:{port}") as client:
        recs = [await stream_chat(client, payload, timeout_s=10) for _ in range(3)]
    return recs, connections


def test_request_on_a_connection_closed_unanswered_is_sent_once_more():
    recs, connections = asyncio.run(_scenario(answer_per_connection=1))
    assert [r.ok for r in recs] == [True, True, True], [(r.error, r.detail) for r in recs]
    assert [r.retries for r in recs] == [0, 1, 1]
    assert all(r.completion_tokens == 1 for r in recs)
    assert connections == 3


def test_a_server_that_never_answers_is_still_an_error():
    recs, _ = asyncio.run(_scenario(answer_per_connection=0))
    assert all(not r.ok and r.error == "disconnect" and r.retries == 1 for r in recs)
