"""The context x concurrency throughput matrix.

For each cell: flush the server's prefix cache (so nothing measured is a
cache hit left by an earlier cell or trial), run unmeasured warmup
requests, then ``workload.requests_for(concurrency)`` measured requests,
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
* ``ttft/itl/tpot/e2e`` percentiles in ms (linear interpolation); ITL is
  pooled over every gap between content arrivals of every request; TPOT is
  per request (e2e - ttft) / (completion_tokens - 1).
* ``accept_len``: sum(completion_tokens) / sum(spec_verify_ct) over
  successful requests carrying spec counters (None without them).
* ``errors`` / ``error_kinds``: failed requests, counted and shown.
"""

from __future__ import annotations

import asyncio
import gc
import os
import random
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

from sweep.bench.acceptance import accept_len_of, spec_sums
from sweep.bench.client import RequestResult, build_payload, make_client, make_clients, stream_chat
from sweep.bench.prompts import PromptFactory

if TYPE_CHECKING:
    import httpx

    from sweep.compose.config import Workload

# Exactly the cell keys of result.json (docs/ARCHITECTURE.md).
CELL_KEYS = (
    "context", "concurrency", "requests", "errors", "error_kinds",
    "output_tok_s", "per_stream_tok_s",
    "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99",
    "itl_ms_p50", "itl_ms_p90", "itl_ms_p99",
    "tpot_ms_p50", "tpot_ms_p90", "tpot_ms_p99",
    "e2e_ms_p50", "accept_len", "completion_tokens", "prompt_tokens_mean", "duration_s",
    "repeats", "output_tok_s_ci", "per_stream_tok_s_ci", "accept_len_ci",
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
    itl_ms_p50: float | None
    itl_ms_p90: float | None
    itl_ms_p99: float | None
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
    spec_tokens: int = 0          # numerator of accept_len (for trial-level sums)
    spec_verify_ct: int = 0       # denominator of accept_len
    flushed: str = "skipped"      # ok | unsupported | failed | skipped
    repeats: int = 1              # workload.repeats (sweep/bench/repeats.py); figures are means
    output_tok_s_ci: list[float] | None = None
    per_stream_tok_s_ci: list[float] | None = None
    accept_len_ci: list[float] | None = None
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
    itl = [g for r in ok for g in r.itl_s]
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
        itl_ms_p50=_ms(itl, 50), itl_ms_p90=_ms(itl, 90), itl_ms_p99=_ms(itl, 99),
        tpot_ms_p50=_ms(tpot, 50), tpot_ms_p90=_ms(tpot, 90), tpot_ms_p99=_ms(tpot, 99),
        e2e_ms_p50=_ms(e2e, 50), e2e_ms_p90=_ms(e2e, 90), e2e_ms_p99=_ms(e2e, 99),
        accept_len=accept_len_of(spec_tokens, spec_verify),
        completion_tokens=tokens,
        prompt_tokens_mean=round(sum(prompt) / len(prompt), 2) if prompt else None,
        duration_s=round(duration_s, 4), spec_tokens=spec_tokens, spec_verify_ct=spec_verify,
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


async def _closed_loop(clients: Sequence["httpx.AsyncClient"], payloads: list[dict[str, Any]],
                       timeout_s: float, on_done: Callable[[RequestResult], None]) -> list[RequestResult]:
    """Keep one request in flight per client until every payload was sent."""
    results: list[RequestResult | None] = [None] * len(payloads)
    todo = iter(range(len(payloads)))

    async def worker(client: "httpx.AsyncClient") -> None:
        for i in todo:  # shared iterator: next() never awaits, so no lock is needed
            rec = await stream_chat(client, payloads[i], timeout_s=timeout_s, keep_text=False)
            results[i] = rec
            on_done(rec)

    await asyncio.gather(*(worker(c) for c in clients[:max(1, len(payloads))]))
    return [r for r in results if r is not None]


async def _poisson(clients: Sequence["httpx.AsyncClient"], payloads: list[dict[str, Any]],
                   rate: float, seed: int, timeout_s: float,
                   on_done: Callable[[RequestResult], None]) -> list[RequestResult]:
    """Send at Poisson arrival times (``rate`` req/s), at most one in flight per client.

    A request whose arrival finds every client busy waits for one (as
    bench_serving's --max-concurrency does); its TTFT and e2e are measured
    from its scheduled arrival, so they include that wait.
    """
    rng = random.Random(seed)
    idle: asyncio.Queue[httpx.AsyncClient] = asyncio.Queue()
    for c in clients:
        idle.put_nowait(c)
    t, offsets = 0.0, []
    for _ in payloads:
        offsets.append(t)
        t += rng.expovariate(rate)

    base = time.perf_counter()

    async def one(payload: dict[str, Any], at: float) -> RequestResult:
        await asyncio.sleep(max(0.0, base + at - time.perf_counter()))
        client = await idle.get()
        try:
            rec = await stream_chat(client, payload, timeout_s=timeout_s, keep_text=False,
                                    started=base + at)
        finally:
            idle.put_nowait(client)
        on_done(rec)
        return rec

    return list(await asyncio.gather(*(one(p, at) for p, at in zip(payloads, offsets))))


async def run_cell(base_url: str, workload: "Workload", model_name: str, context: int,
                   concurrency: int, prompts: PromptFactory, *, api_key: str | None = None,
                   on_done: Callable[[RequestResult], None] | None = None,
                   seed: int = 0, request_extras: Mapping[str, Any] | None = None) -> CellResult:
    """Warm up, then measure one cell with ``concurrency`` keep-alive connections."""
    on_done = on_done or (lambda _r: None)
    timeout_s = workload.request_timeout_s

    def payloads(n: int) -> list[dict[str, Any]]:
        return [build_payload(model_name, p, max_tokens=workload.max_tokens,
                              temperature=workload.temperature, ignore_eos=workload.ignore_eos,
                              extra=request_extras)
                for p in prompts.batch(context, n)]

    clients = make_clients(base_url, concurrency, api_key=api_key, timeout_s=timeout_s)
    try:
        with _quiet_gc():
            if workload.warmup_requests:
                await _closed_loop(clients, payloads(workload.warmup_requests), timeout_s, lambda _r: None)
            measured = payloads(workload.requests_for(concurrency))
            t0 = time.perf_counter()
            if workload.request_rate:
                results = await _poisson(clients, measured, workload.request_rate, seed, timeout_s, on_done)
            else:
                results = await _closed_loop(clients, measured, timeout_s, on_done)
            duration = time.perf_counter() - t0
    finally:
        await asyncio.gather(*(c.aclose() for c in clients), return_exceptions=True)
    return aggregate(context, concurrency, results, duration)


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
                      seed: int = 0, request_extras: Mapping[str, Any] | None = None,
                      on_cell: Callable[[CellResult], None] | None = None) -> list[CellResult]:
    """Async body of :func:`run_matrix`."""
    from sweep.bench.repeats import combine

    repeats = max(1, int(getattr(workload, "repeats", 1) or 1))
    base_url = base_url.rstrip("/")
    cells = [(ctx, conc) for ctx in workload.contexts for conc in workload.concurrency]
    do_flush = flush and workload.flush_cache
    # Prompts are deterministic per seed so trials compare on the same text;
    # without a working /flush_cache a reused server could have cached them,
    # so they are salted with a fresh random namespace instead.
    prompts = PromptFactory(seed, namespace="matrix")
    out: list[CellResult] = []
    with _progress_bar(progress) as bar:
        tasks = [bar.add_task(f"ctx {ctx:>6} x conc {conc:<4}",
                              total=workload.requests_for(conc) * repeats, tok_s="") for ctx, conc in cells]
        async with make_client(base_url, concurrency=1, api_key=api_key, timeout_s=30.0) as admin:
            flush_state = "skipped"
            for (ctx, conc), task in zip(cells, tasks):
                runs = []
                for _ in range(repeats):
                    if do_flush and flush_state != "unsupported":
                        flush_state = await flush_cache(admin)
                    if flush_state != "ok" and prompts.namespace == "matrix":
                        prompts = PromptFactory(seed, namespace=f"matrix-{os.urandom(6).hex()}")

                    def done(rec: RequestResult, task: Any = task) -> None:
                        bar.advance(task)

                    run = await run_cell(base_url, workload, model_name, ctx, conc, prompts,
                                         api_key=api_key, on_done=done, seed=seed,
                                         request_extras=request_extras)
                    run.flushed = flush_state
                    runs.append(run)
                pooled = aggregate(ctx, conc, [r for run in runs for r in run.results],
                                   sum(run.duration_s for run in runs)) if repeats > 1 else runs[0]
                cell = combine(runs, pooled)
                bar.update(task, tok_s=f"{cell.output_tok_s:,.0f} tok/s"
                           + (f"  {cell.errors} errors" if cell.errors else ""))
                out.append(cell)
                if on_cell is not None:
                    on_cell(cell)
    return out


