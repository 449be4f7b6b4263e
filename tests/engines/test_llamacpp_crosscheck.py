"""The harness's numbers on llama.cpp agree with llama.cpp's own per-request timings.

Tokens from ``usage`` must equal llama.cpp's ``timings.predicted_n`` exactly;
decode speed (1 / TPOT, the definition llama.cpp uses) must be within 5% of
llama.cpp's ``timings.predicted_per_second``, per request and over all (a ratio of sums:
both clocks see the same load, so this holds on a busy machine too; the only
difference is the stream's delivery). Also: llama-server closes the connection
after every streamed response, and the harness copes with it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import socket
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _crosscheck_module():
    spec = importlib.util.spec_from_file_location("llamacpp_crosscheck", ROOT / "benchmarks" / "llamacpp_crosscheck.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("overrides", [["spec=llamacpp_draft", "spec.budget=4"], ["spec=none"]],
                         ids=["draft4", "autoregressive"])
def test_harness_matches_llama_cpp_timings(engine, tmp_path: Path, overrides):
    mod = _crosscheck_module()
    rows, totals = mod.crosscheck([*overrides, "server.threads=1"], requests=4, max_tokens=64, workdir=tmp_path)
    print("\n" + mod.table(rows, totals))
    assert totals["errors"] == 0 and len(rows) == 4
    for row in rows:
        assert row.usage_tokens == row.server_tokens == 64, row
        assert row.ratio == pytest.approx(1.0, abs=0.05), row  # 1 / TPOT vs predicted_per_second
    assert totals["ratio"] == pytest.approx(1.0, abs=0.05), totals


def _raw_request(port: int, stream: bool) -> str:
    """One chat request over a bare socket; what the connection does after the answer."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
                       "stream": stream}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        data = b""
        while True:
            head, _, rest = data.partition(b"\r\n\r\n")
            if _ and (rest.endswith(b"\r\n0\r\n\r\n") if stream else rest.endswith(b"}")):
                break
            chunk = s.recv(65536)
            assert chunk, data
            data += chunk
        assert b"keep-alive: timeout=" in head.lower()  # the server advertises keep-alive ...
        s.settimeout(2.0)
        try:
            return "closed" if s.recv(100) == b"" else "more bytes"
        except socket.timeout:
            return "open"


def test_llama_server_closes_after_every_stream_and_the_harness_copes(engine, tmp_path: Path):
    """llama-server says "Keep-Alive: timeout=5, max=100" but closes the connection right
    after each streamed response (its chunked content provider returns false after
    sink.done(), which cpp-httplib takes for a failed write). Reusing the connection races
    that close ("Server disconnected without sending a response", seen once in a real run):
    the client sends such a request once more, counted, so back-to-back requests all succeed."""
    import launchers
    from sweep.bench.client import build_payload, make_client, stream_chat
    from sweep.compose.config import from_omegaconf
    from sweep.compose.cmdline import compose
    from sweep.compose.render import render

    sys.path.insert(0, str(ROOT / "tests"))
    import llamacpp_env

    port = llamacpp_env.free_port()
    cfg = from_omegaconf(compose(["server=llamacpp", "spec=none", f"server.port={port}", "server.threads=1"]))
    launcher = launchers.get_launcher(cfg.launcher)
    try:
        handle = launcher.ensure(render(cfg), cfg.server, tmp_path)
        assert _raw_request(port, stream=False) == "open"
        assert _raw_request(port, stream=True) == "closed"  # ... but not after a stream

        async def back_to_back(n: int) -> list:
            payload = build_payload(cfg.model.served_name, "Say hi.", max_tokens=4, ignore_eos=True)
            async with make_client(handle.base_url) as client:
                return [await stream_chat(client, payload, timeout_s=120) for _ in range(n)]

        recs = asyncio.run(back_to_back(12))
        print(f"\n12 back-to-back streams: {sum(r.retries for r in recs)} re-sent after a closed connection")
        assert [r.error for r in recs] == [None] * 12
        assert all(r.completion_tokens == 4 for r in recs)
    finally:
        launchers.stop_all(force=True)
