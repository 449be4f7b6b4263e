"""Real trials on llama.cpp: `python -m sweep server=llamacpp ...` as a user runs it.

What is asserted is structure and counters, never speed: tokens come from
``usage`` and equal what llama.cpp itself counted, acceptance counters move
with the draft length, synthetic rates are read back exactly as configured,
and the three places llama.cpp reports acceptance (each request's
``timings``, the /metrics counters over the trial window, the log line per
request) agree with each other.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from .conftest import explain, results

pytestmark = pytest.mark.slow

GRID = ["-m", "spec=llamacpp_draft", "workload.warmup_requests=0"]


def _ok(doc: dict) -> None:
    assert doc["status"] == "ok", doc["failure"]
    assert doc["simulated"] is False
    assert doc["config"]["server"]["name"] == "llamacpp"


def _same_counters(doc: dict) -> None:
    """The request sums, the /metrics window and the log lines tell one story."""
    acc = doc["acceptance"]
    req, met, log = acc["requests"], acc["metrics"], acc["log"]
    cells = doc["cells"]
    n = sum(c["requests"] for c in cells)
    tokens = sum(c["completion_tokens"] for c in cells)
    assert req["tokens"] == tokens  # llama.cpp's predicted_n == usage.completion_tokens, summed
    # warmup 0, coding off: the window holds exactly the measured requests
    assert met["drafted"] == req["drafted"] and met["accepted"] == req["accepted"]
    assert log["samples"] == n
    assert log["drafted"] == req["drafted"] and log["accepted"] == req["accepted"]
    # each request's first token is the prefill's; every verify step yields one of its own
    assert req["verify_steps"] == req["tokens"] - req["requests"] - req["accepted"]
    assert doc["accept_len"]["requests"] == pytest.approx(req["accept_len"], abs=1e-3)
    assert doc["accept_len"]["metrics"] == met["accept_len"]


def test_draft_length_grid_moves_the_counters(sweep_cli, tmp_path: Path):
    """A random draft: drafted tokens per step follow --spec-draft-n-max; usage is exact."""
    proc = sweep_cli(*GRID, "spec.budget=1,4", f"hydra.sweep.dir={tmp_path}/grid")
    assert proc.returncode == 0, explain(proc)
    docs = results(tmp_path / "grid")
    assert [d["config"]["spec"]["budget"] for d in docs] == [1, 4]
    per_step = {}
    for doc in docs:
        _ok(doc)
        assert "--spec-draft-n-max" in doc["argv"] and "--spec-type" in doc["argv"]
        cell = doc["cells"][0]
        wl = doc["config"]["workload"]
        assert cell["errors"] == 0 and cell["requests"] == wl["min_requests"]
        assert cell["completion_tokens"] == cell["requests"] * wl["max_tokens"]  # ignore_eos, from usage
        _same_counters(doc)
        met = doc["acceptance"]["metrics"]
        per_step[doc["config"]["spec"]["budget"]] = met["drafted"] / met["drafts"]
        assert doc["server"]["info"].get("build_info") or doc["server"]["info"].get("model_path")
    assert per_step[1] == pytest.approx(1.0)
    assert 3.0 <= per_step[4] <= 4.0  # n_max per step, fewer only where the answer ends


def test_self_draft_acceptance_grows_with_draft_length(sweep_cli, tmp_path: Path):
    """Drafting with the target itself: nearly every draft token is accepted, so tokens
    per target step grow with the draft length, and the server's log says the same."""
    proc = sweep_cli(*GRID, "spec.budget=1,4", "model.draft_paths.draft=${model.path}",
                     f"hydra.sweep.dir={tmp_path}/self")
    assert proc.returncode == 0, explain(proc)
    docs = results(tmp_path / "self")
    lens = {}
    for doc in docs:
        _ok(doc)
        _same_counters(doc)
        req = doc["acceptance"]["requests"]
        assert req["accept_rate"] > 0.6, req
        lens[doc["config"]["spec"]["budget"]] = doc["accept_len"]["requests"]
    assert lens[1] <= 2.0 and lens[4] > lens[1] + 0.8, lens


