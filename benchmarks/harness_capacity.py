"""How many streamed tokens/s can the benchmark harness itself sustain?

Why: if the client saturates before the server does, every "peak tok/s"
the sweep reports is the client's ceiling, not the server's. This starts the
real simulator with its no-delay profile (``server.sim.time_scale=0``:
tokens as fast as the process can emit them, default DDTree budget-8
chunking so one SSE chunk carries several tokens), through the same
compose -> typed config -> render path as a trial, and then, in one run,
alternates

* the harness (``sweep.bench.matrix.run_matrix``: per-event timing, running
  usage, meta_info, percentiles), and
* a minimal reference client (a bare httpx async loop that only reads the
  bytes and takes the token count from the final usage event),

at the same concurrency, with the same request bodies (endpoint, extras,
running usage: the same bytes per token come back), in rounds whose order
alternates (ABBA); the ratios are medians over the rounds, so one noisy
round on a shared box does not decide. CPU per token is each client
process's CPU time over its measured window (first send to last byte)
divided by the tokens it received. It also checks that the
harness's token count (from ``usage``) agrees with the server's own count
(its ``/metrics`` generation-token counter over the same window, else the
sum of ``meta_info.completion_tokens``), and shows what counting chunks
would have said. Every number printed is measured in this run.

    python benchmarks/harness_capacity.py [--concurrency 128] [--rounds 5] [--strict]
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
    from sweep.compose.config import from_omegaconf
    from sweep.compose.cmdline import compose
    from sweep.sim.launch import start_sim

    tc = from_omegaconf(compose([*SIM_OVERRIDES, *extra]))
    sim = start_sim(*SIM_OVERRIDES, *extra, log_dir=log_dir, load_seconds=0.2, timeout=60.0)
    return tc, sim


async def reference_client(base_url: str, payloads: list[bytes], concurrency: int,
                           path: str) -> dict[str, float]:
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
    headers = {"content-type": "application/json"}

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal tokens, errors
        for payload in todo:
            tail = b""
            async with client.stream("POST", path, content=payload, headers=headers) as resp:
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
        t0, c0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker(c) for c in clients))
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))
    return {"tok_s": tokens / dt, "tokens": tokens, "seconds": dt, "errors": errors, "cpu_s": cpu}


def harness_run(base_url: str, workload: Any, model: str, options: dict[str, Any]) -> tuple[Any, float]:
    """One matrix cell through the real entry point (with the server's options, as a
    trial sends them); also its CPU seconds over the measured window."""
    from sweep.bench.matrix import run_matrix

    (cell,) = run_matrix(base_url, workload, model, progress=False, **options)
    return cell, cell.client_cpu_s


def server_tokens(metrics: dict[str, float]) -> float | None:
    for name, value in metrics.items():
        if name.endswith("generation_tokens_total"):
            return value
    return None


def main(argv: list[str] | None = None) -> int:
    """The benchmark inside the commands' boundary: bad input is one line, exit 2."""
    from sweep import errors

    return errors.command("benchmarks/harness_capacity.py")(_main)(argv)


