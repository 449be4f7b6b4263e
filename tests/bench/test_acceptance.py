"""Acceptance read the way each server group declares it (server.acceptance in YAML).

The llama.cpp texts below copy the formats of llama.cpp's own sources
(tools/server: server_slot_stats::to_json, print_timings, to_metrics); the
real engine is exercised in tests/engines. The SGLang declaration is checked
against the running simulator: reading the raw stream fields with it gives
exactly what the client's meta_info path gives.
"""

from __future__ import annotations

import json

import pytest

from sweep.bench.acceptance import LogReader, MetricsReader, Readers, RequestReader, apply, declared
from sweep.bench.request import RequestResult
from sweep.bench.matrix import aggregate, run_matrix, server_options
from sweep.bench.serverstats import metrics_delta, parse_prometheus
from sweep.bench.sse import Stream
from sweep.compose.config import from_omegaconf
from sweep.errors import ConfigError
from sweep.compose.cmdline import compose

LLAMA = declared("llamacpp")

# The last three events of a llama.cpp chat stream with include_usage (to_json_oaicompat_chat_stream).
LLAMA_TAIL = [
    {"choices": [{"finish_reason": None, "index": 0, "delta": {"content": " world"}}],
     "created": 1, "id": "c", "model": "m", "system_fingerprint": "b1", "object": "chat.completion.chunk"},
    {"choices": [{"finish_reason": "length", "index": 0, "delta": {}}],
     "created": 1, "id": "c", "model": "m", "system_fingerprint": "b1", "object": "chat.completion.chunk"},
    {"choices": [], "created": 1, "id": "c", "model": "m", "system_fingerprint": "b1",
     "object": "chat.completion.chunk",
     "usage": {"completion_tokens": 32, "prompt_tokens": 70, "total_tokens": 102},
     "timings": {"cache_n": 0, "prompt_n": 70, "prompt_ms": 80.1, "prompt_per_token_ms": 1.1,
                 "prompt_per_second": 873.9, "predicted_n": 32, "predicted_ms": 640.0,
                 "predicted_per_token_ms": 20.0, "predicted_per_second": 50.0,
                 "draft_n": 36, "draft_n_accepted": 20}},
]


def _streamed(events: list[dict]) -> RequestResult:
    rec = RequestResult(started=0.0)
    st = Stream(rec)
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    rest, err = st.feed(body, 1.0)
    assert err is None and st.done and rest == b""
    rec.ok, rec.completion_tokens, rec.extras = True, st.usage["completion_tokens"], st.extras
    return rec


def test_llama_cpp_timings_on_the_last_chunk():
    rec = _streamed(LLAMA_TAIL)
    got = RequestReader(LLAMA["request"]).read(rec.extras, rec.completion_tokens)
    # 32 tokens, 20 of them accepted draft tokens: the prefill's first token, then 11 verify steps
    # that each yield one token of their own (the bonus) besides what they accepted
    assert (got.tokens, got.steps, got.drafted, got.accepted) == (32, 11, 36, 20)
    assert got.accept_len == pytest.approx(1 + 20 / 11, abs=1e-4) == pytest.approx(31 / 11, abs=1e-4)
    assert got.accept_rate == pytest.approx(20 / 36, abs=1e-4)
    # without speculation llama.cpp omits draft_n: no acceptance, not a 1.0
    plain = [dict(e) for e in LLAMA_TAIL]
    plain[-1] = {**plain[-1], "timings": {k: v for k, v in plain[-1]["timings"].items() if not k.startswith("draft")}}
    rec = _streamed(plain)
    assert RequestReader(LLAMA["request"]).read(rec.extras, rec.completion_tokens) is None


def test_apply_refreshes_cell_accept_len():
    recs = [_streamed(LLAMA_TAIL), _streamed(LLAMA_TAIL)]
    cell = aggregate(64, 1, recs, 2.0)
    assert cell.accept_len is None  # the client alone knows nothing of timings
    total = apply([cell], RequestReader(LLAMA["request"]))
    assert total.tokens == 64 and total.steps == 22 and total.drafted == 72 and total.accepted == 40
    assert total.requests == 2 and total.accept_len == pytest.approx(62 / 22, abs=1e-4)
    assert cell.accept_len == pytest.approx(62 / 22, abs=1e-4)
    assert (cell.spec_tokens, cell.spec_verify_ct) == (62, 22)


