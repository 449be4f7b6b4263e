"""What a first-time reader needs from a result: what speculation did, readable charts, the way back.

Result documents here are written the way the trial writes them
(``tests/report/report_docs.py``) and, for llama.cpp, with the acceptance
block the trial records from llama-server's counters; what is checked is what
the summary, the HTML report and the exports say about them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sweep.record.result import Acceptance, TrialResult
from sweep.report import html
from sweep.report.compare import build_groups
from sweep.report.records import rerun_command
from sweep.report.svg import nice_ticks, tick_labels
from sweep.report.trial_summary import speculation_lines
from sweep.score import metrics as score
from sweep.score.acceptance import speculation

from report_docs import mixed_sweep, trial


def _llamacpp(tmp_path: Path, budget: int | None, drafted: int, accepted: int, job: int) -> TrialResult:
    """A llama.cpp draft trial as recorded: spec knobs without topk/window, request counters."""
    path = trial(tmp_path / "grid", job, "b300", budget if budget is not None else None)
    doc = TrialResult.load(path)
    spec = {"algorithm": "none"} if budget is None else {
        "algorithm": "llamacpp_draft", "budget": budget, "topk": None, "window": None}
    doc.config["spec"] = {**doc.config["spec"], **spec}
    doc.trial.name = f"cpu-{'none' if budget is None else f'draft-b{budget}'}"
    doc.trial.overrides = ["server=llamacpp", f"spec.budget={budget}", "hydra.sweep.dir=/tmp/x", "++optuna.trial=3"]
    if budget is not None:
        tokens = 96
        doc.acceptance = Acceptance(requests={"tokens": tokens, "verify_steps": tokens - accepted,
                                              "drafted": drafted, "accepted": accepted,
                                              "accept_len": round(tokens / (tokens - accepted), 4),
                                              "accept_rate": round(accepted / drafted, 4)},
                                    metrics={"drafted": drafted, "accepted": accepted,
                                             "per_position": [0.0, 0.0] if accepted == 0 else [0.9, 0.7]})
        for c in doc.cells:
            c.accept_len = round(tokens / (tokens - accepted), 4)
    doc.metrics = score.metrics(doc)
    doc.write(path)
    return doc


def test_a_draft_never_accepted_says_so_in_one_line(tmp_path: Path) -> None:
    doc = _llamacpp(tmp_path, 4, 23520, 0, 1)
    spec = speculation(doc)
    assert (spec.rate, spec.accepted, spec.drafted, spec.source) == (0.0, 0, 23520, "requests")
    assert spec.verdict() is not None and spec.verdict().startswith(
        "draft accepted 0 of 23,520 tokens: the draft does not agree with the target")
    assert doc.metrics.accept_rate == 0.0
    lines = speculation_lines(doc)
    assert "accept rate 0.00 (0 of 23,520 drafted)" in lines[0]
    assert lines[1].strip() == "accepted per draft position (share of drafting steps): 0.00 0.00"
    assert lines[2] == spec.verdict()
    # a draft that is accepted: its rate, no verdict
    good = _llamacpp(tmp_path, 2, 4000, 3000, 2)
    assert speculation(good).verdict() is None and good.metrics.accept_rate == 0.75
    assert not any(line.startswith("draft accepted 0") for line in speculation_lines(good))


def test_sglang_reports_its_own_rate_without_counts(tmp_path: Path) -> None:
    doc = TrialResult.load(trial(tmp_path / "s", 0, "b300", 8))
    doc.acceptance = Acceptance(requests={"tokens": 1024, "verify_steps": 228, "drafted": None, "accepted": None},
                                log={"accept_len": 4.47, "accept_rate": 0.4337, "samples": 12})
    spec = speculation(doc)
    assert (spec.rate, spec.source, spec.verdict()) == (0.4337, "server log", None)
    assert spec.rate_text() == "0.43 (server log)"
    baseline = TrialResult.load(trial(tmp_path / "s", 1, "b300", None))
    assert speculation(baseline).rate is None and speculation_lines(baseline) == []


def test_tick_labels_are_distinct_and_the_frame_covers_every_point() -> None:
    assert tick_labels(nice_ticks(0.92, 1.08)) == ["0.90", "0.95", "1.00", "1.05", "1.10"]
    assert tick_labels([0, 250, 500, 750, 1000]) == ["0", "250", "500", "750", "1,000"]
    for lo, hi in ((0.0, 0.68), (0.0, 1102.5), (3.0, 3.0), (0.92, 1.08)):
        ticks = nice_ticks(lo, hi)
        assert ticks[0] <= lo and ticks[-1] >= hi, (lo, hi, ticks)


def test_the_llamacpp_report_shows_rate_distinct_ticks_and_legends_without_none(tmp_path: Path) -> None:
    docs = [_llamacpp(tmp_path, None, 0, 0, 0)] + [_llamacpp(tmp_path, b, 8 * b * 10, 0, i)
                                                   for i, b in enumerate((2, 4, 8), 1)]
    page = html.render(docs, title="llama.cpp grid")
    assert "topk None" not in page and "window None" not in page
    assert "<th class=\"n\">accept rate</th>" in page and "Accept rate vs budget" in page
    assert page.count("draft accepted 0 of") == 3  # one line per trial that accepted nothing
    # every chart's axis labels are distinct (accept length 1.00 everywhere used to read 1.0, 1.0, 1.1)
    for svg in re.findall(r"<svg .*?</svg>", page):
        ticks = re.findall(r'<text class="k" x="[\d.]+" y="[\d.]+" text-anchor="end">([^<]*)</text>', svg)
        assert len(ticks) == len(set(ticks)), (ticks, svg[:200])
    # the best config's command, without the sweep's own bookkeeping
    best = build_groups(docs)[0].best
    assert best is not None
    assert rerun_command(best) == f"python -m sweep server=llamacpp spec.budget={best.budget}"
    assert f"run it again: <code>{rerun_command(best)}</code>" in page


def test_pareto_points_on_the_front_are_labelled_with_config_and_context(tmp_path: Path) -> None:

    from sweep.report.table import docs_from_dir

    docs, sources = docs_from_dir(mixed_sweep(tmp_path))
    page = html.render(docs, title="mixed", sources=sources)
    labels = re.findall(r'<text class="pl"[^>]*>([^<]*)</text>', page)
    assert labels, "no labelled Pareto point"
    for label in labels:
        assert re.search(r"ctx\d+ c\d+$", label), label  # (configuration) ctx<context> c<concurrency>
    assert any(re.match(r"(b\d+|none|baseline)", label) for label in labels), labels
    # latency against concurrency: p50 and p99 of TTFT, TPOT and ITL per context
    for name in ("TTFT", "TPOT", "ITL"):
        assert f"{name} p50 / p99, context 60" in page


@pytest.mark.parametrize("given, shown", [
    (["spec.budget=8", "workload=smoke"], "python -m sweep spec.budget=8 workload=smoke"),
    (["server.extra_args=[--attention-backend,trtllm_mla]", "hydra.run.dir=x"],
     "python -m sweep 'server.extra_args=[--attention-backend,trtllm_mla]'"),
])
def test_the_rerun_command_is_one_pasteable_line(tmp_path: Path, given: list[str], shown: str) -> None:
    doc = TrialResult.load(trial(tmp_path / "r", 0, "b300", 8))
    doc.trial.overrides = given
    [group] = build_groups([doc])
    assert rerun_command(group.rows[0]) == shown
