"""The sim's sockets: TCP_NODELAY on every accepted connection, so the first chunk
on a reused keep-alive connection is not held back by the client's delayed ACK."""

from __future__ import annotations

import asyncio
import socket
import statistics

from sweep.bench.client import build_payload, make_client, stream_request
from sweep.sim.server import _bind

BODY = build_payload("m", [11, 12, 13, 14], max_tokens=4, ignore_eos=True, endpoint="completions")


def test_listening_socket_is_tcp_and_accepted_connections_get_nodelay() -> None:
    """The option itself, on a connection accepted by asyncio from the sim's listener."""
    sock = _bind("127.0.0.1", 0)
    assert sock is not None and sock.proto == socket.IPPROTO_TCP
    seen: list[int] = []

    async def go() -> None:
        def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peer = writer.get_extra_info("socket")
            seen.append(peer.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_conn, sock=sock)
        port = sock.getsockname()[1]
        _, w = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.01)
        w.close()
        server.close()
        await server.wait_closed()

    asyncio.run(go())
    assert seen and seen[0] != 0


def test_reused_connection_first_chunk_is_not_delayed(sim_server) -> None:
    """Over loopback against the real sim (no emulated delay): time to the first
    content chunk on one reused connection vs on fresh connections, interleaved.
    With Nagle left on, every reused request waited for a delayed ACK (~40 ms)."""
    sim = sim_server("server.sim.time_scale=0")

    async def fresh() -> float:
        async with make_client(sim.base_url) as conn:
            rec = await stream_request(conn, BODY, path="/v1/completions")
        assert rec.ok, rec.detail
        return rec.ttft_s or 0.0

    async def go() -> tuple[list[float], list[float]]:
        reused: list[float] = []
        new: list[float] = []
        async with make_client(sim.base_url) as conn:
            await stream_request(conn, BODY, path="/v1/completions")  # opened and used once
            for _ in range(15):
                rec = await stream_request(conn, BODY, path="/v1/completions")
                assert rec.ok, rec.detail
                reused.append(rec.ttft_s or 0.0)
                new.append(await fresh())
            assert conn.connects == 1  # every request above went over the one connection
        return reused, new

    reused, new = asyncio.run(go())
    # A loaded box slows both alike; a delayed-ACK stall adds ~40 ms to every reused request.
    assert statistics.median(reused) < statistics.median(new) + 0.015, (reused, new)
    assert statistics.median(reused) < 0.030, reused
