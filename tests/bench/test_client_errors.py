"""The client against a purpose-built misbehaving server (a test double over
real loopback HTTP): every failure is a counted error kind, never a traceback."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from sweep.bench.client import build_payload, make_client, stream_chat
from sweep.bench.matrix import run_matrix
from sweep.compose.config import Workload

from .misbehaving import CHUNKS, TOKENS_PER_CHUNK, MisbehavingServer, free_port


@pytest.fixture(scope="module")
def double():
    with MisbehavingServer() as srv:
        yield srv


def one(url: str, behaviour: str, timeout_s: float = 5.0):
    async def go():
        async with make_client(url, concurrency=1, timeout_s=timeout_s) as client:
            payload = build_payload(behaviour, "hi", max_tokens=16, ignore_eos=True)
            return await stream_chat(client, payload, timeout_s=timeout_s)
    return asyncio.run(go())


def test_good_stream_counts_tokens_from_usage_not_chunks(double):
    rec = one(double.url, "ok")
    assert rec.ok and rec.error is None
    assert rec.chunks == CHUNKS
    assert rec.completion_tokens == CHUNKS * TOKENS_PER_CHUNK  # usage, not the chunk count
    assert rec.prompt_tokens == 17
    # tokens per verify step, the prefill's first token out: (12 - 1) / 3
    assert rec.spec_verify_ct == CHUNKS and rec.accept_len == pytest.approx((CHUNKS * TOKENS_PER_CHUNK - 1) / CHUNKS)
    assert rec.ttft_s is not None and rec.e2e_s >= rec.ttft_s
    assert len(rec.step_s) == CHUNKS - 1            # one gap per content event after the first
    assert not rec.tokens_counted                    # no running usage: tokens per event estimated
    assert len(rec.itl_s()) == rec.completion_tokens - 1  # one ITL per token after the first
    assert rec.tpot_s == pytest.approx((rec.e2e_s - rec.ttft_s) / (rec.completion_tokens - 1))
    assert rec.text.startswith("tok0 ")


@pytest.mark.parametrize("behaviour, kind", [
    ("malformed_sse", "bad_sse"),
    ("non_json", "bad_json"),
    ("http_400", "http_400"),
    ("http_500", "http_500"),
    ("disconnect", "disconnect"),
    ("error_event", "server_error"),
    ("no_usage", "no_usage"),
    ("wrong_shape", "bad_sse"),
    ("usage_list", "bad_value"),
    ("usage_past_max_tokens", "bad_value"),
    ("content_not_text", "bad_sse"),
    ("finish_not_text", "bad_sse"),
])
def test_bad_input_becomes_an_error_kind(double, behaviour, kind):
    rec = one(double.url, behaviour)
    assert not rec.ok
    assert rec.error == kind, rec.detail
    assert rec.completion_tokens is None  # nothing of a bad answer is counted
    assert rec.e2e_s is not None


@pytest.mark.parametrize("behaviour", ["crlf", "mislabeled_sse"])
def test_tolerated_variants(double, behaviour):
    rec = one(double.url, behaviour)
    assert rec.ok, (rec.error, rec.detail)
    assert rec.completion_tokens == CHUNKS * TOKENS_PER_CHUNK
    assert rec.accept_len == pytest.approx((CHUNKS * TOKENS_PER_CHUNK - 1) / CHUNKS)


def test_http_error_detail_comes_from_the_body(double):
    rec = one(double.url, "http_400")
    assert "max_tokens too large" in (rec.detail or "")


def test_an_event_without_end_is_cut_at_its_bound_not_kept_growing(double):
    """A server streaming one event forever (bytes, never a blank line) grew the parser's buffer
    until the request timeout; past MAX_EVENT_BYTES the request fails and the connection closes."""
    import time

    t0 = time.monotonic()
    rec = one(double.url, "endless_event", timeout_s=60)
    assert rec.error == "bad_sse" and "an event longer than 16 MiB" in (rec.detail or ""), (rec.error, rec.detail)
    assert time.monotonic() - t0 < 30  # cut at the bound, not at the 60 s timeout


def test_stall_becomes_timeout(double):
    rec = one(double.url, "stall", timeout_s=0.5)
    assert rec.error == "timeout"


def test_unreachable_endpoint_is_connect_error():
    rec = one(f"http://127.0.0.1:{free_port()}", "ok")
    assert rec.error == "connect"


def test_api_key_is_sent_but_never_recorded(double):
    secret = "sk-never-log-me-123"

    async def go():
        async with make_client(double.url, api_key=secret) as client:
            assert client.headers["authorization"] == f"Bearer {secret}"
            return await stream_chat(client, build_payload("http_400", "hi", max_tokens=4))
    rec = asyncio.run(go())
    assert secret not in repr(dataclasses.asdict(rec))


def workload(**kw) -> Workload:
    base = dict(name="t", contexts=(32,), concurrency=(4,), max_tokens=16, requests_per_cell=None,
                min_requests=2, warmup_requests=1, request_rate=None, temperature=0.0,
                ignore_eos=True, flush_cache=True, request_timeout_s=5.0, coding="off",
                coding_max_tokens=64, humaneval_limit=1, sandbox_timeout_s=5.0, sandbox_memory_mb=256)
    base.update(kw)
    return Workload(**base)


def test_matrix_counts_failures_and_excludes_them_from_throughput(double):
    mixed = "mixed:ok,http_500,ok,disconnect"
    cells = run_matrix(double.url, workload(), mixed, progress=False, endpoint="chat")
    (cell,) = cells
    d = cell.to_dict()
    assert d["requests"] == 8 and d["errors"] == 4
    assert d["error_kinds"] == {"disconnect": 2, "http_500": 2}
    assert d["completion_tokens"] == 4 * CHUNKS * TOKENS_PER_CHUNK
    assert d["accept_len"] == pytest.approx((CHUNKS * TOKENS_PER_CHUNK - 1) / CHUNKS, abs=1e-4)
    assert d["output_tok_s"] == pytest.approx(d["completion_tokens"] / d["duration_s"], rel=0.01)
    assert cell.cache == "fresh"  # /flush_cache is a 404 here: prompts this server never saw instead


def test_a_cache_nothing_empties_gets_prompts_the_server_never_saw(double):
    """A kept prefix cache without a working flush route (llama.cpp; vLLM with prefix caching):
    two trials of the same seed on one server must not send the same measured prompts (the
    second would hit what the first cached), and each cell says so (``cache: fresh``)."""
    seen_before = len(double.prompts)
    first = run_matrix(double.url, workload(warmup_requests=0), "ok", progress=False, endpoint="chat")
    mid = len(double.prompts)
    second = run_matrix(double.url, workload(warmup_requests=0), "ok", progress=False, endpoint="chat")
    measured = workload().max_tokens  # probes that count tokens ask for one; the window for max_tokens
    a, b = ({text for text, n in double.prompts[i:j] if n == measured} for i, j in ((seen_before, mid), (mid, None)))
    assert first[0].cache == second[0].cache == "fresh"
    assert a and b and not (a & b)


def test_a_server_without_a_prefix_cache_gets_the_seeded_prompts(double):
    """``server.prefix_cache.kept: false`` (vLLM's default here): nothing to empty, nothing to
    avoid -- every trial of a seed sends the same prompts, so configs compare on one text."""
    runs = []
    for _ in range(2):
        start = len(double.prompts)
        cells = run_matrix(double.url, workload(warmup_requests=0), "ok", progress=False,
                           endpoint="chat", cache_kept=False, flush_path=None)
        assert cells[0].cache == "off"
        runs.append([text for text, n in double.prompts[start:] if n == workload().max_tokens])
    assert runs[0] == runs[1] and runs[0]


def test_a_workload_that_keeps_the_cache_says_warm(double):
    cells = run_matrix(double.url, workload(flush_cache=False), "ok", progress=False, endpoint="chat")
    assert cells[0].cache == "warm"


def test_matrix_on_unreachable_server_is_all_errors_no_exception():
    cells = run_matrix(f"http://127.0.0.1:{free_port()}", workload(warmup_requests=0), "ok",
                       progress=False, endpoint="chat")
    assert cells[0].errors == cells[0].requests == 8
    assert cells[0].error_kinds == {"connect": 8}
    assert cells[0].output_tok_s == 0.0


def test_poisson_arrivals(double):
    cells = run_matrix(double.url, workload(request_rate=200.0, warmup_requests=0), "ok",
                       progress=False, endpoint="chat")
    assert cells[0].errors == 0 and cells[0].requests == 8


def test_keep_alive_pool_is_sized_to_the_concurrency(double):
    before_conn, before_req = double.connections, double.requests
    cells = run_matrix(double.url, workload(requests_per_cell=40, warmup_requests=2), "ok", progress=False,
                       endpoint="chat")
    assert cells[0].errors == 0 and cells[0].requests == 40
    # 2 warm-ups per connection; no tokenize route, so one-token probes size the prompts -- this
    # server cannot answer them (it always streams), so the first failures stop all probing
    assert 40 + 4 * 2 <= double.requests - before_req <= 40 + 4 * 2 + 4
    # 4 streaming connections (opened and warmed before the window) reused for every request,
    # plus the admin client's (up to 4 probes in parallel, then /flush_cache on one of them)
    assert double.connections - before_conn <= 4 + 4


def test_poisson_latency_counts_from_the_scheduled_arrival(double):
    # 1 connection, 10 requests arriving within ~10 ms, 50 ms each: they queue for the
    # connection, and that wait must show up in their TTFT (no coordinated omission).
    wl = workload(concurrency=(1,), requests_per_cell=10, request_rate=1000.0, warmup_requests=0)
    (cell,) = run_matrix(double.url, wl, "slow_ok", progress=False, endpoint="chat")
    assert cell.errors == 0
    ttfts = sorted(r.ttft_s for r in cell.results)
    assert ttfts[0] >= 0.05 and ttfts[-1] >= 0.05 * 9
    assert ttfts[-1] > 3 * ttfts[0]
