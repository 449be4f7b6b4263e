"""The bench_errors rule on request records (sweep/trial/bench_errors.py)."""

from __future__ import annotations

from sweep import secrets
from sweep.bench.request import RequestResult
from sweep.bench.coding import CodingResult, ProblemResult
from sweep.bench.matrix import aggregate
from sweep.trial.bench_errors import tally, verdict


def ok() -> RequestResult:
    return RequestResult(ok=True, completion_tokens=8, e2e_s=0.1, ttft_s=0.01)


def failed(kind: str, detail: str) -> RequestResult:
    return RequestResult().fail(kind, detail)


def test_every_failed_request_fails_the_trial_by_default() -> None:
    cell = aggregate(60, 2, [ok(), ok(), ok(), failed("http_500", "boom on request 4")], 1.0)
    assert verdict(tally([cell]), 0.0) == ("1 of 4 requests failed (25.0% > workload.max_error_rate 0): "
                                           "http_500: boom on request 4")
    assert verdict(tally([cell]), 0.25) is None  # at the limit: ok
    assert verdict(tally([aggregate(60, 1, [ok()], 1.0)]), 0.0) is None


def test_no_answer_at_all_fails_whatever_the_limit_and_errors_are_grouped() -> None:
    recs = [failed("http_500", f"internal error on request {i}") for i in range(5)] + [failed("timeout", "no answer")]
    message = verdict(tally([aggregate(60, 2, recs, 1.0)]), 1.0)
    assert message == ("no request succeeded (6 of 6 failed): http_500: internal error on request 0 (x5); "
                       "timeout: no answer")


def test_wrong_coding_answers_are_not_errors_but_failed_coding_requests_are() -> None:
    wrong = ProblemResult("gcd", False, 10.0, 50, "AssertionError")
    lost = ProblemResult("fib", False, None, None, "request failed: disconnect: cut", request_error="disconnect: cut")
    cells = [aggregate(60, 1, [ok()], 1.0)]
    assert verdict(tally(cells, CodingResult("five", [wrong])), 0.0) is None
    assert verdict(tally(cells, CodingResult("five", [wrong, lost])), 0.0) == (
        "1 of 3 requests failed (33.3% > workload.max_error_rate 0): disconnect: cut")


def test_messages_are_masked() -> None:
    secrets.remember({"sk-bench-errors-secret-123"})
    cell = aggregate(60, 1, [failed("http_401", "bad key sk-bench-errors-secret-123")], 1.0)
    message = verdict(tally([cell]), 0.0)
    assert message is not None and "sk-bench-errors-secret-123" not in message and "***" in message
