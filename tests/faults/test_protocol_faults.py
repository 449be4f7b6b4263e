"""A benchmark whose requests failed is a failed trial (issue 11, section 4).

Real ``python -m sweep`` runs (``fault_runs.sweep``): the protocol faults come
from ``stand_in.py`` started through the normal launcher in place of SGLang
(500s, broken SSE, a connection cut mid-stream, a stall past the request
timeout, a partial failure rate); the frozen server is the real simulator
stopped with SIGSTOP once it is ready; the 30,000 in-flight requests run
against the real simulator from a controller whose file limit is 1024 (set
with setrlimit before exec, so the cap bites on any box). Each run is also
checked for what every fault must not cost: a traceback, a lost result
file, a process of its server left behind, a secret in a file or the output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from faults.fault_runs import Run, file_limit_1024, freeze_when_ready, sweep

pytestmark = pytest.mark.slow

NO_ANSWER = "no request succeeded (9 of 9 failed)"  # workload=smoke: 5 coding + 4 matrix requests


def _clean(run: Run) -> None:
    """What no fault may cost."""
    try:
        assert "Traceback" not in run.output, run.output[-3000:]
        assert run.lost == [], run.lost
        assert run.orphans() == {}
        assert run.secrets_found() == []
    finally:
        run.cleanup()


def test_each_protocol_fault_fails_its_trial_and_a_multirun_of_only_failures_exits_1(tmp_path: Path) -> None:
    run = sweep(tmp_path, "workload.request_timeout_s=1", multirun=True,
                stand_in="http_500,broken_sse,disconnect,stall")
    _clean(run)
    assert run.proc.returncode == 1, run.proc.stderr[-3000:]
    assert [(d["status"], d["failure"]["reason"]) for d in run.results] == [("failed", "bench_errors")] * 4
    messages = [d["failure"]["message"] for d in run.results]
    for message, first_error in zip(messages, ("http_500: stand-in: internal error on request 1",
                                               "bad_sse: ", "disconnect: stream ended after 2 chunks",
                                               "timeout: no complete answer within 1 s")):
        assert message.startswith(f"{NO_ANSWER}: {first_error}"), message
    assert all(d["metrics"]["tok_s_c1"] in (0, 0.0, None) for d in run.results)


def test_a_failed_single_run_exits_1_and_wrong_answers_are_not_bench_errors(tmp_path: Path) -> None:
    failed = sweep(tmp_path / "500", stand_in="http_500")
    _clean(failed)
    assert failed.proc.returncode == 1
    [doc] = failed.results
    assert doc["status"] == "failed" and doc["failure"]["reason"] == "bench_errors"
    assert doc["cells"][0]["error_kinds"] == {"http_500": 4}
    assert "(x9)" in doc["failure"]["message"]  # one message per distinct error, counted

    # every request answered, every coding answer wrong: ok (the correctness gate judges it, not this)
    answered = sweep(tmp_path / "ok", stand_in="ok")
    _clean(answered)
    assert answered.proc.returncode == 0, answered.proc.stderr[-3000:]
    [doc] = answered.results
    assert doc["status"] == "ok" and doc["coding"]["passed"] == 0 and doc["cells"][0]["errors"] == 0


def test_max_error_rate_and_a_partly_failed_multirun_exits_0(tmp_path: Path) -> None:
    run = sweep(tmp_path, "workload.coding=off", "workload.min_requests=8", "workload.max_error_rate=0,0.5",
                multirun=True, stand_in="fail_every_4")
    _clean(run)
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]  # not every trial failed
    strict, lenient = run.results
    assert strict["status"] == "failed" and strict["failure"]["reason"] == "bench_errors"
    assert strict["failure"]["message"].startswith(
        "2 of 8 requests failed (25.0% > workload.max_error_rate 0): http_500: stand-in: internal error")
    assert lenient["status"] == "ok" and lenient["cells"][0]["errors"] == 2
    assert lenient["server"]["reused"] is True


def test_a_frozen_server_fails_the_trial_and_is_still_stopped(tmp_path: Path) -> None:
    frozen: list[int] = []

    def freeze(out_dir: Path) -> None:
        if (pid := freeze_when_ready(out_dir)) is not None:  # the whole server, as a hung box would be
            frozen.append(pid)

    run = sweep(tmp_path, "workload.request_timeout_s=1", during=freeze)
    _clean(run)  # SIGSTOPped or not, nothing of it outlives the run
    assert frozen, run.proc.stderr[-3000:]
    assert run.proc.returncode == 1
    [doc] = run.results
    assert doc["status"] == "failed" and doc["failure"]["reason"] == "bench_errors", doc["failure"]
    assert "timeout: no complete answer within 1 s" in doc["failure"]["message"]


def test_thirty_thousand_in_flight_requests_are_capped_at_the_file_limit(tmp_path: Path) -> None:
    run = sweep(tmp_path, "workload.coding=off", "workload.concurrency=[30000]", "workload.requests_per_cell=1000",
                "workload.max_tokens=16", "server.sim.time_scale=0", preexec_fn=file_limit_1024)
    _clean(run)
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    [doc] = run.results
    [cell] = doc["cells"]
    assert doc["status"] == "ok" and cell["errors"] == 0 and cell["requests"] == 1000
    assert cell["concurrency"] == 30000 and 100 < cell["concurrency_capped"] < 1024 - 64
    said = [line for line in run.output.splitlines() if "concurrency 30000 capped at" in line]
    assert len(said) == 1 and f"capped at {cell['concurrency_capped']} in-flight connections" in said[0]
    assert "RLIMIT_NOFILE soft 1024, hard 1024" in said[0]