LLAMA_LOG = """\
slot print_timing: id  0 | task 3 | prompt eval time =      80.10 ms /    70 tokens
slot print_timing: id  0 | task 3 |        eval time =     640.00 ms /    32 tokens
slot print_timing: id  0 | task 3 | draft acceptance = 0.55556 (   20 accepted /    36 generated), mean len =  2.67
srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200
slot print_timing: id  1 | task 5 | draft acceptance = 0.25000 (    4 accepted /    16 generated), mean len =  1.33
"""


def test_llama_cpp_log_lines():
    got = LogReader(LLAMA["log"]).read(LLAMA_LOG)
    assert got == {"accept_rate": pytest.approx((0.55556 + 0.25) / 2, abs=1e-4), "accepted": 24,
                   "drafted": 52, "accept_len": pytest.approx(2.0, abs=1e-4), "samples": 2}
    assert LogReader(LLAMA["log"]).read("no such lines\n") is None
    synth = LogReader(LLAMA["log"]).synthetic_rates(
        "spec: synthetic acceptance: n_max = 3, mean length = 2.500000, rates = [0.8, 0.5, 0.2]\n")
    assert synth == {"rates": [0.8, 0.5, 0.2], "mean_len": 2.5, "n_max": 3}


LLAMA_METRICS = """\
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total {tokens}
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total {drafted}
llamacpp:spec_decode_num_accepted_tokens_total {accepted}
llamacpp:spec_decode_num_drafts_total {drafts}
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 0
# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="0"}} {p0}
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="1"}} {p1}
"""


def test_llama_cpp_counters_over_a_window():
    reader = MetricsReader(LLAMA["metrics"])
    assert reader.prefixes == ("llamacpp:",)
    before = parse_prometheus(LLAMA_METRICS.format(tokens=10, drafted=8, accepted=2, drafts=4, p0=2, p1=0),
                              reader.prefixes, reader.split)
    after = parse_prometheus(LLAMA_METRICS.format(tokens=74, drafted=48, accepted=22, drafts=24, p0=16, p1=8),
                             reader.prefixes, reader.split)
    got = reader.read(metrics_delta(before, after))
    assert (got["drafted"], got["accepted"], got["drafts"], got["tokens"]) == (40, 20, 20, 64)
    assert got["accept_len"] == 2.0 and got["accept_rate"] == 0.5  # 1 + accepted / drafts
    assert reader.positions(before, after, got["drafts"]) == [0.7, 0.4]


def test_declarations_are_checked_at_compose_time():
    cfg = from_omegaconf(compose(["server=llamacpp"]))
    assert cfg.server.acceptance["request"]["paths"] == ["timings"]
    assert Readers.of(cfg.server.acceptance).log.synthetic is not None
    field = "server.acceptance.log.fields.accept_len"
    for override, key in ((f"{field}='mean len = ('", field), (f"{field}='mean len'", field),
                          ("+server.acceptance.request.steps=x", "server.acceptance.request.steps")):
        with pytest.raises(ConfigError) as info:
            from_omegaconf(compose(["server=llamacpp", override]))
        assert info.value.key == key


FAST = "server.sim.time_scale=0.05"


def test_sglang_declaration_reads_the_simulator_like_the_client(sim_server):
    """The raw stream fields read with SGLang's YAML declaration == the client's meta_info path."""
    tc = from_omegaconf(compose(["workload=smoke"]))
    sim = sim_server("workload=smoke", FAST)
    cells = run_matrix(sim.base_url, tc.workload, tc.model.served_name, progress=False, **server_options(tc))
    cell = cells[0]
    before = [(r.spec_verify_ct, r.meta_completion_tokens or r.completion_tokens) for r in cell.results]
    accept = cell.accept_len
    assert accept is not None and all(v for v, _ in before)
    total = apply(cells, RequestReader(tc.server.acceptance["request"]))
    assert [(r.spec_verify_ct, r.meta_completion_tokens) for r in cell.results] == before
    assert cell.accept_len == accept and total.accept_len == pytest.approx(accept, abs=1e-3)