def _main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--requests", type=int, default=None, help="per run (default 4 x concurrency)")
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--context", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=5,
                    help="paired runs of the two clients (short pairs: less drift within a pair)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    ap.add_argument("overrides", nargs="*", help="extra Hydra overrides (e.g. spec.budget=16)")
    from sweep.compose import arguments

    args = arguments.parse("benchmarks/harness_capacity.py", ap, argv)  # every argument by its rule

    from sweep.bench.client import build_payload, encode_json, path_for
    from sweep.bench.matrix import server_options, trial_accept_len
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
              f"{args.rounds} rounds (ABBA order); {os.cpu_count()} CPUs shared by client, server and anything "
              f"else running (load average now {os.getloadavg()[0]:.1f})",
              flush=True)
        ref_prompts = PromptFactory(seed=1, namespace="reference")
        options = server_options(tc)
        path = path_for(options["endpoint"])

        def bodies(count: int, max_tokens: int) -> list[bytes]:
            """The harness's request bodies (same endpoint, extras and running usage)."""
            return [encode_json(build_payload(model, ref_prompts.make(args.context), max_tokens=max_tokens,
                                              ignore_eos=True, extra=options["request_extras"],
                                              endpoint=options["endpoint"],
                                              continuous_usage=options["continuous_usage"]))
                    for _ in range(count)]

        # A short warmup of both paths (imports, connection pools, the sim's JIT-free caches).
        asyncio.run(reference_client(base_url, bodies(conc, 32), conc, path))
        harness_run(base_url, dataclasses.replace(wl, requests_per_cell=conc, max_tokens=32), model, options)

        ref_runs: list[dict[str, float]] = []
        har_runs: list[tuple[Any, float, float | None]] = []   # (cell, CPU s, server token delta)
        for r in range(args.rounds):
            payloads = bodies(n, args.max_tokens)
            # ABBA order: neither client always runs first (load on a shared box drifts).
            order = ("ref", "har") if r % 2 == 0 else ("har", "ref")
            for who in order:
                if who == "ref":
                    ref_runs.append(asyncio.run(reference_client(base_url, payloads, conc, path)))
                    continue
                before = server_tokens(fetch_metrics(base_url))
                cell, cpu = harness_run(base_url, dataclasses.replace(wl, seed=r), model, options)
                after = server_tokens(fetch_metrics(base_url))
                har_runs.append((cell, cpu, None if after is None else after - (before or 0.0)))
            ref, (cell, cpu, _) = ref_runs[-1], har_runs[-1]
            print(f"  round {r + 1}: reference {ref['tok_s']:>9,.0f} tok/s ({ref['seconds']:.2f} s, "
                  f"{ref['errors']} err, {ref['cpu_s'] / ref['tokens'] * 1e6:.1f} CPU-s/Mtok) | harness "
                  f"{cell.output_tok_s:>9,.0f} tok/s ({cell.duration_s:.2f} s, {cell.errors} err, "
                  f"{cpu / max(1, cell.completion_tokens) * 1e6:.1f} CPU-s/Mtok, TTFT p50 "
                  f"{cell.ttft_ms_p50:.0f} ms) | ratio {cell.output_tok_s / ref['tok_s']:.3f}", flush=True)
    finally:
        sim.stop()

    cells = [c for c, _, _ in har_runs]
    ref_med = statistics.median(x["tok_s"] for x in ref_runs)
    har_med = statistics.median(c.output_tok_s for c in cells)
    ratio = statistics.median(c.output_tok_s / x["tok_s"] for c, x in zip(cells, ref_runs))
    harness_tokens = sum(c.completion_tokens for c in cells)
    if all(d is not None for _, _, d in har_runs):
        server_count = sum(d or 0.0 for _, _, d in har_runs)
        source = "the server's /metrics generation_tokens_total, delta over each harness run"
    else:
        server_count, source = float(sum(c.spec_tokens for c in cells)), "the server's meta_info.completion_tokens"
    chunks = sum(x.chunks for c in cells for x in c.results)
    delta = abs(harness_tokens - server_count) / server_count if server_count else 1.0
    errors = sum(c.errors for c in cells)
    cpu_ref = statistics.median(x["cpu_s"] / x["tokens"] * 1e6 for x in ref_runs)
    cpu_har = statistics.median(cpu / max(1, c.completion_tokens) * 1e6 for c, cpu, _ in har_runs)
    cpu_ratio = statistics.median(cpu / max(1, c.completion_tokens) / (x["cpu_s"] / x["tokens"])
                                  for (c, cpu, _), x in zip(har_runs, ref_runs))
    rows = [
        (f"harness vs reference client >= {TARGET_RATIO}x", f"{har_med:,.0f} vs {ref_med:,.0f} tok/s",
         f"{ratio:.3f}x", ratio >= TARGET_RATIO),
        ("harness CPU per token <= reference's", f"{cpu_har:.1f} vs {cpu_ref:.1f} CPU-s/Mtok",
         f"{cpu_ratio:.3f}x", cpu_ratio <= 1.0),
        (f"harness sustained tok/s >= {TARGET_TOK_S:,.0f}", f"{har_med:,.0f} tok/s",
         f"{har_med / TARGET_TOK_S:.3f}x", har_med >= TARGET_TOK_S),
        (f"token count vs server within {TARGET_COUNT_DELTA:.0%}",
         f"{harness_tokens:,} vs {server_count:,.0f}", f"{delta:.4%} off", delta <= TARGET_COUNT_DELTA),
    ]
    print()
    print(f"{'target':<44} {'measured (medians over rounds)':<34} {'ratio':>12}  status")
    for name, measured, rat, ok in rows:
        print(f"{name:<44} {measured:<34} {rat:>12}  {'PASS' if ok else 'MISS'}")
    print()
    print("ratios = medians of the per-round (paired) ratios; CPU = the client process over its "
          "measured window (first send to last byte), per token received")
    print(f"server count from {source}; harness errors: {errors}; "
          f"accept length (meta_info): {trial_accept_len(cells)}")
    if harness_tokens:
        print(f"a client counting SSE chunks as tokens would have reported {chunks:,} tokens "
              f"({(chunks - harness_tokens) / harness_tokens:+.1%}): tokens come from usage")
    print(f"simulator log: {sim.log_path}")
    missed = not all(row[3] for row in rows) or errors > 0
    return 1 if (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