def test_synthetic_acceptance_is_read_back_exactly(sweep_cli, tmp_path: Path):
    rates = [0.9, 0.6, 0.3, 0.1]
    proc = sweep_cli("-m", "spec=llamacpp_synth", "spec.synth_len=null", "workload.max_tokens=96",
                     "workload.warmup_requests=0", f"spec.synth_rates=[{','.join(map(str, rates))}]",
                     f"hydra.sweep.dir={tmp_path}/synth")
    assert proc.returncode == 0, explain(proc)
    (doc,) = results(tmp_path / "synth")
    _ok(doc)
    _same_counters(doc)
    assert "--spec-synth-rates" in doc["argv"] and "0.9,0.6,0.3,0.1" in doc["argv"]
    synth = doc["acceptance"]["synthetic"]
    assert synth == {"rates": rates, "mean_len": pytest.approx(1 + sum(rates)), "n_max": 4}
    # Drawn per drafted position: the measured unconditional rates follow the configured ones.
    met = doc["acceptance"]["metrics"]
    per_pos = met["per_position"]
    assert per_pos is not None and len(per_pos) == 4
    tol = 4 * math.sqrt(0.25 / met["drafts"]) + 0.02
    for want, got in zip(rates, per_pos):
        assert abs(got - want) <= tol, (rates, per_pos, tol)
    assert met["accept_len"] == pytest.approx(1 + sum(rates), abs=sum(4 * tol for _ in rates))


def test_synthetic_mean_length_is_read_back(sweep_cli, tmp_path: Path):
    proc = sweep_cli("spec=llamacpp_synth", "spec.synth_len=2.5", "spec.budget=3",
                     f"hydra.run.dir={tmp_path}/len")
    assert proc.returncode == 0, explain(proc)
    (doc,) = results(tmp_path / "len")
    _ok(doc)
    synth = doc["acceptance"]["synthetic"]
    assert synth["n_max"] == 3 and synth["mean_len"] == pytest.approx(2.5, abs=1e-6)
    assert len(synth["rates"]) == 3 and synth["rates"] == sorted(synth["rates"], reverse=True)


def test_ngram_drafting_runs(sweep_cli, tmp_path: Path):
    proc = sweep_cli("spec=llamacpp_ngram", "spec.budget=8", f"hydra.run.dir={tmp_path}/ngram")
    assert proc.returncode == 0, explain(proc)
    (doc,) = results(tmp_path / "ngram")
    _ok(doc)
    assert doc["argv"][doc["argv"].index("--spec-type") + 1] == "ngram-mod"
    assert doc["cells"][0]["errors"] == 0


def test_coding_eval_runs_unchanged(sweep_cli, tmp_path: Path):
    """The five-problem eval against the real model: answers are generated, extracted and
    run in the sandbox; tokens from usage. (A 135M model passes few: not asserted.)"""
    proc = sweep_cli("spec=none", "workload.coding=five", "workload.coding_max_tokens=48",
                     f"hydra.run.dir={tmp_path}/coding")
    assert proc.returncode == 0, explain(proc)
    (doc,) = results(tmp_path / "coding")
    _ok(doc)
    coding = doc["coding"]
    assert coding["total"] == 5 and 0.0 <= coding["pass_rate"] <= 1.0
    for p in coding["problems"]:
        assert 0 < p["completion_tokens"] <= 48, p
        assert p["passed"] or p["error"], p  # a failure says why
    assert doc["acceptance"]["requests"] is None  # spec=none: nothing drafted
    assert doc["accept_len"]["requests"] is None