def run_matrix(base_url: str, workload: "Workload", model_name: str, *,
               api_key: str | None = None, progress: bool = True, flush: bool = True,
               seed: int = 0, request_extras: Mapping[str, Any] | None = None,
               on_cell: Callable[[CellResult], None] | None = None) -> list[CellResult]:
    """Run every context x concurrency cell of ``workload`` against ``base_url``.

    Synchronous entry point (runs its own event loop; from inside a running
    loop it uses a helper thread). Never raises for request failures: they
    are counted per cell in ``errors`` / ``error_kinds``. Cells run in a fixed
    order: contexts outer, concurrencies inner, as listed by the workload; each
    ``workload.repeats`` times in a row (sweep/bench/repeats.py). ``on_cell`` is
    called in the benchmark's thread right after each cell finishes, with the
    cell that ends up in the returned list; whatever it raises stops the matrix
    and propagates (the trial's pruner uses this: sweep/trial/hooks.py).
    """
    coro_args: dict[str, Any] = dict(api_key=api_key, progress=progress, flush=flush, seed=seed,
                                     request_extras=request_extras, on_cell=on_cell)
    return _run_sync(lambda: arun_matrix(base_url, workload, model_name, **coro_args))


def _run_sync(make_coro: Callable[[], Any]) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make_coro())
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(make_coro())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    th = threading.Thread(target=target, name="specsweep-bench")
    th.start()
    th.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


class _NoBar:
    """Stands in for rich's Progress when progress=False (tests, CI logs)."""

    def add_task(self, *_a: Any, **_k: Any) -> int:
        return 0

    def advance(self, *_a: Any, **_k: Any) -> None:
        pass

    def update(self, *_a: Any, **_k: Any) -> None:
        pass


def _progress_bar(enabled: bool) -> Any:
    """Rich progress on stderr: one task per cell, advanced per finished request."""
    if not enabled:
        return nullcontext(_NoBar())
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn)

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("{task.fields[tok_s]}"),
                    console=Console(stderr=True), transient=False)
