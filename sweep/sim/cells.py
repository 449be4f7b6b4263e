"""One benchmark cell from the step model: C requests of ``context`` tokens, ``max_tokens`` out.

What the harness measures (sweep/bench/matrix.py) for a closed-loop cell,
built from the same step and prefill times the sim server runs on:

    running  = min(C / dp, KV capacity / (context + max_tokens), the engine's slots)   per replica; the rest queue
    waves    = requests / running                              a freed slot takes the next request
    gen      = sum over the answer of  tokens / accept(position) * step(running, context + position)
    tail     = z(running) * cv * sqrt(waves) * steps * step(running / 2)      the slowest request
    wall     = waves * (prefill(running * context) + gen) + tail
    output tok/s = requests * max_tokens / wall ; per-stream tok/s = max_tokens / gen

Acceptance changes along the answer (drift, the window once the context
outgrows it), so the answer is integrated in slices; ``cv`` is the spread of
one request's step count (per-step draws and per-request difficulty), and
z(n) the expected maximum of n standard normals.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any, Mapping

from sweep.sim.accept import draft_share, moments, p_scale, segments, shape_of, survival
from sweep.sim.constants import Calibration
from sweep.sim.perf import (CUDA_GRAPH_MAX_BS, Box, box_of, calibration, kv_capacity,
                            prefill_ms_box, step_ms)


def expected_max_z(n: int) -> float:
    """E[max of n standard normals] (Blom's approximation); 0 for one."""
    if n <= 1:
        return 0.0
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def _step_key(k: str) -> str:
    """A step component's key in a cell: step_gpu_ms, step_weights_ms, step_bound, step_width."""
    if k in ("bound", "width"):
        return f"step_{k}"
    return f"step_{k}" if k.endswith("_ms") else f"step_{k}_ms"


def cell(b: Box, c: Mapping[str, float], spec: Mapping[str, Any], *, context: int, concurrency: int,
         max_tokens: int, requests: int | None = None, disable_cuda_graph: bool = False,
         max_running: int | None = None) -> dict[str, float]:
    """Steady-state figures of one cell (``tok_s`` = output tok/s over the cell's wall time).

    With ``dp`` replicas (hardware.dp) the requests split evenly between them and
    each runs its own steps; ``max_running`` is the engine's own cap on requests
    decoded together (llama.cpp's slots, SGLang's --max-running-requests)."""
    s = shape_of(spec)
    conc = max(1, math.ceil(max(1, int(concurrency)) / b.replicas))
    n = max(1, int(max_tokens))
    reqs = max(conc, math.ceil(int(requests or concurrency) / b.replicas))
    cap = kv_capacity(b, c)
    running = max(1, min(conc, cap // max(1, context + n))) if cap > 0 else 1
    if max_running:
        running = min(running, int(max_running))
    waves = reqs / running  # a queued request starts as soon as one finishes (continuous batching)
    eager = disable_cuda_graph or running > CUDA_GRAPH_MAX_BS
    prefill = prefill_ms_box(b, c, s, running * context, running * context * context / 2.0)
    spec_on = s.fam != "none"
    share = draft_share(s, c) if spec_on else 0.0
    gen = steps = var_steps = 0.0
    mid: dict[str, float] = {}
    slices = segments(n)
    for i, (pos, size) in enumerate(slices):
        ctx_now = context + pos
        a, var = moments(survival(s, c, p_scale(s, c, ctx_now, pos))) if spec_on else (1.0, 0.0)
        step = step_ms(b, c, s, running, running * ctx_now, eager)
        steps += size / a
        var_steps += size * var / a ** 3
        gen += size / a * step["total"]
        if i == len(slices) // 2:
            mid = step
    if not mid:
        mid = step_ms(b, c, s, running, running * float(context), eager)
    tail = cv = 0.0
    if spec_on and steps:
        gen += 0.5 * mid["total"]  # the last step overshoots the answer by half a step on average
        steps += 0.5
        ctx_mid = context + n / 2.0
        base = moments(survival(s, c, p_scale(s, c, ctx_mid, n / 2.0)))[0]
        hard = moments(survival(s, c, p_scale(s, c, ctx_mid, n / 2.0) * math.exp(-c["request_sigma"])))[0]
        cv = math.sqrt(var_steps / steps ** 2 + math.log(base / hard) ** 2)
        if running > 1:
            drain = step_ms(b, c, s, max(1, running // 2), running // 2 * float(context + n), eager)["total"]
            tail = expected_max_z(running) * cv * math.sqrt(waves) * steps * drain
    wall = waves * (prefill + gen) + tail
    ttft = _ttft(b, c, s, prefill, context, running, reqs, cv, mid["total"], queued=running < conc)
    accept = n / steps if spec_on and steps else 1.0
    # per drafting step (vLLM's 1 + accepted / drafts): steps whose lookup found nothing are not counted
    drafted = 1.0 + (accept - 1.0) / share if spec_on and share > 0 else 1.0
    width = float(s.width)
    return {
        "tok_s": b.replicas * reqs * n / wall * 1e3 if wall > 0 else 0.0,
        "per_stream_tok_s": n / gen * 1e3 if gen > 0 else 0.0,
        "accept_len": accept, "accept_len_drafted": drafted, "running": float(running), "waves": float(waves),
        "accept_rate": (accept - 1.0) / max(1.0, width - 1) if width > 1 else 0.0,
        "step_ms": mid["total"], "ttft_ms": ttft, "tpot_ms": gen / max(1, n - 1),
        "e2e_ms": prefill + gen, "tail_ms": tail, "verify_width": width, "steps": steps,
        **{_step_key(k): v for k, v in mid.items() if k != "total"},
    }


def _ttft(b: Box, c: Mapping[str, float], s: Any, wave_prefill: float, context: int, running: int, reqs: int,
          cv: float, step: float, queued: bool = False) -> float:
    """The median request's time to its first token in a closed loop.

    The first wave's requests arrive together and prefill together (``wave_prefill``). When a
    request finishes the next one arrives: without speculation every request of a cell takes the
    same steps (ignore_eos, one length), so the waves stay together and each prefills as the first
    did; with it, each request's steps depend on how much of its own text the draft gets right
    (measured here: the first wave of 4 prefilled together in 7.7 s without speculation, and the
    next 12 did too; with any n-gram budget the next 12 arrived one by one and took 2.1-2.4 s
    each), so the later requests arrive one by one and prefill alone, beside the others' decode
    steps (half a step's wait). The median over the requests."""
    later = reqs - running
    if later <= 0 or cv <= 0 or queued:  # requests waiting for a slot wait for a wave to end
        return wave_prefill
    wait = 0.5 * step if running > 1 else 0.0  # the others' step in progress (alone: none)
    staggered = prefill_ms_box(b, c, s, float(context), context * context / 2.0) + wait
    if later == running:  # an even count: the mean of the two middle ones
        return 0.5 * (wave_prefill + staggered)
    return staggered if later > running else wave_prefill


def estimate(hardware: Mapping[str, Any], model: Mapping[str, Any], spec: Mapping[str, Any], *,
             context: int, concurrency: int, max_tokens: int, disable_cuda_graph: bool = False,
             requests: int | None = None, cal: Calibration | None = None,
             max_running: int | None = None, workload: str | None = None) -> dict[str, float]:
    """Figures of one benchmark cell (see :func:`cell`) from the hardware and model configs;
    ``tok_s`` = output tok/s. Here, not in perf, so perf does not import this module back."""
    return cell(box_of(hardware, model), (cal or calibration(hardware)).for_workload(workload), spec,
                context=context, concurrency=concurrency, max_tokens=max_tokens, requests=requests,
                disable_cuda_graph=disable_cuda_graph, max_running=max_running)
