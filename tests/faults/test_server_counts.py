"""What servers say is cross-checked against what the client saw (issue 32), over real HTTP.

The rule (sweep/bench/reported.py): a content event carries at least one token, so usage that
counts fewer tokens than the stream had content events is wrong; two usage blocks of one answer
must agree; with running usage the counts never go down and the final count is the last running
count. A request that breaks it fails ``bad_value`` naming ``usage_mismatch`` and both counts --
never an ``ok`` cell whose tok/s came from a count the stream contradicts. Each cell says which
count its figures used (``tokens_source``). An inter-token latency nobody can know (every token in
one event, one token) never meets an ITL limit (sweep/stats/slo.py).

Against ``tests/bench/misbehaving.py`` (raw asyncio HTTP/1.1) for the client and the cell, and
``tests/faults/stand_in.py`` through a whole trial (``python -m sweep``: failed, bench_errors).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from sweep.bench.client import build_payload, make_client, stream_chat
from sweep.bench.matrix import run_matrix
from sweep.compose.config import Workload
from sweep.stats.slo import Slo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.misbehaving import CHUNKS, TOKENS_PER_CHUNK, MisbehavingServer  # noqa: E402


@pytest.fixture(scope="module")
def double():  # type: ignore[no-untyped-def]
    with MisbehavingServer() as srv:
        yield srv


def one(url: str, behaviour: str):  # type: ignore[no-untyped-def]
    async def go():  # type: ignore[no-untyped-def]
        async with make_client(url, concurrency=1, timeout_s=5.0) as client:
            payload = build_payload(behaviour, "hi", max_tokens=16, ignore_eos=True)
            return await stream_chat(client, payload, timeout_s=5.0)
    return asyncio.run(go())


@pytest.mark.parametrize("behaviour, detail", [
    ("usage_fewer", "usage_mismatch: 3 tokens, although 64 events carried text"),
    ("usage_twice", f"usage_mismatch: 2 usage blocks disagree ({CHUNKS * TOKENS_PER_CHUNK} then "
                    f"{CHUNKS * TOKENS_PER_CHUNK - 1} tokens)"),
    ("running_short", f"usage_mismatch: the final count {CHUNKS * TOKENS_PER_CHUNK + 2} is not the last running "
                      f"count {CHUNKS * TOKENS_PER_CHUNK}"),
])
def test_a_count_the_stream_contradicts_fails_the_request_naming_both(double, behaviour: str,  # type: ignore[no-untyped-def]
                                                                       detail: str) -> None:
    rec = one(double.url, behaviour)
    assert not rec.ok and rec.error == "bad_value", (rec.error, rec.detail)
    assert detail in (rec.detail or ""), rec.detail
    assert rec.completion_tokens is None  # nothing of it is counted


@pytest.mark.parametrize("behaviour", ["ok", "running_exact", "one_event"])
def test_counts_that_agree_pass(double, behaviour: str) -> None:  # type: ignore[no-untyped-def]
    rec = one(double.url, behaviour)
    assert rec.ok, (rec.error, rec.detail)
    assert rec.completion_tokens == CHUNKS * TOKENS_PER_CHUNK


def _cell(url: str, model: str, slo: Slo | None = None):  # type: ignore[no-untyped-def]
    wl = Workload(name="t", contexts=(32,), concurrency=(1,), max_tokens=16, requests_per_cell=4, min_requests=2,
                  warmup_requests=0, request_rate=None, temperature=0.0, ignore_eos=True, flush_cache=False,
                  request_timeout_s=5.0, coding="off", coding_max_tokens=64, humaneval_limit=1,
                  sandbox_timeout_s=5.0, sandbox_memory_mb=256)
    cells = run_matrix(url, wl, model, slo=slo, endpoint="chat", progress=False)
    return cells[0]


def test_a_cell_of_contradicted_counts_scores_nothing(double) -> None:  # type: ignore[no-untyped-def]
    cell = _cell(double.url, "usage_fewer")
    assert cell.errors == cell.requests == 4 and cell.error_kinds == {"bad_value": 4}
    assert cell.output_tok_s == 0.0 and cell.completion_tokens == 0 and cell.tokens_source is None
    good = _cell(double.url, "ok")
    assert good.errors == 0 and good.tokens_source == "usage"
    assert good.to_dict()["tokens_source"] == "usage"  # recorded in result.json's cell


def test_an_unknown_inter_token_latency_never_meets_an_itl_limit(double) -> None:  # type: ignore[no-untyped-def]
    itl = _cell(double.url, "one_event", Slo(itl_ms=1e6))  # every token in one event: no gap seen
    assert itl.errors == 0 and all(r[4] is None for r in itl.latencies)
    assert itl.slo_attainment == 0.0 and itl.goodput_tok_s == 0.0
    tpot = _cell(double.url, "one_event", Slo(tpot_ms=1e6))  # a limit on what is known: met
    assert tpot.slo_attainment == 1.0
    assert not Slo(itl_ms=50).meets(10.0, 5.0, 100.0, None)       # unknown ITL: not met
    assert Slo(tpot_ms=50).meets(10.0, None, 100.0, None)          # one token's TPOT: 0 (vLLM's rule)
    assert not Slo(ttft_ms=50).meets(None, 5.0, 100.0, 3.0)        # unknown TTFT: not met


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["usage_fewer", "usage_twice", "running_short"])
def test_a_trial_whose_server_miscounts_fails_naming_the_mismatch(mode: str, tmp_path: Path) -> None:
    from faults.fault_runs import sweep
    from faults.hardening_cases import STAND_IN_USAGE

    run = sweep(tmp_path, "workload.request_timeout_s=5", stand_in=mode)
    try:
        doc = run.results[0] if run.results else {}
        assert run.proc.returncode == 1 and doc.get("status") == "failed", run.output[-2000:]
        assert doc["failure"]["reason"] == "bench_errors" and STAND_IN_USAGE[mode] in doc["failure"]["message"]
        assert all(c["output_tok_s"] == 0 for c in doc["cells"]), doc["cells"]
    finally:
        run.cleanup()
