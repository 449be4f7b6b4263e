"""The context x concurrency throughput matrix.

For each cell: build the prompts (sized to the cell's context with the
server's own token count, :mod:`sweep.bench.sizing`), open all
``concurrency`` connections and warm each one up (``workload.
warmup_requests`` unmeasured requests per connection, so no connection is
opened or first used inside the window), flush the server's prefix cache
(so nothing measured is a cache hit left by the warm-up, an earlier cell or
trial), then send ``workload.requests_for(concurrency)`` measured requests,
closed loop with ``concurrency`` in flight (or Poisson arrivals capped at
``concurrency`` in flight when ``workload.request_rate`` is set).

Definitions (per cell, over the measured phase only):

* ``output_tok_s``: sum of ``usage.completion_tokens`` of successful
  requests / wall time from the first send to the last completion.
  Failed requests add no tokens but do take wall time: a server that
  fails requests is slower, not faster.
* ``per_stream_tok_s``: the decode speed one user sees once the first
  token has arrived (prefill wait is TTFT's business), token-weighted over
  successful requests: sum(completion_tokens) / sum(e2e - ttft). A ratio of
  sums rather than a mean of ratios, because with multi-token chunks one
  request whose answer arrives in a single burst has e2e - ttft near 0 and
  would make a mean of per-request ratios explode.
* ``ttft/itl/step/tpot/e2e`` percentiles in ms (linear interpolation, as
  numpy's default). ``itl_ms``: per token, pooled over every request, each
  gap between content events spread over the tokens the later event carries
  (SGLang's bench_serving); ``step_ms``: the gaps between content events
  themselves (one verify step with speculative decoding; vLLM's ``bench
  serve`` ITL); ``itl_tokens`` says whether tokens per event were counted by
  the server (running usage) or estimated (an even split). TPOT is per
  request (e2e - ttft) / (completion_tokens - 1).
* ``prompt_tokens_mean``: the mean ``usage.prompt_tokens`` the server
  reported for the cell's measured requests (the context actually sent);
  ``prompt_sizing`` how the prompts were sized: ``tokenize`` (the server's
  route, exact), ``probe`` (one-token probes: exact on average), ``exact``
  (token ids) or ``approx`` (the server could not count: ~4 chars/token).
* ``accept_len``: sum(completion_tokens) / sum(spec_verify_ct) over
  successful requests carrying spec counters (None without them).
* ``errors`` / ``error_kinds``: failed requests, counted and shown.
"""

from __future__ import annotations

import asyncio
import gc
import os
import random
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence

from sweep.bench.acceptance import accept_len_of, spec_sums
from sweep.bench.client import (RequestResult, build_payload, encode_json, make_admin_client, make_clients,
                                path_for, stream_request)
from sweep.bench.aio import run_sync
from sweep.bench.progress import progress_bar
from sweep.bench.sizing import PromptMaker

if TYPE_CHECKING:
    import httpx

    from sweep.bench.serverstats import CounterProbe
    from sweep.bench.transport import HttpConnection
    from sweep.compose.config import Workload

# Exactly the cell keys of result.json (docs/ARCHITECTURE.md).
CELL_KEYS = (
    "context", "concurrency", "requests", "errors", "error_kinds",
    "output_tok_s", "per_stream_tok_s",
    "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99", "ttft_ms_mean",
    "itl_ms_p50", "itl_ms_p90", "itl_ms_p99", "itl_tokens",
    "step_ms_p50", "step_ms_p90", "step_ms_p99",
    "tpot_ms_p50", "tpot_ms_p90", "tpot_ms_p99",
    "e2e_ms_p50", "accept_len", "accept_rate", "completion_tokens", "prompt_tokens_mean", "prompt_sizing", "duration_s",
    "concurrency_capped",
    "repeats", "output_tok_s_ci", "per_stream_tok_s_ci", "accept_len_ci", "output_tok_s_runs",
)


