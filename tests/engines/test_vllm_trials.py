"""Real trials on vLLM (CPU): `python -m sweep server=vllm ...` as a user runs it.

What is asserted is structure, counters and answers, never speed: tokens come
from ``usage``; acceptance is vLLM's own /metrics counters as a difference over
the trial window, and they must add up (accepted = the sum over draft
positions, accept length = 1 + accepted / drafts, no more drafted per step than
the budget, acceptance non-increasing with the position); the greedy answers of
a lossless n-gram trial equal the autoregressive baseline's, and synthetic
acceptance -- which accepts the drafter's tokens unchecked -- is caught by the
same gate.
"""

from __future__ import annotations

from pathlib import Path

import pytest

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


def test_ngram_budget_grid_beside_its_baseline_on_the_edit_workload(vllm_cli, tmp_path: Path):
    """The issue's own commands, shrunk: a spec.budget grid with n-gram drafting and the
    spec=none baseline it is compared with (run first by baseline.auto_run)."""
    proc = vllm_cli("-m", "spec=ngram", "spec.budget=2,4", "baseline.auto_run=true",
                    "objective.constraints.greedy_identical_min=0.6", f"hydra.sweep.dir={tmp_path}/grid",
                    timeout=1200)
    assert proc.returncode == 0, explain(proc)
    docs = results(tmp_path)
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
        ident = doc["identity"]
        assert ident["compared"] == 3 and {a["prompt_sha"] for a in ident["answers"]} == set(answers)
        assert ident["greedy_identical"] == ident["identical"] / 3 >= 0.6, ident
        assert doc["metrics"]["greedy_identical"] == ident["greedy_identical"]


def test_greedy_identity_gate_refuses_synthetic_acceptance(vllm_cli, tmp_path: Path):
    """vLLM's synthetic rejection sampling accepts drafted tokens without checking them:
    fast and wrong. The greedy answers change, and the gate says infeasible."""
    proc = vllm_cli("spec=none", f"hydra.run.dir={tmp_path}/base", timeout=900)
    assert proc.returncode == 0, explain(proc)
    proc = vllm_cli("spec=synth", "spec.budget=4", "spec.synth_len=5", f"hydra.run.dir={tmp_path}/synth",
                    f"results.search_dirs=[{tmp_path}/base]", "objective.constraints.greedy_identical_min=1.0",
                    timeout=900)
    assert proc.returncode == 0, explain(proc)
    (doc,) = results(tmp_path / "synth")
    _ok(doc)
    win = doc["acceptance"]["metrics"]
    assert win["accept_rate"] == pytest.approx(1.0)  # every drafted token accepted, as configured
    ident = doc["identity"]
    assert ident["compared"] == 3 and ident["identical"] < 3 and ident["prefix_match"] < 1.0, ident
    from sweep.record.result import TrialResult
    from sweep.score.objective import constraints, feasible, objective_of

    result = TrialResult.from_dict(doc)
    values, names = constraints(result.metrics, objective_of(result))
    assert values[names.index("greedy_identical")] > 0 and not feasible(result)
