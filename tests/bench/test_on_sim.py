"""The harness against the real simulator process over real HTTP."""

from __future__ import annotations

import dataclasses

import httpx
import pytest

from sweep.bench.coding import run_coding_eval
from sweep.bench.matrix import run_matrix, server_options, trial_accept_len
from sweep.bench.serverstats import accept_from_log, fetch_metrics, metrics_accept
from sweep.compose.config import from_omegaconf
from sweep.compose.cmdline import compose

FAST = "server.sim.time_scale=0.05"


def trial(*overrides: str):
    return from_omegaconf(compose(["workload=smoke", *overrides]))


def test_smoke_matrix_tokens_from_usage_accept_from_meta_info(sim_server):
    tc = trial()
    sim = sim_server("workload=smoke", FAST)
    before = fetch_metrics(sim.base_url)
    cells = run_matrix(sim.base_url, tc.workload, tc.model.served_name, progress=False, **server_options(tc))
    after = fetch_metrics(sim.base_url)
    assert len(cells) == len(tc.workload.contexts) * len(tc.workload.concurrency)
    cell = cells[0]
    d = cell.to_dict()
    assert d["errors"] == 0 and d["error_kinds"] == {}
    n = tc.workload.requests_for(tc.workload.concurrency[0])
    assert d["requests"] == n
    # ignore_eos: every request yields exactly max_tokens, counted from usage ...
    assert d["completion_tokens"] == n * tc.workload.max_tokens
    # ... which is what the server itself counted, while the chunks were fewer.
    gen = after["sglang:generation_tokens_total"] - before.get("sglang:generation_tokens_total", 0)
    assert d["completion_tokens"] == gen
    assert sum(r.chunks for r in cell.results) < d["completion_tokens"]
    assert d["accept_len"] is not None and 2.0 < d["accept_len"] < 9.0
    assert d["accept_len"] == pytest.approx(  # per verify step: each request's first token is the prefill's
        sum((r.meta_completion_tokens or r.completion_tokens) - 1 for r in cell.results)
        / sum(r.spec_verify_ct for r in cell.results), abs=1e-3)
    assert trial_accept_len(cells) == d["accept_len"]
    assert d["prompt_tokens_mean"] == d["context"] and d["prompt_sizing"] == "tokenize"
    for key in ("ttft_ms_p50", "ttft_ms_mean", "itl_ms_p50", "step_ms_p50", "tpot_ms_p50", "e2e_ms_p50"):
        assert d[key] is not None and d[key] >= 0
    # per token vs per verify step: the step carries ~accept_len tokens, counted from running usage
    assert d["itl_tokens"] == "counted"
    assert sum(len(r.itl_s()) for r in cell.results) == sum(r.completion_tokens - 1 for r in cell.results)
    assert sum(len(r.step_s) for r in cell.results) == sum(r.chunks - 1 for r in cell.results)
    assert d["output_tok_s"] > 0 and d["per_stream_tok_s"] > 0
    assert cell.cache == "flushed" and d["cache"] == "flushed"  # the sim's /flush_cache answered
    assert d["load_avg"] is not None and d["load_avg"] >= 0


def test_log_and_metrics_of_the_real_sim(sim_server):
    tc = trial()
    sim = sim_server("workload=smoke", FAST, "server.decode_log_interval=5")
    wl = dataclasses.replace(tc.workload, max_tokens=256)
    cells = run_matrix(sim.base_url, wl, tc.model.served_name, progress=False, **server_options(tc))
    from_log = accept_from_log(sim.log_text())
    assert from_log is not None and from_log["samples"] >= 2
    assert from_log["accept_rate"] is not None and from_log["gen_throughput"] > 0
    assert from_log["accept_len"] == pytest.approx(cells[0].accept_len, rel=0.35)
    acc = metrics_accept(fetch_metrics(sim.base_url))
    assert acc["accept_len"] is not None and acc["accept_len"] > 1.0


def test_autoregressive_server_has_no_accept_len(sim_server):
    tc = trial("spec=none")
    sim = sim_server("workload=smoke", "spec=none", FAST)
    cells = run_matrix(sim.base_url, tc.workload, tc.model.served_name, progress=False, **server_options(tc))
    assert cells[0].errors == 0 and cells[0].accept_len is None
    assert cells[0].completion_tokens == cells[0].requests * tc.workload.max_tokens


def test_coding_eval_passes_five_of_five(sim_server):
    tc = trial()
    sim = sim_server("workload=smoke", "server.sim.time_scale=0.2")
    res = run_coding_eval(sim.base_url, tc.workload, tc.model.served_name, request_extras=tc.server.request_extras, progress=False)
    d = res.to_dict()
    assert (d["passed"], d["total"], d["pass_rate"]) == (5, 5, 1.0), d
    assert {p["name"] for p in d["problems"]} == {"palindrome", "fibonacci", "merge_sorted", "word_count", "gcd"}
    for p in d["problems"]:
        assert p["error"] is None and p["completion_tokens"] > 0 and p["tok_s"] > 0
    assert d["mean_tok_s"] > 0
    from sweep.bench.sandbox import enforced

    # recorded as the probe verified it, for the workload's own limits
    assert d["sandbox"] == enforced(tc.workload.sandbox_memory_mb, tc.workload.sandbox_timeout_s, "auto")
    assert d["sandbox"]["verified"] and d["sandbox"]["memory_limit"]["mb"] == tc.workload.sandbox_memory_mb


def test_wrong_answers_fail_the_eval(sim_server):
    tc = trial()
    sim = sim_server("workload=smoke", FAST, "server.sim.faults.wrong_answer_rate=1.0")
    res = run_coding_eval(sim.base_url, tc.workload, tc.model.served_name, request_extras=tc.server.request_extras, progress=False)
    assert res.total == 5 and res.passed == 0
    assert all(p.error for p in res.problems)


def test_humaneval_subset_on_the_sim(sim_server):
    # smoke's coding_max_tokens fits the five's code blocks, not HumanEval/1's (~350 tokens)
    tc = trial("workload.coding=humaneval", "workload.humaneval_limit=3", "workload.coding_max_tokens=512")
    sim = sim_server("workload=smoke", FAST)
    res = run_coding_eval(sim.base_url, tc.workload, tc.model.served_name, request_extras=tc.server.request_extras, progress=False)
    assert res.total == 8
    assert [p.name for p in res.problems[5:]] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert all(p.completion_tokens for p in res.problems)
    assert res.passed >= 5  # the five; HumanEval answers depend on what the sim knows


def test_api_key_is_used(sim_server):
    tc = trial()
    sim = sim_server("workload=smoke", FAST, "server.api_key=sk-test-key")
    assert httpx.post(sim.base_url + "/v1/chat/completions", json={}).status_code == 401
    ok = run_matrix(sim.base_url, tc.workload, tc.model.served_name, request_extras=tc.server.request_extras, api_key="sk-test-key", progress=False)
    assert ok[0].errors == 0
    bad = run_matrix(sim.base_url, tc.workload, tc.model.served_name, request_extras=tc.server.request_extras, api_key="wrong", progress=False)
    assert bad[0].errors == bad[0].requests and set(bad[0].error_kinds) == {"http_401"}
    assert "sk-test-key" not in sim.log_text()