def test_a_grid_without_a_baseline_runs_one_and_reports_acceptance_and_speedup(sweep_cli, tmp_path: Path):
    """The first hour on llama.cpp: a draft-length grid with no spec=none job runs the baseline
    once (baseline.auto_run=auto), every trial reports a speedup over it and its accept rate,
    and a draft that is never accepted says so in one line."""
    proc = sweep_cli(*GRID, "spec.budget=2,4", f"hydra.sweep.dir={tmp_path}/grid", baseline=True)
    assert proc.returncode == 0, explain(proc)
    docs = results(tmp_path / "grid")
    baselines = [d for d in docs if d["config"]["spec"]["algorithm"] == "none"]
    trials = [d for d in docs if d["config"]["spec"]["algorithm"] != "none"]
    assert len(baselines) == 1 and len(trials) == 2, [d["trial"]["name"] for d in docs]
    _ok(baselines[0])
    assert Path(baselines[0]["trial"]["job_dir"]).name == "baseline"  # run by the first job, once
    assert "spec=none" in baselines[0]["trial"]["overrides"]  # its own overrides: its name, its rerun command
    for doc in trials:
        _ok(doc)
        assert doc["speedup_vs_baseline"] is not None and doc["speedup_vs_baseline"] > 0
        assert Path(doc["baseline"]["result"]).parent.name == "baseline"
        req = doc["acceptance"]["requests"]
        assert req["drafted"] > 0
        assert doc["metrics"]["accept_rate"] == pytest.approx(req["accepted"] / req["drafted"], abs=1e-4)
        verdict = f"draft accepted 0 of {req['drafted']:,} tokens: the draft does not agree with the target"
        assert (verdict in proc.stderr) == (req["accepted"] == 0), proc.stderr[-3000:]
        assert f"accept rate {doc['metrics']['accept_rate']:.2f} ({req['accepted']:,} of " in proc.stderr
    report = (tmp_path / "grid" / "report.html").read_text()
    assert "accept rate" in report and "Accept rate vs budget" in report and "× baseline" in report
    assert "topk None" not in report and "window None" not in report


def test_greedy_identity_gate_passes_ngram_and_refuses_synthetic_acceptance(sweep_cli, tmp_path: Path):
    """Speculation is lossless: n-gram drafting answers the fixed greedy prompts exactly as the
    spec=none baseline did. Synthetic acceptance accepts the drafter's tokens unchecked: its
    answers change, and the gate (objective.constraints.greedy_identical_min) says infeasible."""
    from sweep.record.result import TrialResult
    from sweep.score.objective import constraints, feasible, objective_of

    ident = ["workload.identity.prompts=3", "workload.identity.max_tokens=32", "workload.identity.context=96",
             "objective.constraints.greedy_identical_min=1.0", f"results.search_dirs=[{tmp_path}/base]"]
    proc = sweep_cli("spec=none", *ident, f"hydra.run.dir={tmp_path}/base")
    assert proc.returncode == 0, explain(proc)
    (base,) = results(tmp_path / "base")
    _ok(base)
    assert base["identity"]["greedy_identical"] == 1.0 and base["identity"]["baseline"] == "self"
    assert len(base["identity"]["answers"]) == 3 and all(a["text"] for a in base["identity"]["answers"])
    verdicts = {}
    for name, spec in (("ngram", ["spec=ngram"]),
                       ("synth", ["spec=llamacpp_synth", "spec.budget=4", "spec.synth_len=5"])):
        proc = sweep_cli(*spec, *ident, f"hydra.run.dir={tmp_path}/{name}")
        assert proc.returncode == 0, explain(proc)
        (doc,) = results(tmp_path / name)
        _ok(doc)
        assert doc["identity"]["compared"] == 3 and doc["identity"]["baseline"].startswith(str(tmp_path / "base"))
        result = TrialResult.from_dict(doc)
        values, names = constraints(result.metrics, objective_of(result))
        verdicts[name] = (doc["identity"]["identical"], values[names.index("greedy_identical")], feasible(result))
    assert verdicts["ngram"] == (3, 0.0, True), verdicts
    identical, gap, ok = verdicts["synth"]
    assert identical < 3 and gap > 0 and not ok, verdicts
