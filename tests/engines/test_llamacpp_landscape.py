"""Recording a real landscape on llama.cpp and fitting the twin to it, as a user would.

`benchmarks/record_landscape.py` runs real `python -m sweep` trials in rounds and writes the
shared landscape format; `python -m sweep.calibrate` fits the CPU box from that file. What is
asserted is the pipeline and the format (every round's tok/s kept, counters from the engine,
the machine's measured figures), never a speed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT, env

pytestmark = pytest.mark.slow


def test_record_a_landscape_and_calibrate_the_cpu_box_from_it(engine, tmp_path: Path) -> None:
    out = tmp_path / "land.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "record_landscape.py"), "--engine", "llamacpp",
         "--configs", "none,ngram-b8-min2", "--rounds", "2", "--contexts", "64", "--concurrency", "1,2",
         "--max-tokens", "24", "--out", str(out), "--work", str(tmp_path / "work"), "workload.min_requests=2",
         # CI's box is busy with the rest of the suite by design: the recording's mechanics are tested
         # here, marked, not refused (its wait-then-refuse default: tests/trial/test_busy_box.py)
         "workload.warmup_requests=0", "workload.busy_box=mark"],
        cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["schema"] == "specsweep.landscape/1" and doc["engine"] == "llamacpp"
    assert doc["machine"]["perf"]["mem_bw_tbs"] > 0 and doc["machine"]["perf"]["matmul_tflops"] > 0
    assert [c["id"] for c in doc["configs"]] == ["none", "ngram-b8-min2"]
    assert all(c["composed"]["hardware"]["name"] == "cpu" for c in doc["configs"])
    assert [t["status"] for t in doc["trials"]] == ["ok", "ok"] and doc["trials"][1]["rounds_ok"] == 2
    assert doc["trials"][1]["accept"]["drafted"] >= 0  # the engine's own counters, summed over the rounds
    points = doc["points"]
    assert {(p["config"], p["context"], p["concurrency"]) for p in points} == \
        {(c, 64, n) for c in ("none", "ngram-b8-min2") for n in (1, 2)}
    for p in points:
        assert len(p["output_tok_s_runs"]) == 2 and p["repeats"] == 2
        assert p["output_tok_s"] == pytest.approx(sum(p["output_tok_s_runs"]) / 2, rel=1e-3)
        assert p["workload"] == "cpu" and p["errors"] == 0
    # a rerun over the same work dir resumes: no trial runs again
    again = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "record_landscape.py"), "--engine", "llamacpp",
         "--configs", "none,ngram-b8-min2", "--rounds", "2", "--contexts", "64", "--concurrency", "1,2",
         "--max-tokens", "24", "--out", str(tmp_path / "again.json"), "--work", str(tmp_path / "work"),
         "workload.min_requests=2", "workload.warmup_requests=0", "workload.busy_box=mark"],
        cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and json.loads((tmp_path / "again.json").read_text())["points"] == points
    cal = subprocess.run([sys.executable, "-m", "sweep.calibrate", "-o", str(tmp_path / "cal"), str(out)],
                         cwd=ROOT, env=env(), capture_output=True, text=True, timeout=600)
    assert cal.returncode == 0, cal.stderr
    # an engine's box is its own (llama.cpp on the cpu box: cpu-llamacpp), docs/simulator.md
    assert "box cpu-llamacpp: " in cal.stdout and "ngram_hit@cpu" in cal.stdout
    written = (tmp_path / "cal" / "cpu-llamacpp.yaml").read_text()
    assert "kind: cpu" in written and "ngram_q@cpu:" in written
