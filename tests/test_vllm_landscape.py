"""benchmarks/vllm_landscape.py writes the shared landscape format (/work/landscape-format.md).

The recording itself runs real trials (minutes to hours: the script, not a
test); here its file-making half is checked on result documents shaped as the
trial writes them: every cell key flows through to a point (keys other
branches add to cells included), failed configs stay as trials with their
reason, floats keep 4 significant digits, long latency lists are capped.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("vllm_landscape", ROOT / "benchmarks" / "vllm_landscape.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["vllm_landscape"] = mod
    spec.loader.exec_module(mod)
    return mod


def _doc(workload: str, spec: str, tok: float, status: str = "ok", **cell_extra) -> dict:
    cell = {"context": 512, "concurrency": 1, "requests": 4, "output_tok_s": tok, "accept_len": 2.345678,
            "output_tok_s_runs": [tok * 0.99, tok * 1.01], **cell_extra}
    return {"status": status, "failure": None if status == "ok" else {"reason": "bad_flag", "message": "x" * 900},
            "config": {"workload": {"name": workload, "contexts": [512]}, "spec": {"algorithm": spec},
                       "hardware": {"name": "cpu"}, "model": {"name": "smollm2_135m"}},
            "cells": [cell] if status == "ok" else [], "server": {"startup_s": 35.123456, "reused": False},
            "acceptance": {"metrics": {"drafts": 10.0, "drafted": 40.0, "accepted": 20.0, "accept_len": 3.0,
                                       "accept_rate": 0.5, "per_position": [0.7, 0.5, 0.3, 0.2]}},
            "identity": {"greedy_identical": 1.0, "prefix_match": 1.0, "compared": 4},
            "speedup_vs_baseline": 1.2345678, "metrics": {}, "_path": f"/w/{spec}/{workload}/result.json"}


def test_points_copy_cells_generically_and_failed_configs_stay():
    mod = _script()
    configs = [mod._config("none", "none"), mod._config("ngram-b4-max4-min2", "ngram", budget=4, lookup_max=4,
                                                         lookup_min=2)]
    assert configs[1]["overrides"] == ["spec=ngram", "spec.budget=4", "spec.ngram_n_max=4", "spec.ngram_n_min=2"]
    runs = {"none": [_doc("edit", "none", 10.0), _doc("prose", "none", 9.0)],
            "ngram-b4-max4-min2": [_doc("edit", "ngram", 19.87654, latencies=list(range(1000)),
                                        slo_attained=0.98765),
                                   _doc("prose", "ngram", 0.0, status="failed")]}
    doc = mod.assemble(configs, runs, Path("/w"), {"engine_version": "0.32.0", "hardware": "cpu"})
    assert doc["schema"] == "specsweep.landscape/1" and doc["engine"] == "vllm"
    assert [c["id"] for c in doc["configs"]] == ["none", "ngram-b4-max4-min2"]
    assert doc["configs"][1]["knobs"] == {"method": "ngram", "budget": 4, "lookup_max": 4, "lookup_min": 2}
    assert set(doc["workloads"]) == {"edit", "prose"}
    failed = [t for t in doc["trials"] if t["status"] != "ok"]
    assert len(failed) == 1 and failed[0]["failure"]["reason"] == "bad_flag" and len(failed[0]["failure"]["message"]) == 400
    point = next(p for p in doc["points"] if p["config"] == "ngram-b4-max4-min2")
    assert point["workload"] == "edit" and point["output_tok_s"] == 19.88 and point["accept_len"] == 2.346
    assert point["slo_attained"] == 0.9877  # a key this script never heard of flows through
    assert len(point["latencies"]) == mod.MAX_LATENCIES and point["output_tok_s_runs"] == [19.68, 20.08]
    trial = next(t for t in doc["trials"] if t["config"] == "ngram-b4-max4-min2" and t["workload"] == "edit")
    assert trial["accept"]["per_position"] == [0.7, 0.5, 0.3, 0.2] and trial["greedy_identical"] == 1.0
    assert trial["startup_s"] == 35.12 and trial["result_json"] == "ngram/edit/result.json"
    rows = mod.table(doc)
    assert any(r.startswith("| ngram-b4-max4-min2 | edit | 1 | 2.35 |") and "1.99x" in r for r in rows), rows
    assert any("failed: bad_flag" in r for r in rows)
