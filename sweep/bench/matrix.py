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

The figures of a cell and how requests reduce to them: :mod:`sweep.bench.cell`.
Which cells, with how many requests and (open loop) at which arrival times:
a plan (:mod:`sweep.bench.loadplan`: the fixed matrix, or the max-load search of
:mod:`sweep.bench.maxload`), handed out one point at a time; this module only
sends what the plan says.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator, Mapping, Sequence

from sweep.bench.aio import run_sync
from sweep.bench.cell import (CELL_KEYS, CellResult, aggregate, percentile,  # noqa: F401 - re-exported
                              trial_accept_len)
from sweep.bench.client import build_payload, encode_json, make_admin_client, make_clients, path_for, stream_request
from sweep.bench.loadplan import LoadPoint, MatrixPlan, Plan, arrivals
from sweep.bench.progress import progress_bar
from sweep.bench.request import RequestResult
from sweep.bench.sizing import PromptMaker

if TYPE_CHECKING:
    import httpx

    from sweep.bench.boxstate import Watch
    from sweep.bench.serverstats import CounterProbe
    from sweep.bench.transport import HttpConnection
    from sweep.compose.config import Workload
    from sweep.stats.slo import Slo

async def flush_cache(client: "httpx.AsyncClient", path: str = "/flush_cache", attempts: int = 5) -> str:
    """POST ``path`` (GET on 405): ``ok``, ``unsupported`` (404) or ``failed``.

    SGLang refuses to flush while requests are running (HTTP 400), so a
    refusal is retried briefly.
    """
    import httpx

    for attempt in range(attempts):
        try:
            resp = await client.post(path)
            if resp.status_code == 405:
                resp = await client.get(path)
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


# What the prefix cache held when a cell's measured window opened (``cache`` per cell):
CACHE_STATES = {
    "flushed": "the server's cache was emptied between the warm-up and the window",
    "off": "the server keeps no prefix cache across requests (its config says so)",
    "fresh": "prompts this server never saw (it keeps a cache that nothing here can empty)",
    "warm": "not emptied (workload.flush_cache=false): what earlier requests left may be hit",
}


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
                   offsets: Sequence[float], timeout_s: float,
                   on_done: Callable[[RequestResult], None]) -> list[RequestResult]:
    """Send each payload at its planned arrival (``offsets``, :func:`sweep.bench.loadplan.arrivals`),
    at most one in flight per client.

    A request whose arrival finds every client busy waits for one (as
    bench_serving's --max-concurrency does); its TTFT and e2e are measured
    from its scheduled arrival, so they include that wait.
    """
    idle: asyncio.Queue[HttpConnection] = asyncio.Queue()
    for c in clients:
        idle.put_nowait(c)
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


