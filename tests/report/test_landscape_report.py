"""``python -m sweep.report --dir`` on recorded landscapes: the rounds are trials, one group per
engine and workload, ranked by the verdict model -- it printed "no trials found" and exited 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sweep.sim import landscape

ROOT = Path(__file__).resolve().parents[2]
LANDSCAPES = ROOT / "benchmarks" / "measured" / "landscapes"


def _report(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}
    return subprocess.run([sys.executable, "-m", "sweep.report", "--dir", str(LANDSCAPES), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def _recorded() -> set[tuple[str, str]]:
    """(engine, workload) of every run the recorded files keep, read by the one landscape reader."""
    out: set[tuple[str, str]] = set()
    for path in sorted(LANDSCAPES.glob("*.json")):
        for _source, doc in landscape.trial_docs(landscape.load(path)):
            out.add((str(doc.config["server"]["name"]), str(doc.config["workload"]["name"])))
    return out


def test_recorded_landscapes_have_a_report_one_group_per_engine_and_workload() -> None:
    recorded = _recorded()
    assert len({engine for engine, _ in recorded}) >= 2  # the dir mixes engines: the point of the test
    proc = _report("--format", "json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    groups = json.loads(proc.stdout)["groups"]
    seen = set()
    for g in groups:
        engines = {r["group"].split(" · ")[1] for r in g["rows"]}
        workloads = {r["workload"] for r in g["rows"]}
        assert len(engines) == 1 and len(workloads) == 1, g["label"]  # never two engines in one group
        seen.add((engines.pop(), workloads.pop()))
        feasible = [r for r in g["rows"] if r["feasible"]]
        # ranked by the verdict model's objective: rank 1 leads, the leader the verdict names
        assert max(feasible, key=lambda r: r["objective_value"])["rank"] == 1
        assert g["leader"] == next(r["trial"] for r in g["rows"] if r["rank"] == 1)
        assert g["verdict"] in ("decided", "equivalent", "open", "unknown")
    assert seen == recorded


def test_recorded_landscapes_table_names_each_engine_and_says_how_to_decide() -> None:
    proc = _report()
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = proc.stdout + proc.stderr
    assert "no trials found" not in text
    for engine, workload in _recorded():
        assert f" · {engine} · " in text and f"workload {workload} (" in text, (engine, workload)
    # an open group is settled by the recorder's further rounds, never by decide writing into the recording's dir
    assert "python -m sweep.decide" not in text
    assert text.count("to decide: more rounds of the recorded landscape (benchmarks/record_landscape.py") == \
        text.count("no best yet:") > 0
    # two rounds 2x apart (the llama.cpp recording) give a t-interval far below zero: shown on the log scale
    for line in text.splitlines():
        assert " ±" not in line or "-" not in line.split(" ±", 1)[1].split()[0], line


def test_an_interval_that_would_pass_below_zero_is_shown_on_the_log_scale() -> None:
    from sweep.score.names import interval_text

    assert interval_text(100.0, 96.0, 104.0) == " ±4.0"
    assert interval_text(22.0, -89.5, 133.5) == " [3.6-133.5]"  # the same upper reach, never below zero
    lo, hi = (float(x) for x in interval_text(10.0, -5.0, 25.0).strip(" []").split("-"))
    assert 0 < lo < 10.0 < hi and abs(lo * hi - 100.0) < 0.5  # symmetric in log: lo * hi = value^2
