"""Real trials on vLLM (CPU): `python -m sweep server=vllm ...` as a user runs it.

What is asserted is structure, counters and answers, never speed: tokens come
from ``usage``; acceptance is vLLM's own /metrics counters as a difference over
the trial window, and they must add up (accepted = the sum over draft
positions, accept length = 1 + accepted / drafts, no more drafted per step than
the budget, acceptance non-increasing with the position); the greedy answers of
a lossless n-gram trial are compared with the autoregressive baseline's. (The
gate's negative control -- synthetic acceptance, which vLLM's CPU sampler lacks --
runs on llama.cpp: tests/engines/test_llamacpp_trials.py.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from _support import docs_commands

from .conftest import explain, results

pytestmark = pytest.mark.slow


def _ok(doc: dict) -> None:
    assert doc["status"] == "ok", doc["failure"]
    assert doc["simulated"] is False
    assert doc["config"]["server"]["name"] == "vllm"
    assert doc["argv"][0].endswith("/venv/bin/python") and "vllm.entrypoints.openai.api_server" in doc["argv"]


def _usage_exact(doc: dict) -> None:
    wl = doc["config"]["workload"]
    for cell in doc["cells"]:
        assert cell["errors"] == 0 and cell["requests"] == wl["min_requests"]
        assert cell["completion_tokens"] == cell["requests"] * wl["max_tokens"]  # ignore_eos, from usage
        assert cell["prompt_sizing"] == "tokenize" and cell["prompt_tokens_mean"] == wl["contexts"][0]


@pytest.mark.timeout(1800)
def test_the_docs_ngram_grid_beside_its_baseline(vllm_engine, tmp_path: Path, request: pytest.FixtureRequest):
    """docs/vllm.md's grid, run as printed: a spec.budget grid with n-gram drafting and the
    spec=none baseline it is compared with (run first: baseline.auto_run is auto, on for real engines)."""
    proc = docs_commands.run("docs/vllm.md", "python -m sweep -m server=vllm spec=ngram", tmp_path, request)
    assert proc.returncode == 0, explain(proc)
    docs = results(tmp_path / "multirun")  # (./mlruns holds copies: MLflow's artifacts)
    base = [d for d in docs if d["config"]["spec"]["algorithm"] == "none"]
    grid = sorted((d for d in docs if d["config"]["spec"]["algorithm"] == "ngram"),
                  key=lambda d: d["config"]["spec"]["budget"])
    assert len(base) == 1 and [d["config"]["spec"]["budget"] for d in grid] == [2, 4]
    (baseline,) = base
    _ok(baseline)
    _usage_exact(baseline)
    assert "--speculative-config" not in baseline["argv"]
    assert not (baseline["acceptance"]["metrics"] or {}).get("drafts")  # nothing drafted without spec
    assert baseline["identity"]["greedy_identical"] == 1.0 and baseline["identity"]["baseline"] == "self"
    answers = {a["prompt_sha"]: a["text"] for a in baseline["identity"]["answers"]}
    assert len(answers) == 3 and all(answers.values())
    for doc in grid:
        _ok(doc)
        _usage_exact(doc)
        budget = doc["config"]["spec"]["budget"]
        win = doc["acceptance"]["metrics"]
        assert win["drafts"] > 0 and 0 < win["drafted"] <= budget * win["drafts"]
        assert 0 <= win["accepted"] <= win["drafted"]
        assert win["accept_len"] == pytest.approx(1 + win["accepted"] / win["drafts"], abs=1e-3)
        assert win["accept_rate"] == pytest.approx(win["accepted"] / win["drafted"], abs=1e-3)
        pos = win["per_position"]
        assert len(pos) == budget and all(a >= b for a, b in zip(pos, pos[1:])), pos  # by definition
        assert sum(pos) == pytest.approx(win["accepted"] / win["drafts"], abs=1e-3)
        assert win["accept_len"] > 1.2  # answers that rewrite their prompt: n-grams are found and accepted
        cell = doc["cells"][0]
        assert cell["accept_len"] is not None and cell["accept_rate"] is not None  # per cell, its own window
        assert doc["metrics"]["accept_len"] == pytest.approx(cell["accept_len"])
        # the baseline both the speedup and the greedy answers were compared with
        assert doc["baseline"]["result"] == doc["identity"]["baseline"]
        assert doc["baseline"]["result"].endswith("result.json") and doc["speedup_vs_baseline"] > 0
        # lossless: in float32 (hardware.cpu.dtype) every greedy answer equals the baseline's
        ident = doc["identity"]
        assert ident["compared"] == 3 and {a["prompt_sha"] for a in ident["answers"]} == set(answers)
        assert [a["text"] for a in ident["answers"]] == [answers[a["prompt_sha"]] for a in ident["answers"]]
        assert ident["greedy_identical"] == doc["metrics"]["greedy_identical"] == 1.0
    # ... so the gate passes (objective.constraints.greedy_identical_min=1.0): every trial is feasible
    from sweep.record.result import TrialResult
    from sweep.score.objective import Objective, feasible

    for d in docs:
        result = TrialResult.from_dict(d)
        asked = dict(result.config_section("objective"))
        gated = Objective.from_mapping({**asked, "constraints": {**(asked.get("constraints") or {}),
                                                                 "greedy_identical_min": 1.0}})
        assert feasible(result, gated), d["trial"]