async def run_cell(base_url: str, workload: "Workload", model_name: str, point: LoadPoint,
                   prompts: PromptMaker, *, api_key: str | None = None,
                   on_done: Callable[[RequestResult], None] | None = None,
                   request_extras: Mapping[str, Any] | None = None, endpoint: str = "completions",
                   continuous_usage: bool = False, slo: "Slo | None" = None,
                   flush: Callable[[], Awaitable[str]] | None = None,
                   counters: "CounterProbe | None" = None, box: "Watch | None" = None) -> CellResult:
    """Size the prompts, open and warm ``point.concurrency`` connections, start cold, then measure
    one cell (closed loop, or Poisson at ``point.rate`` with arrivals planned before the window opens).

    ``flush``: called after the warm-up; says what the cache holds when the window opens
    (:data:`CACHE_STATES`). ``fresh`` (a cache nothing can empty) makes the measured prompts
    anew in a namespace of their own, so none was seen by this server before.
    ``counters``: read the server's acceptance counters right before and after the
    measured requests (where responses carry none: vLLM) for the cell's accept_len/rate.
    ``box``: what measures the box's state over the window (:mod:`sweep.bench.boxstate`; default:
    this process's tree, ``workload.busy_load``).
    """
    from sweep.bench.boxstate import Watch

    box = box if box is not None else Watch(busy_load=float(getattr(workload, "busy_load", 0.5)))
    on_done = on_done or (lambda _r: None)
    timeout_s = workload.request_timeout_s
    path = path_for(endpoint)
    context, concurrency = point.context, point.concurrency

    def payloads(texts: Sequence[Any], max_tokens: int) -> list[bytes]:
        return [encode_json(build_payload(model_name, p, max_tokens=max_tokens, temperature=workload.temperature,
                                          ignore_eos=workload.ignore_eos, extra=request_extras,
                                          endpoint=endpoint, continuous_usage=continuous_usage))
                for p in texts]

    from sweep.bench.fdlimit import in_flight

    slots, capped = in_flight(concurrency, f"ctx {context} x conc {concurrency}")
    warm_n = workload.warmup_requests * slots
    measured = payloads(await prompts.make(context, point.requests), workload.max_tokens)
    warm = payloads(await prompts.make(context, warm_n), min(workload.max_tokens, 32))
    offsets = arrivals(len(measured), point.rate, workload.seed) if point.rate else None
    clients = make_clients(base_url, slots, api_key=api_key, timeout_s=timeout_s)
    cache = "warm"
    try:
        with _quiet_gc():
            await _open_and_warm(clients, warm, path, timeout_s)
            if flush is not None:
                cache = await flush()
                if cache == "fresh":
                    measured = payloads(await prompts.make(context, point.requests), workload.max_tokens)
            before = await asyncio.to_thread(counters.snapshot) if counters is not None else {}
            box_before = box.start()
            t0, c0 = time.perf_counter(), time.process_time()
            if offsets is not None:
                results = await _poisson(clients, measured, path, offsets, timeout_s, on_done)
            else:
                results = await _closed_loop(clients, measured, path, timeout_s, on_done)
            duration, cpu = time.perf_counter() - t0, time.process_time() - c0
            box_state = box.stop(box_before)
            after = await asyncio.to_thread(counters.snapshot) if counters is not None else {}
    finally:
        await asyncio.gather(*(c.aclose() for c in clients), return_exceptions=True)
    cell = aggregate(context, concurrency, results, duration, slo, request_rate=point.rate)
    if counters is not None:
        window = counters.accept(before, after)
        if cell.accept_len is None:
            cell.accept_len = window.get("accept_len")
        cell.accept_rate = window.get("accept_rate")
    cell.cache = cache
    cell.load_avg = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    cell.prompt_sizing = prompts.sizing
    cell.client_cpu_s = cpu
    cell.concurrency_capped = capped
    cell.load_search = point.search
    cell.box_state = box_state
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
                      vocab_size: int | None = None, slo: "Slo | None" = None, plan: Plan | None = None,
                      on_cell: Callable[[CellResult], None] | None = None,
                      counters: "CounterProbe | None" = None,
                      cache_kept: bool = True, flush_path: str | None = "/flush_cache",
                      box: "Watch | None" = None) -> list[CellResult]:
    """Async body of :func:`run_matrix`."""
    from sweep.bench.boxstate import Watch, settle
    from sweep.bench.repeats import combine

    plan = plan if plan is not None else MatrixPlan(workload)
    repeats = max(1, int(getattr(workload, "repeats", 1) or 1))
    base_url = base_url.rstrip("/")
    out: list[CellResult] = []
    box = box if box is not None else Watch(busy_load=float(getattr(workload, "busy_load", 0.5)))
    policy = str(getattr(workload, "busy_box", "mark"))
    with progress_bar(progress) as bar:
        # a frozen server must not hold every cell for more than a request's own timeout
        admin_timeout = min(30.0, workload.request_timeout_s)
        async with make_admin_client(base_url, api_key=api_key, timeout_s=admin_timeout) as admin:
            # Prompts are deterministic per seed so trials compare on the same text; a server
            # whose cache cannot be emptied gets prompts of a namespace of this trial's own.
            prompts = PromptMaker.for_server(admin, workload, endpoint=endpoint, model=model_name,
                                             tokenize=tokenize, vocab_size=vocab_size, namespace="matrix")
            state = {"flush": "unknown"}

            async def start_cold() -> str:
                """After the warm-up, before the window: what the cache holds (CACHE_STATES)."""
                if not cache_kept:
                    return "off"
                if not workload.flush_cache:
                    return "warm"
                if flush_path and state["flush"] != "unsupported":
                    state["flush"] = await flush_cache(admin, flush_path)
                    if state["flush"] == "ok":
                        return "flushed"
                if prompts.namespace == "matrix":
                    prompts.renew(f"matrix-{os.urandom(6).hex()}")
                return "fresh"

            i = 0
            while (point := plan.next()) is not None:
                i += 1
                of = f"/{plan.total}" if plan.total else ""
                kind = "probe" if point.search else "cell"
                task = bar.add_task(f"{kind} {i}{of}  {point.label}", total=point.requests * repeats, tok_s="")

                def done(rec: RequestResult, task: Any = task) -> None:
                    bar.advance(task)

                runs: list[CellResult] = []
                if policy != "mark":  # wait for a busy box to settle (refuse: Busy ends the matrix here)
                    await asyncio.to_thread(settle, box, policy, float(getattr(workload, "busy_wait_s", 0.0)),
                                            say=_say,
                                            what=f"{kind} {point.label}")
                try:
                    for _ in range(repeats):
                        runs.append(await run_cell(base_url, workload, model_name, point, prompts,
                                                   api_key=api_key, on_done=done, request_extras=request_extras,
                                                   endpoint=endpoint, continuous_usage=continuous_usage, slo=slo,
                                                   flush=start_cold if flush else None, counters=counters,
                                                   box=box))
                except (KeyboardInterrupt, asyncio.CancelledError):
                    # Ctrl-C / SIGTERM between repeats: the repeats that finished are a measurement,
                    # kept as the cell (repeats says how many), as a server that died would have left them
                    if runs:
                        cell = combine(runs, _pooled(point, runs, slo))
                        out.append(cell)
                        plan.record(point, cell, runs)
                        if on_cell is not None:
                            on_cell(cell)
                    raise
                cell = combine(runs, _pooled(point, runs, slo))
                bar.update(task, tok_s=f"{cell.output_tok_s:,.0f} tok/s"
                           + (f"  SLO {cell.slo_attainment:.0%}" if cell.slo_attainment is not None else "")
                           + (f"  {cell.errors} errors" if cell.errors else ""))
                out.append(cell)
                plan.record(point, cell, runs)
                if on_cell is not None:
                    on_cell(cell)
    return out


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _pooled(point: Any, runs: list[CellResult], slo: "Slo | None") -> CellResult:
    """Every repeat's requests as one cell over the repeats' total duration (one run: itself)."""
    if len(runs) == 1:
        return runs[0]
    return aggregate(point.context, point.concurrency, [r for run in runs for r in run.results],
                     sum(run.duration_s for run in runs), slo, request_rate=point.rate)


