"""How many streamed tokens/s can the benchmark harness itself sustain?

Why: if the client saturates before the server does, every "peak tok/s"
the sweep reports is the client's ceiling, not the server's. This starts the
real simulator with its no-delay profile (``server.sim.time_scale=0``:
tokens as fast as the process can emit them, default DDTree budget-8
chunking so one SSE chunk carries several tokens), through the same
compose -> typed config -> render path as a trial, and then, in one run,
alternates

* the harness (``sweep.bench.matrix.run_matrix``: per-chunk timing, usage,
  meta_info, percentiles), and
* a minimal reference client (a bare httpx async loop that only reads the
  bytes and takes the token count from the final usage event),

at the same concurrency on the same prompts' shape. It also checks that the
harness's token count (from ``usage``) agrees with the server's own count
(its ``/metrics`` generation-token counter over the same window, else the
sum of ``meta_info.completion_tokens``), and shows what counting chunks
would have said. Every number printed is measured in this run.

    python benchmarks/harness_capacity.py [--concurrency 128] [--rounds 3] [--strict]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_RATIO = 0.8
TARGET_TOK_S = 47_000.0   # 10x the B300 peak
TARGET_COUNT_DELTA = 0.01


SIM_OVERRIDES = ("server=sim", "server.sim.time_scale=0", "server.host=127.0.0.1")


def start(extra: list[str], log_dir: Path) -> tuple[Any, Any]:
    """The typed trial config and a running sim for it (compose -> validate -> render -> start)."""
    from sweep.config import from_omegaconf
    from sweep.preflight import compose
    from sweep.sim.launch import start_sim

    tc = from_omegaconf(compose([*SIM_OVERRIDES, *extra]))
    sim = start_sim(*SIM_OVERRIDES, *extra, log_dir=log_dir, load_seconds=0.2, timeout=60.0)
    return tc, sim


async def reference_client(base_url: str, payloads: list[dict[str, Any]], concurrency: int) -> dict[str, float]:
    """The bare minimum: stream every body, keep the tail, read usage once per request.

    Like the harness it holds one keep-alive connection per worker (one
    single-connection client each: httpcore's shared pool rescans every
    connection per request, which would slow the reference down, not help it).
    """
    import httpx

    tokens = 0
    errors = 0
    todo = iter(payloads)
    marker = b'"completion_tokens":'
    ctx = httpx.create_ssl_context(trust_env=False)

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal tokens, errors
        for payload in todo:
            tail = b""
            async with client.stream("POST", "/v1/chat/completions", json=payload) as resp:
                async for piece in resp.aiter_bytes():
                    tail = (tail + piece)[-2048:]
            at = tail.rfind(marker)  # the usage event is the last one before [DONE]
            if resp.status_code != 200 or at < 0:
                errors += 1
                continue
            digits = tail[at + len(marker):].lstrip().split(b",", 1)[0].split(b"}", 1)[0]
            tokens += int(digits)

    clients = [httpx.AsyncClient(base_url=base_url, timeout=600.0, trust_env=False, verify=ctx,
                                 limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))
               for _ in range(concurrency)]
    try:
        c0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker(c) for c in clients))
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))
    return {"tok_s": tokens / dt, "tokens": tokens, "seconds": dt, "errors": errors, "cpu_s": cpu}


def harness_run(base_url: str, workload: Any, model: str, seed: int) -> tuple[Any, float]:
    """One matrix cell through the real entry point; also its client CPU seconds."""
    from sweep.bench.matrix import run_matrix

    c0 = time.process_time()
    (cell,) = run_matrix(base_url, workload, model, progress=False, seed=seed)
    return cell, time.process_time() - c0


def server_tokens(metrics: dict[str, float]) -> float | None:
    for name, value in metrics.items():
        if name.endswith("generation_tokens_total"):
            return value
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--requests", type=int, default=None, help="per run (default 4 x concurrency)")
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--context", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3, help="alternating runs of each client")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    ap.add_argument("overrides", nargs="*", help="extra Hydra overrides (e.g. spec.budget=16)")
    args = ap.parse_args(argv)

    from sweep.bench.client import build_payload
    from sweep.bench.matrix import trial_accept_len
    from sweep.bench.prompts import PromptFactory
    from sweep.bench.serverstats import fetch_metrics

    conc = args.concurrency
    n = args.requests or 4 * conc
    log_dir = Path(tempfile.mkdtemp(prefix="specsweep-capacity-"))
    tc, sim = start(args.overrides, log_dir)
    base_url = sim.base_url
    try:
        model = tc.model.served_name
        wl = dataclasses.replace(tc.workload, contexts=(args.context,), concurrency=(conc,),
                                 max_tokens=args.max_tokens, requests_per_cell=n, warmup_requests=0,
                                 request_rate=None, ignore_eos=True, temperature=0.0)
        spec = tc.spec
        print(f"harness_capacity: simulator no-delay profile (server.sim.time_scale=0), "
              f"hardware={tc.hardware.name} spec={spec.algorithm} budget={spec.budget} topk={spec.topk}; "
              f"{n} requests x {args.max_tokens} tokens, context {args.context}, concurrency {conc}, "
              f"{args.rounds} alternating rounds; {os.cpu_count()} CPUs shared by client and server",
              flush=True)
        ref_prompts = PromptFactory(seed=1, namespace="reference")
        # A short warmup of both paths (imports, connection pools, the sim's JIT-free caches).
        asyncio.run(reference_client(base_url, [build_payload(model, ref_prompts.make(args.context),
                                     max_tokens=32, ignore_eos=True) for _ in range(conc)], conc))
        harness_run(base_url, dataclasses.replace(wl, requests_per_cell=conc, max_tokens=32), model, 99)

        ref_rates, harness_rates, cells, count_checks = [], [], [], []
        ref_cpu: list[float] = []
        harness_cpu: list[float] = []
        for r in range(args.rounds):
            payloads = [build_payload(model, ref_prompts.make(args.context), max_tokens=args.max_tokens,
                                      ignore_eos=True) for _ in range(n)]
            ref = asyncio.run(reference_client(base_url, payloads, conc))
            before = fetch_metrics(base_url)
            cell, cpu = harness_run(base_url, wl, model, seed=r)
            after = fetch_metrics(base_url)
            srv = server_tokens(after)
            srv_delta = None if srv is None else srv - (server_tokens(before) or 0.0)
            ref_rates.append(ref["tok_s"])
            ref_cpu.append(ref["cpu_s"] / max(1, ref["tokens"]) * 1e6)
            harness_cpu.append(cpu / max(1, cell.completion_tokens) * 1e6)
            harness_rates.append(cell.output_tok_s)
            cells.append(cell)
            count_checks.append((cell.completion_tokens, srv_delta, cell.spec_tokens,
                                 sum(x.chunks for x in cell.results)))
            print(f"  round {r + 1}: reference {ref['tok_s']:>10,.0f} tok/s ({ref['tokens']:,} tokens in "
                  f"{ref['seconds']:.2f} s, {ref['errors']} errors, {ref_cpu[-1]:.1f} CPU-s/Mtok) | harness {cell.output_tok_s:>10,.0f} tok/s "
                  f"({cell.completion_tokens:,} tokens in {cell.duration_s:.2f} s, {cell.errors} errors, "
                  f"{harness_cpu[-1]:.1f} CPU-s/Mtok, "
                  f"TTFT p50 {cell.ttft_ms_p50} ms, ITL p50 {cell.itl_ms_p50} ms)", flush=True)
    finally:
        sim.stop()

    ref_med, har_med = statistics.median(ref_rates), statistics.median(harness_rates)
    ratio = har_med / ref_med if ref_med else 0.0
    harness_tokens = sum(c[0] for c in count_checks)
    if all(c[1] is not None for c in count_checks):
        server_count, source = sum(c[1] or 0 for c in count_checks), "server /metrics generation_tokens_total delta"
    else:
        server_count, source = sum(c[2] for c in count_checks), "server meta_info.completion_tokens sum"
    chunks = sum(c[3] for c in count_checks)
    delta = abs(harness_tokens - server_count) / server_count if server_count else 1.0
    errors = sum(c.errors for c in cells)
    rows = [
        (f"harness vs reference client >= {TARGET_RATIO}x", f"{har_med:,.0f} vs {ref_med:,.0f} tok/s",
         f"{ratio:.3f}x", ratio >= TARGET_RATIO),
        (f"harness sustained tok/s >= {TARGET_TOK_S:,.0f}", f"{har_med:,.0f} tok/s",
         f"{har_med / TARGET_TOK_S:.3f}x", har_med >= TARGET_TOK_S),
        (f"token count vs server within {TARGET_COUNT_DELTA:.0%}",
         f"{harness_tokens:,} vs {server_count:,.0f}", f"{delta:.4%} off", delta <= TARGET_COUNT_DELTA),
    ]
    print()
    print(f"{'target':<44} {'measured (median of rounds)':<34} {'ratio':>12}  status")
    for name, measured, rat, ok in rows:
        print(f"{name:<44} {measured:<34} {rat:>12}  {'PASS' if ok else 'MISS'}")
    cpu_ratio = statistics.median(harness_cpu) / statistics.median(ref_cpu)
    print(f"{'(context) client CPU per token vs reference':<44} "
          f"{statistics.median(harness_cpu):.1f} vs {statistics.median(ref_cpu):.1f} CPU-s/Mtok{'':<6} "
          f"{cpu_ratio:>11.3f}x  info")
    print()
    print(f"server count source: {source}; harness errors: {errors}; "
          f"accept length (meta_info): {trial_accept_len(cells)}")
    if harness_tokens:
        print(f"a client counting SSE chunks as tokens would have reported {chunks:,} tokens "
              f"({(chunks - harness_tokens) / harness_tokens:+.1%}): tokens come from usage")
    print(f"simulator log: {sim.log_path}")
    missed = not all(r[3] for r in rows) or errors > 0
    return 1 if (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
