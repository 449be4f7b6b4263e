"""How many streamed tokens/s the simulator can serve on this machine.

The sim must never be what limits a harness benchmark. This starts a real
sim (b300 + DDTree b8 by default: several tokens per chunk, as SGLang
streams them) with the no-delay profile (time scale 0), then drives it with
a deliberately thin client -- raw asyncio sockets, keep-alive HTTP/1.1, no
JSON parsing except the final usage -- at concurrency 64 and 256, and prints
the measured tokens/s (from usage.completion_tokens), its ratio to the
60,000 tok/s target, and how much of a core the sim process used (on a
shared machine the measured figure is bounded by the CPU the sim gets).

    python benchmarks/sim_capacity.py [--seconds 5] [--max-tokens 512] [override ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sweep.sim.launch import start_sim  # noqa: E402

TARGET_TOK_S = 60_000.0
_USAGE = re.compile(rb'"completion_tokens":(\d+)')


async def _worker(host: str, port: int, body: bytes, stop_at: float, totals: list[int], chunks: list[int]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode()
    try:
        while time.perf_counter() < stop_at:
            writer.write(head + body)
            buf = bytearray()
            while True:
                data = await reader.read(262144)
                if not data:
                    return
                buf += data
                if buf.endswith(b"0\r\n\r\n") and b"data: [DONE]" in buf:
                    break
            m = _USAGE.findall(bytes(buf))
            if m:
                totals.append(int(m[-1]))
                chunks.append(buf.count(b"data: ") - 1)
    finally:
        writer.close()


async def measure(base_url: str, concurrency: int, seconds: float, max_tokens: int) -> tuple[float, float]:
    """(completion tokens/s, tokens per streamed chunk) of closed-loop load.

    Each connection keeps sending requests until ``seconds`` have passed and
    finishes the one in flight; throughput = all completion tokens / wall time.
    """
    url = urlparse(base_url)
    body = json.dumps({"model": "sim", "messages": [{"role": "user", "content": "Tell me about caches."}],
                       "max_tokens": max_tokens, "ignore_eos": True, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    totals: list[int] = []
    chunks: list[int] = []
    t0 = time.perf_counter()
    stop_at = t0 + seconds
    await asyncio.gather(*[_worker(url.hostname or "127.0.0.1", url.port or 80, body, stop_at, totals, chunks)
                           for _ in range(concurrency)])
    elapsed = time.perf_counter() - t0
    per_chunk = sum(totals) / max(1, sum(chunks))
    return sum(totals) / elapsed, per_chunk


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def main(argv: list[str] | None = None) -> int:
    """The benchmark inside the commands' boundary: bad input is one line, exit 2."""
    from sweep import errors

    return errors.command("benchmarks/sim_capacity.py")(_main)(argv)


def _main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    ap.add_argument("overrides", nargs="*", help="config overrides (default: hardware=b300 spec=ddtree)")
    from sweep.compose import arguments

    ns = arguments.parse("benchmarks/sim_capacity.py", ap, argv)  # every argument by its rule
    overrides = ["hardware=b300", "spec=ddtree", "server.sim.time_scale=0", "server.decode_log_interval=1000",
                 "server.max_running_requests=1024", *ns.overrides]
    with tempfile.TemporaryDirectory() as tmp:
        sim = start_sim(*overrides, log_dir=Path(tmp))
        try:
            worst = float("inf")
            for c in ns.concurrency:
                asyncio.run(measure(sim.base_url, c, min(1.0, ns.seconds), ns.max_tokens))  # warm up
                cpu0, t0 = _cpu_seconds(sim.proc.pid), time.perf_counter()
                tok_s, per_chunk = asyncio.run(measure(sim.base_url, c, ns.seconds, ns.max_tokens))
                busy = (_cpu_seconds(sim.proc.pid) - cpu0) / (time.perf_counter() - t0)
                worst = min(worst, tok_s)
                print(f"concurrency {c:4d}: {tok_s:10,.0f} streamed tok/s  ({per_chunk:.2f} tokens/chunk)  "
                      f"ratio to target {tok_s / TARGET_TOK_S:.2f}x (target {TARGET_TOK_S:,.0f}); "
                      f"sim used {busy:.2f} of a core = {tok_s / max(busy, 1e-9):,.0f} tok/s per core-second")
        finally:
            sim.stop()
    print(f"minimum over concurrencies: {worst:,.0f} tok/s = {worst / TARGET_TOK_S:.2f}x target")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