def server_options(cfg: Any) -> dict[str, Any]:
    """What :func:`run_matrix` needs to know about the server and model of a TrialConfig
    (the endpoint: the workload's when it names one, else the server's)."""
    server = cfg.server
    vocab = (cfg.model.arch or {}).get("vocab_size")
    return {"request_extras": server.request_extras,
            "endpoint": getattr(cfg.workload, "endpoint", None) or server.endpoint,
            "tokenize": server.tokenize, "continuous_usage": server.continuous_usage,
            "vocab_size": int(vocab) if vocab else None,
            "cache_kept": server.cache_kept, "flush_path": server.flush_path}


def run_matrix(base_url: str, workload: "Workload", model_name: str, *,
               api_key: str | None = None, progress: bool = True, flush: bool = True,
               request_extras: Mapping[str, Any] | None = None, endpoint: str = "completions",
               tokenize: Mapping[str, Any] | None = None, continuous_usage: bool = False,
               vocab_size: int | None = None, slo: "Slo | None" = None, plan: Plan | None = None,
               on_cell: Callable[[CellResult], None] | None = None,
               counters: "CounterProbe | None" = None,
               cache_kept: bool = True, flush_path: str | None = "/flush_cache",
               box: "Watch | None" = None) -> list[CellResult]:
    """Run every cell of ``plan`` (default: the workload's context x concurrency matrix) against
    ``base_url``; cells are judged against ``slo`` (:mod:`sweep.stats.slo`) when it is given.

    Synchronous entry point (runs its own event loop; from inside a running
    loop it uses a helper thread). Never raises for request failures: they
    are counted per cell in ``errors`` / ``error_kinds``. Cells run in a fixed
    order: contexts outer, concurrencies inner, as listed by the workload; each
    ``workload.repeats`` times in a row (sweep/bench/repeats.py). ``on_cell`` is
    called in the benchmark's thread right after each cell finishes, with the
    cell that ends up in the returned list, before the next one starts: the trial
    writes its result file there, so an interrupted matrix keeps every finished
    cell. Whatever it raises stops the matrix and propagates (the trial's pruner
    uses this: sweep/trial/hooks.py). ``box`` measures the box's state over each cell's window
    (``cell.box_state``); under ``workload.busy_box`` wait or refuse each cell waits for a busy box
    to settle first, and refuse raises :class:`sweep.bench.boxstate.Busy` (sweep/bench/boxstate.py).
    """
    coro_args: dict[str, Any] = dict(api_key=api_key, progress=progress, flush=flush,
                                     request_extras=request_extras, endpoint=endpoint, tokenize=tokenize,
                                     continuous_usage=continuous_usage, vocab_size=vocab_size,
                                     slo=slo, plan=plan, on_cell=on_cell, counters=counters,
                                     cache_kept=cache_kept, flush_path=flush_path, box=box)
    return run_sync(lambda: arun_matrix(base_url, workload, model_name, **coro_args))
