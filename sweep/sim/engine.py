"""Continuous batching: one scheduler loop steps every running request.

Like SGLang's scheduler, new requests are prefilled in one batch (which
yields each one's first token), then every decode/verify step advances all
running requests together. A step's duration comes from the performance
model for the current batch size and context lengths, so concurrency scaling
emerges rather than being tabulated. With speculative decoding each step
hands each request that step's accepted tokens as ONE chunk.

Time is virtual-then-real: the loop keeps a simulated clock and sleeps until
it (``time_scale`` stretches it; 0 = no delay), so per-step Python overhead
does not accumulate into the measured speed.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from sweep.sim import perf
from sweep.compose import per_load as _per_load
from sweep.sim.noise import Drift

SURVIVAL_REFRESH = 32  # answer tokens before acceptance is re-evaluated (drift, window)


@dataclass(slots=True)
class Request:
    """One generation in flight. The engine fills ``chunks``; the HTTP side drains them."""

    rid: str
    pieces: list[str]
    finish_reason: str
    prompt_tokens: int
    seed: int
    created: float = field(default_factory=time.time)
    pos: int = 0                      # pieces emitted so far
    context: int = 0                  # prompt + generated tokens (KV length)
    verify_ct: int = 0
    correct_drafts: int = 0
    histogram: list[int] = field(default_factory=list)
    chunks: list[tuple[int, int]] = field(default_factory=list)  # (start, end) piece ranges
    event: asyncio.Event = field(default_factory=asyncio.Event)
    finished: bool = False
    aborted: bool = False
    first_token_time: float = 0.0
    finish_time: float = 0.0
    surv: tuple[float, ...] = ()
    surv_pos: int = -1               # answer position of the last acceptance refresh
    surv_budget: int = -1            # the per-load budget ``surv`` was computed for
    rng: random.Random | None = None
    scale: float = 1.0

    @property
    def completion_tokens(self) -> int:
        return self.pos

    def emit(self, n: int) -> None:
        end = min(len(self.pieces), self.pos + n)
        if end > self.pos:
            self.chunks.append((self.pos, end))
            self.context += end - self.pos
            self.pos = end
        if self.pos >= len(self.pieces):
            self.finished = True
            self.finish_time = time.time()
        self.event.set()


@dataclass(slots=True)
class Stats:
    """Counters for logs, /metrics and /get_server_info."""

    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    requests_total: int = 0
    finished_total: int = 0
    verify_ct_total: int = 0
    accept_tokens_total: int = 0
    # last logging window (SGLang's gauges are per window, not cumulative)
    window_accept_tokens: int = 0
    window_verify_ct: int = 0
    window_correct: int = 0
    window_generated: int = 0
    window_started: float = field(default_factory=time.perf_counter)
    accept_length: float = 0.0
    accept_rate: float = 0.0
    gen_throughput: float = 0.0
    num_running: int = 0
    num_queue: int = 0
    token_usage: float = 0.0
    num_used_tokens: int = 0
    cuda_graph: bool = True
    decode_steps: int = 0


class Engine:
    """The scheduler loop and its queues."""

    def __init__(self, *, hardware: Mapping[str, Any], model: Mapping[str, Any], spec: Mapping[str, Any],
                 time_scale: float, seed: int, max_running: int, max_total_tokens: int,
                 disable_cuda_graph: bool, cuda_graph_max_bs: int, decode_log_interval: int,
                 log: Callable[[str], None], noise: float = 0.0, noise_seed: str = "") -> None:
        self.hardware, self.model, self.spec = hardware, model, spec
        self.cal = perf.calibration(hardware)  # the box's calibration, or the priors
        self.box = perf.box_of(hardware, model)
        self.shape = perf.shape_of(spec)
        self.family = self.shape.fam
        self.width = self.shape.width
        # per-load speculation (spec.per_load): each decode step's budget from its batch size
        self.bands = _per_load.bands_of(spec)
        self._shapes: dict[int, Any] = {}
        self.time_scale = time_scale
        self.seed = seed
        self.max_running = max(1, max_running)
        self.max_total_tokens = max(1, max_total_tokens)
        self.disable_cuda_graph = disable_cuda_graph
        self.cuda_graph_max_bs = cuda_graph_max_bs
        self.decode_log_interval = max(1, decode_log_interval)
        self.log = log
        # SGLang logs every prefill batch; at no-delay capacity runs that is noise.
        self.log_prefill = time_scale > 0
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.stats = Stats()
        self.wake = asyncio.Event()
        self.clock = 0.0
        self.sigma = float(self.cal["request_sigma"])
        self.drift = Drift(noise, f"{seed}:{noise_seed}")  # run-to-run noise (sweep/sim/noise.py)
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ API
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def submit(self, req: Request) -> None:
        req.context = req.prompt_tokens
        rng = random.Random(req.seed)
        req.rng = rng
        req.scale = math.exp(max(-3.0, min(3.0, rng.gauss(0.0, 1.0))) * self.sigma)
        self.stats.requests_total += 1
        self.stats.prompt_tokens_total += req.prompt_tokens
        self.waiting.append(req)
        self.wake.set()

    def abort(self, req: Request) -> None:
        req.aborted = True

    def flush_cache(self) -> bool:
        return not self.running and not self.waiting

    # ------------------------------------------------------------------ loop
    async def _advance(self, ms: float) -> None:
        """Move the simulated clock by ``ms`` and sleep until real time catches up."""
        loop_now = time.perf_counter()
        if self.time_scale <= 0:
            await asyncio.sleep(0)
            return
        if self.clock < loop_now - 1.0:  # far behind (process was stopped): resynchronise
            self.clock = loop_now
        self.clock += ms * self.time_scale / 1000.0
        delay = self.clock - loop_now
        await asyncio.sleep(delay if delay > 0 else 0)

    async def _run(self) -> None:
        while True:
            if not self.running and not self.waiting:
                self.wake.clear()
                await self.wake.wait()
                self.clock = time.perf_counter()
            self.running = [r for r in self.running if not r.aborted]
            if self.waiting and len(self.running) < self.max_running:
                await self._prefill()
                continue
            if self.running:
                await self._decode()
            else:
                await asyncio.sleep(0)

    def _used_tokens(self) -> int:
        return sum(r.context for r in self.running)

    async def _prefill(self) -> None:
        used = self._used_tokens()
        batch: list[Request] = []
        while self.waiting and len(self.running) + len(batch) < self.max_running:
            req = self.waiting[0]
            need = req.prompt_tokens + len(req.pieces)
            if batch and used + need > self.max_total_tokens:
                break
            self.waiting.popleft()
            if req.aborted:
                continue
            batch.append(req)
            used += need
        if not batch:
            return
        new_tokens = sum(r.prompt_tokens for r in batch)
        quad = sum(r.prompt_tokens * r.prompt_tokens / 2.0 for r in batch)
        if self.log_prefill:
            used_now = self._used_tokens()
            self.log(f"Prefill batch, #new-seq: {len(batch)}, #new-token: {new_tokens}, #cached-token: 0, "
                     f"#token: {used_now}, token usage: {used_now / self.max_total_tokens:.2f}, "
                     f"#running-req: {len(self.running)}, #queue-req: {len(self.waiting)}, ")
        ms = perf.prefill_ms_box(self.box, self.cal.values, self.shape, new_tokens, quad)
        ms *= self.drift.factor(ms)
        await self._advance(ms)
        now = time.time()
        for req in batch:
            req.first_token_time = now
            req.emit(1)
            self.stats.generation_tokens_total += 1
            self.stats.window_generated += 1
            if req.finished:
                self._finish(req)
            else:
                self.running.append(req)

    def _step_shape(self, batch: int) -> tuple[Any, int]:
        """The verify shape of a step decoding ``batch`` requests, and its budget (-1: no per-load bands)."""
        if self.bands is None:
            return self.shape, -1
        budget = _per_load.budget_at(self.bands, batch)
        shape = self._shapes.get(budget)
        if shape is None:
            shape = self._shapes[budget] = perf.shape_of(_per_load.spec_at(self.spec, budget))
        return shape, budget

    async def _decode(self) -> None:
        batch = self.running
        ctx_sum = float(sum(r.context for r in batch))
        graph = not self.disable_cuda_graph and len(batch) <= self.cuda_graph_max_bs
        shape, budget = self._step_shape(len(batch))
        ms = perf.step_ms(self.box, self.cal.values, shape, len(batch), ctx_sum, not graph)["total"]
        ms *= self.drift.factor(ms)
        await self._advance(ms)
        st = self.stats
        spec_on = shape.fam != "none"
        for req in batch:
            if req.aborted:
                continue
            if spec_on:
                if req.surv_pos < 0 or req.pos - req.surv_pos >= SURVIVAL_REFRESH or req.surv_budget != budget:
                    scale = perf.p_scale(shape, self.cal.values, req.context, req.pos) * req.scale
                    req.surv = perf.survival(shape, self.cal.values, round(scale, 5))
                    req.surv_pos = req.pos
                    req.surv_budget = budget
                n = perf.draw_accepted(req.surv, req.rng.random())  # type: ignore[union-attr]
            else:
                n = 1
            before = req.pos
            req.emit(n)
            got = req.pos - before
            st.generation_tokens_total += got
            st.window_generated += got
            if spec_on:
                req.verify_ct += 1
                req.correct_drafts += max(0, got - 1)
                if len(req.histogram) < self.width:
                    req.histogram.extend([0] * (self.width - len(req.histogram)))
                req.histogram[max(0, got - 1)] += 1
                st.window_verify_ct += 1
                st.window_accept_tokens += got
                st.window_correct += max(0, got - 1)
                st.verify_ct_total += 1
                st.accept_tokens_total += got
            if req.finished:
                self._finish(req)
        st.cuda_graph = graph
        st.decode_steps += 1
        self.running = [r for r in batch if not r.finished and not r.aborted]
        if st.decode_steps % self.decode_log_interval == 0:
            self._log_decode(len(batch))

    def _finish(self, req: Request) -> None:
        self.stats.finished_total += 1

    def _log_decode(self, running: int) -> None:
        st = self.stats
        now = time.perf_counter()
        gap = max(1e-9, now - st.window_started)
        st.gen_throughput = st.window_generated / gap
        st.window_started = now
        st.window_generated = 0
        st.num_running = running
        st.num_queue = len(self.waiting)
        st.num_used_tokens = self._used_tokens()
        st.token_usage = st.num_used_tokens / self.max_total_tokens
        msg = (f"Decode batch, #running-req: {running}, #token: {st.num_used_tokens}, "
               f"token usage: {st.token_usage:.2f}, ")
        if self.family != "none":
            vc = max(1, st.window_verify_ct)
            st.accept_length = st.window_accept_tokens / vc
            st.accept_rate = st.window_correct / (vc * max(1, self.width - 1))
            st.window_accept_tokens = st.window_verify_ct = st.window_correct = 0
            msg += f"accept len: {st.accept_length:.2f}, accept rate: {st.accept_rate:.2f}, "
        msg += (f"cuda graph: {st.cuda_graph}, gen throughput (token/s): {st.gen_throughput:.2f}, "
                f"#queue-req: {st.num_queue}, ")
        self.log(msg)

    def refresh_gauges(self) -> None:
        """Update running/queue gauges between log lines (for /metrics readers)."""
        st = self.stats
        st.num_running = len(self.running)
        st.num_queue = len(self.waiting)
        st.num_used_tokens = self._used_tokens()
        st.token_usage = st.num_used_tokens / self.max_total_tokens
