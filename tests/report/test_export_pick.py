"""``python -m sweep.schedule --export vllm`` on a directory of two engines' landscapes: only vLLM's
families become vLLM tables (the llama.cpp ones were rendered as vLLM configs), and each workload
ends with the one table to deploy, its launch argument and overrides, then the alternatives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
LANDSCAPES = ROOT / "benchmarks" / "measured" / "landscapes"
VLLM_WORKLOADS = ["edit"]  # the quiet re-recording (issue 41) holds edit; prose is in benchmarks/busy-box/ only


def test_an_engines_export_is_made_from_its_own_families_and_names_one_table_per_workload(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "sweep.schedule", "--dir", str(LANDSCAPES), "-o", str(tmp_path),
                           "--export", "vllm"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "120", "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "derived from server=llamacpp" not in out and "spec=llamacpp_" not in out
    left = [line for line in out.splitlines() if line.startswith("left out: ")]
    assert len(left) == 1 and "measured on server=llamacpp" in left[0]
    doc = yaml.safe_load((tmp_path / "dynamic-vllm.yaml").read_text())
    assert {t["measured_on"] for t in doc["tables"]} == {"vllm"} and len(doc["tables"]) >= 1
    recommended = {r["workload"]: r for r in doc["recommended"]}
    assert set(recommended) == set(VLLM_WORKLOADS)  # one pick per workload the vLLM landscape recorded
    lines = out.splitlines()
    for workload, rec in recommended.items():
        i = next(i for i, line in enumerate(lines) if line.startswith(f"deploy for {workload} (ctx 512)"))
        assert lines[i + 1].startswith("  --speculative-config '{\"method\":\"ngram\"")
        assert lines[i + 2].startswith("  overrides: server=vllm spec=ngram ")
        assert lines[i + 3].startswith("  alternatives: ")
        table = next(t for t in doc["tables"] if t["family"] == rec["family"] and t["workload"] == workload)
        # the pick's figure is its table's picks' geometric mean: never below an alternative's
        assert rec["geo_mean_tok_s"] > 0 and all(0 <= a["below"] < 1 for a in rec["alternatives"])
        assert table["per_load"], table
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".yaml") == ["dynamic-vllm.yaml", "schedule.yaml"]


def test_the_schedule_ends_with_one_recommendation_per_engine_and_workload(tmp_path: Path) -> None:
    """Without --export the schedule still says what to deploy: vLLM's per-load table per workload,
    and for llama.cpp (one draft length for every batch) the one config over the loads."""
    before = sorted(p.name for p in LANDSCAPES.iterdir())
    proc = subprocess.run([sys.executable, "-m", "sweep.schedule", "--dir", str(LANDSCAPES), "-o", str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "120", "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    rec = [line for line in proc.stdout.splitlines() if line.startswith("recommended on ")]
    llama = [line for line in rec if line.startswith("recommended on llamacpp: ")]
    vllm = [line for line in rec if line.startswith("recommended on vllm: deploy for ")]
    assert len(llama) == 2 and {"(ctx 64)" in llama[0], "(ctx 256)" in llama[1]} == {True}
    assert all("at every load (llamacpp runs one draft length for all batches)" in line for line in llama)
    assert sorted(line.split("deploy for ")[1].split(" (")[0] for line in vllm) == VLLM_WORKLOADS
    assert sorted(p.name for p in LANDSCAPES.iterdir()) == before  # nothing written beside the recordings