@dataclass
class CellResult:
    """Aggregates of one cell; ``results`` keeps the per-request records."""

    context: int
    concurrency: int
    requests: int
    errors: int
    error_kinds: dict[str, int]
    output_tok_s: float
    per_stream_tok_s: float | None
    ttft_ms_p50: float | None
    ttft_ms_p90: float | None
    ttft_ms_p99: float | None
    ttft_ms_mean: float | None
    itl_ms_p50: float | None
    itl_ms_p90: float | None
    itl_ms_p99: float | None
    itl_tokens: str | None        # counted (running usage) | estimated (even split)
    step_ms_p50: float | None
    step_ms_p90: float | None
    step_ms_p99: float | None
    tpot_ms_p50: float | None
    tpot_ms_p90: float | None
    tpot_ms_p99: float | None
    e2e_ms_p50: float | None
    e2e_ms_p90: float | None
    e2e_ms_p99: float | None
    accept_len: float | None
    completion_tokens: int
    prompt_tokens_mean: float | None
    duration_s: float
    accept_rate: float | None = None   # accepted / drafted draft tokens (/metrics around the window)
    spec_tokens: int = 0          # numerator of accept_len (for trial-level sums)
    spec_verify_ct: int = 0       # denominator of accept_len
    flushed: str = "skipped"      # ok | unsupported | failed | skipped
    prompt_sizing: str | None = None   # tokenize | probe | exact (token ids) | approx (no server count)
    client_cpu_s: float = 0.0     # this process's CPU time during the measured window
    # in-flight requests actually used when the process could not open `concurrency` connections
    concurrency_capped: int | None = None
    repeats: int = 1              # workload.repeats (sweep/bench/repeats.py); figures are means
    output_tok_s_ci: list[float] | None = None
    per_stream_tok_s_ci: list[float] | None = None
    accept_len_ci: list[float] | None = None
    output_tok_s_runs: list[float] | None = None   # each repeat's output_tok_s (repeats > 1): the noise
    results: list[RequestResult] = field(default_factory=list, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The ``cells[]`` entry of result.json, exactly the documented keys."""
        return {k: getattr(self, k) for k in CELL_KEYS}


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100); None for no data."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _ms(values: Sequence[float], q: float) -> float | None:
    p = percentile(values, q)
    return None if p is None else round(p * 1000.0, 3)


def aggregate(context: int, concurrency: int, results: Sequence[RequestResult],
              duration_s: float) -> CellResult:
    """Reduce one cell's request records to the documented figures."""
    ok = [r for r in results if r.ok]
    kinds: dict[str, int] = {}
    for r in results:
        if not r.ok:
            kinds[r.error or "unknown"] = kinds.get(r.error or "unknown", 0) + 1
    tokens = sum(r.completion_tokens or 0 for r in ok)
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    itl = [g for r in ok for g in r.itl_s()]
    step = [g for r in ok for g in r.step_s]
    timed = [r for r in ok if len(r.chunk_t) > 1]
    itl_tokens = None if not timed else ("counted" if all(r.tokens_counted for r in timed) else "estimated")
    tpot = [t for t in (r.tpot_s for r in ok) if t is not None]
    e2e = [r.e2e_s for r in ok if r.e2e_s is not None]
    decoding = [r for r in ok if r.completion_tokens and r.e2e_s is not None and r.ttft_s is not None]
    decode_s = sum(r.e2e_s - r.ttft_s for r in decoding)  # type: ignore[operator,misc]
    decode_tokens = sum(r.completion_tokens or 0 for r in decoding)
    spec_tokens, spec_verify = spec_sums(ok)
    prompt = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    return CellResult(
        context=context, concurrency=concurrency, requests=len(results),
        errors=len(results) - len(ok), error_kinds=dict(sorted(kinds.items())),
        output_tok_s=round(tokens / duration_s, 3) if duration_s > 0 else 0.0,
        per_stream_tok_s=round(decode_tokens / decode_s, 3) if decode_s > 0 else None,
        ttft_ms_p50=_ms(ttft, 50), ttft_ms_p90=_ms(ttft, 90), ttft_ms_p99=_ms(ttft, 99),
        ttft_ms_mean=round(sum(ttft) / len(ttft) * 1000.0, 3) if ttft else None,
        itl_ms_p50=_ms(itl, 50), itl_ms_p90=_ms(itl, 90), itl_ms_p99=_ms(itl, 99), itl_tokens=itl_tokens,
        step_ms_p50=_ms(step, 50), step_ms_p90=_ms(step, 90), step_ms_p99=_ms(step, 99),
        tpot_ms_p50=_ms(tpot, 50), tpot_ms_p90=_ms(tpot, 90), tpot_ms_p99=_ms(tpot, 99),
        e2e_ms_p50=_ms(e2e, 50), e2e_ms_p90=_ms(e2e, 90), e2e_ms_p99=_ms(e2e, 99),
        accept_len=accept_len_of(spec_tokens, spec_verify),
        completion_tokens=tokens,
        prompt_tokens_mean=round(sum(prompt) / len(prompt), 2) if prompt else None,
        duration_s=round(duration_s, 6), spec_tokens=spec_tokens, spec_verify_ct=spec_verify,
        results=list(results),
    )


def trial_accept_len(cells: Iterable[CellResult]) -> float | None:
    """Accept length over every measured request of a trial (None without spec)."""
    cells = list(cells)
    verify = sum(c.spec_verify_ct for c in cells)
    return round(sum(c.spec_tokens for c in cells) / verify, 4) if verify else None


async def flush_cache(client: "httpx.AsyncClient", attempts: int = 5) -> str:
    """POST /flush_cache (GET on 405): ``ok``, ``unsupported`` (404) or ``failed``.

    SGLang refuses to flush while requests are running (HTTP 400), so a
    refusal is retried briefly.
    """
    import httpx

    for attempt in range(attempts):
        try:
            resp = await client.post("/flush_cache")
            if resp.status_code == 405:
                resp = await client.get("/flush_cache")
        except httpx.HTTPError:
            return "failed"
        if resp.status_code == 404:
            return "unsupported"
        if resp.status_code < 300:
            return "ok"
        if resp.status_code not in (400, 409, 429, 503):  # only "busy" is worth a retry
            return "failed"
        await asyncio.sleep(0.2 * (attempt + 1))
    return "failed"


async def _closed_loop(clients: Sequence["HttpConnection"], payloads: list[bytes], path: str,
                       timeout_s: float, on_done: Callable[[RequestResult], None]) -> list[RequestResult]:
    """Keep one request in flight per connection until every payload was sent."""
    results: list[RequestResult | None] = [None] * len(payloads)
    todo = iter(range(len(payloads)))

    async def worker(client: "HttpConnection") -> None:
        for i in todo:  # shared iterator: next() never awaits, so no lock is needed
            rec = await stream_request(client, payloads[i], path=path, timeout_s=timeout_s, keep_text=False)
            results[i] = rec
            on_done(rec)

    await asyncio.gather(*(worker(c) for c in clients[:max(1, len(payloads))]))
    return [r for r in results if r is not None]


async def _poisson(clients: Sequence["HttpConnection"], payloads: list[bytes], path: str,
                   rate: float, seed: int, timeout_s: float,
                   on_done: Callable[[RequestResult], None]) -> list[RequestResult]:
    """Send at Poisson arrival times (``rate`` req/s), at most one in flight per client.

    A request whose arrival finds every client busy waits for one (as
    bench_serving's --max-concurrency does); its TTFT and e2e are measured
    from its scheduled arrival, so they include that wait.
    """
    rng = random.Random(seed)
    idle: asyncio.Queue[HttpConnection] = asyncio.Queue()
    for c in clients:
        idle.put_nowait(c)
    t, offsets = 0.0, []
    for _ in payloads:
        offsets.append(t)
        t += rng.expovariate(rate)

    base = time.perf_counter()

    async def one(payload: bytes, at: float) -> RequestResult:
        await asyncio.sleep(max(0.0, base + at - time.perf_counter()))
        client = await idle.get()
        try:
            rec = await stream_request(client, payload, path=path, timeout_s=timeout_s, keep_text=False,
                                       started=base + at)
        finally:
            idle.put_nowait(client)
        on_done(rec)
        return rec

    return list(await asyncio.gather(*(one(p, at) for p, at in zip(payloads, offsets))))


async def run_cell(base_url: str, workload: "Workload", model_name: str, context: int,
                   concurrency: int, prompts: PromptMaker, *, api_key: str | None = None,
                   on_done: Callable[[RequestResult], None] | None = None,
                   request_extras: Mapping[str, Any] | None = None, endpoint: str = "completions",
                   continuous_usage: bool = False,
                   flush: Callable[[], Awaitable[str]] | None = None,
                   counters: "CounterProbe | None" = None) -> CellResult:
    """Size the prompts, open and warm ``concurrency`` connections, flush, then measure one cell.

    ``counters``: read the server's acceptance counters right before and after the
    measured requests (where responses carry none: vLLM) for the cell's accept_len/rate.
    """
    on_done = on_done or (lambda _r: None)
    timeout_s = workload.request_timeout_s
    path = path_for(endpoint)

    def payloads(texts: Sequence[Any], max_tokens: int) -> list[bytes]:
        return [encode_json(build_payload(model_name, p, max_tokens=max_tokens, temperature=workload.temperature,
                                          ignore_eos=workload.ignore_eos, extra=request_extras,
                                          endpoint=endpoint, continuous_usage=continuous_usage))
                for p in texts]

    from sweep.bench.fdlimit import in_flight

    slots, capped = in_flight(concurrency, f"ctx {context} x conc {concurrency}")
    n = workload.requests_for(concurrency)
    warm_n = workload.warmup_requests * slots
    measured = payloads(await prompts.make(context, n), workload.max_tokens)
    warm = payloads(await prompts.make(context, warm_n), min(workload.max_tokens, 32))
    clients = make_clients(base_url, slots, api_key=api_key, timeout_s=timeout_s)
    flushed = "skipped"
    try:
        with _quiet_gc():
            await _open_and_warm(clients, warm, path, timeout_s)
            if flush is not None:
                flushed = await flush()
            before = await asyncio.to_thread(counters.snapshot) if counters is not None else {}
            t0, c0 = time.perf_counter(), time.process_time()
            if workload.request_rate:
                results = await _poisson(clients, measured, path, workload.request_rate, workload.seed,
                                         timeout_s, on_done)
            else:
                results = await _closed_loop(clients, measured, path, timeout_s, on_done)
            duration, cpu = time.perf_counter() - t0, time.process_time() - c0
            after = await asyncio.to_thread(counters.snapshot) if counters is not None else {}
    finally:
        await asyncio.gather(*(c.aclose() for c in clients), return_exceptions=True)
    cell = aggregate(context, concurrency, results, duration)
    if counters is not None:
        window = counters.accept(before, after)
        if cell.accept_len is None:
            cell.accept_len = window.get("accept_len")
        cell.accept_rate = window.get("accept_rate")
    cell.flushed = flushed
    cell.prompt_sizing = prompts.sizing
    cell.client_cpu_s = cpu
    cell.concurrency_capped = capped
    return cell


async def _open_and_warm(clients: Sequence["HttpConnection"], warm: list[bytes], path: str,
                         timeout_s: float) -> None:
    """Open every connection, then send each its share of the warm-up requests.

    Warm-up failures are not counted (a dead server shows up in the
    measured requests); they must only never leave a connection unopened.
    """
    from sweep.bench.transport import TransportError

    async def one(i: int, client: "HttpConnection") -> None:
        try:
            await client.connect()
        except TransportError:
            return
        for payload in warm[i::len(clients)]:
            await stream_request(client, payload, path=path, timeout_s=timeout_s, keep_text=False)

    await asyncio.gather(*(one(i, c) for i, c in enumerate(clients)))


@contextmanager
def _quiet_gc(young_threshold: int = 50_000) -> Iterator[None]:
    """Make the client's own garbage collection rare while a cell runs.

    Why: every SSE event decodes into fresh dicts, so CPython's default
    gen-0 threshold (700 allocations) runs a collection every ~100 events,
    rescanning the cell's long-lived objects (clients, records). On a
    client-bound cell that is ~8% of the client's CPU, i.e. throughput and
    latency the server never caused. Long-lived objects are frozen out of
    collection and gen-0 runs rarely (not never: reference cycles are still
    reclaimed); the process-wide settings are restored afterwards.
    """
    old = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(max(old[0], young_threshold), old[1], old[2])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


async def arun_matrix(base_url: str, workload: "Workload", model_name: str, *,
                      api_key: str | None = None, progress: bool = True, flush: bool = True,
                      request_extras: Mapping[str, Any] | None = None, endpoint: str = "completions",
                      tokenize: Mapping[str, Any] | None = None, continuous_usage: bool = False,
                      vocab_size: int | None = None,
                      on_cell: Callable[[CellResult], None] | None = None,
                      counters: "CounterProbe | None" = None) -> list[CellResult]:
    """Async body of :func:`run_matrix`."""
    from sweep.bench.repeats import combine

    repeats = max(1, int(getattr(workload, "repeats", 1) or 1))
    base_url = base_url.rstrip("/")
    cells = [(ctx, conc) for ctx in workload.contexts for conc in workload.concurrency]
    do_flush = flush and workload.flush_cache
    out: list[CellResult] = []
    with progress_bar(progress) as bar:
        tasks = [bar.add_task(f"cell {i}/{len(cells)}  ctx {ctx:>6} x conc {conc:<4}",
                              total=workload.requests_for(conc) * repeats, tok_s="")
                 for i, (ctx, conc) in enumerate(cells, 1)]
        # a frozen server must not hold every cell for more than a request's own timeout
        admin_timeout = min(30.0, workload.request_timeout_s)
        async with make_admin_client(base_url, api_key=api_key, timeout_s=admin_timeout) as admin:
            # Prompts are deterministic per seed so trials compare on the same text;
            # without a working /flush_cache a reused server could have cached them,
            # so they are salted with a fresh random namespace instead.
            prompts = PromptMaker.for_server(admin, workload, endpoint=endpoint, model=model_name,
                                             tokenize=tokenize, vocab_size=vocab_size, namespace="matrix")
            state = {"flush": "skipped" if not do_flush else "unknown"}

            async def flush_once() -> str:
                if state["flush"] != "unsupported":
                    state["flush"] = await flush_cache(admin)
                if state["flush"] != "ok" and prompts.namespace == "matrix":
                    prompts.renew(f"matrix-{os.urandom(6).hex()}")
                return state["flush"]

            for (ctx, conc), task in zip(cells, tasks):
                def done(rec: RequestResult, task: Any = task) -> None:
                    bar.advance(task)

                runs = [await run_cell(base_url, workload, model_name, ctx, conc, prompts,
                                       api_key=api_key, on_done=done, request_extras=request_extras,
                                       endpoint=endpoint, continuous_usage=continuous_usage,
                                       flush=flush_once if do_flush else None, counters=counters)
                        for _ in range(repeats)]
                pooled = aggregate(ctx, conc, [r for run in runs for r in run.results],
                                   sum(run.duration_s for run in runs)) if repeats > 1 else runs[0]
                cell = combine(runs, pooled)
                bar.update(task, tok_s=f"{cell.output_tok_s:,.0f} tok/s"
                           + (f"  {cell.errors} errors" if cell.errors else ""))
                out.append(cell)
                if on_cell is not None:
                    on_cell(cell)
    return out


def server_options(cfg: Any) -> dict[str, Any]:
    """What :func:`run_matrix` needs to know about the server and model of a TrialConfig
    (the endpoint: the workload's when it names one, else the server's)."""
    server = cfg.server
    vocab = (cfg.model.arch or {}).get("vocab_size")
    return {"request_extras": server.request_extras,
            "endpoint": getattr(cfg.workload, "endpoint", None) or server.endpoint,
            "tokenize": server.tokenize, "continuous_usage": server.continuous_usage,
            "vocab_size": int(vocab) if vocab else None}


def run_matrix(base_url: str, workload: "Workload", model_name: str, *,
               api_key: str | None = None, progress: bool = True, flush: bool = True,
               request_extras: Mapping[str, Any] | None = None, endpoint: str = "completions",
               tokenize: Mapping[str, Any] | None = None, continuous_usage: bool = False,
               vocab_size: int | None = None,
               on_cell: Callable[[CellResult], None] | None = None,
               counters: "CounterProbe | None" = None) -> list[CellResult]:
    """Run every context x concurrency cell of ``workload`` against ``base_url``.

    Synchronous entry point (runs its own event loop; from inside a running
    loop it uses a helper thread). Never raises for request failures: they
    are counted per cell in ``errors`` / ``error_kinds``. Cells run in a fixed
    order: contexts outer, concurrencies inner, as listed by the workload; each
    ``workload.repeats`` times in a row (sweep/bench/repeats.py). ``on_cell`` is
    called in the benchmark's thread right after each cell finishes, with the
    cell that ends up in the returned list, before the next one starts: the trial
    writes its result file there, so an interrupted matrix keeps every finished
    cell. Whatever it raises stops the matrix and propagates (the trial's pruner
    uses this: sweep/trial/hooks.py).
    """
    coro_args: dict[str, Any] = dict(api_key=api_key, progress=progress, flush=flush,
                                     request_extras=request_extras, endpoint=endpoint, tokenize=tokenize,
                                     continuous_usage=continuous_usage, vocab_size=vocab_size,
                                     on_cell=on_cell, counters=counters)
    return run_sync(lambda: arun_matrix(base_url, workload, model_name, **coro_args))
