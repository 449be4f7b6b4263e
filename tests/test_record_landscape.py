"""benchmarks/record_landscape.py writes the shared landscape format from the trials it ran.

The recording itself runs real trials (hours: the script, not a test; tests/engines runs a tiny
one on llama.cpp); here its file-making half is checked on result documents shaped as the trial
writes them: two workloads on one config's server, three rounds, every round's cells kept as a
run (what the schedule pools as copies), points merged over the rounds, failed trials kept with
their reason, greedy identity compared with the baseline's answers where the trial could not,
secrets masked, and the tables (``--summary``) with intervals over the rounds.
"""

from __future__ import annotations

import importlib.util
import json
import tempfile
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("record_landscape", ROOT / "benchmarks" / "record_landscape.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["record_landscape"] = mod
    spec.loader.exec_module(mod)
    return mod


def _config(spec: str, budget: int | None) -> dict[str, Any]:
    return {"hardware": {"name": "cpu", "tp": 1, "ep": 1, "dp": 1, "num_gpus": 0, "spread": None},
            "model": {"name": "smollm2_135m", "served_name": "smollm2-135m"},
            "spec": {"algorithm": spec, "budget": budget},
            "server": {"name": "vllm", "flavor": "vllm", "install": {"version": "0.32.0"},
                       "api_key": "sk-landscape-secret-123"}}


def _doc(workload: str, spec: str, budget: int | None, tok: float, rnd: int, status: str = "ok",
         answers: list[str] | None = None, **cell_extra: Any) -> dict[str, Any]:
    cells = [{"context": 512, "concurrency": c, "requests": 16, "errors": 0, "output_tok_s": tok * c ** 0.5,
              "accept_len": None if spec == "none" else 2.345678, "cache": "off", "load_avg": 1.0 + rnd,
              **cell_extra} for c in (1, 4)]
    config = {**_config(spec, budget), "workload": {"name": workload, "contexts": [512], "concurrency": [1, 4],
                                                    "max_tokens": 128, "flush_cache": True}}
    doc: dict[str, Any] = {
        "status": status, "failure": None if status == "ok" else {"reason": "bad_flag", "message": "x" * 900},
        "config": config, "cells": cells if status == "ok" else [],
        "trial": {"name": f"cpu-{spec}-{workload}", "config_id": f"{spec}{budget}{workload}",
                  "started": f"2026-12-03T1{rnd}:00:00+00:00", "finished": f"2026-12-03T1{rnd}:10:00+00:00"},
        "argv": ["python", "-m", "vllm", "--api-key", "sk-landscape-secret-123",
                 *([] if spec == "none" else ["--speculative-config", json.dumps({"method": spec, "n": budget})])],
        "env": {},
        "server": {"startup_s": 35.123456, "reused": False},
        "acceptance": {"metrics": {"drafts": 10.0, "drafted": 40.0, "accepted": 20.0, "accept_len": 3.0,
                                   "accept_rate": 0.5, "per_position": [0.7, 0.5, 0.3, 0.2]}},
        "identity": {"answers": [{"prompt_sha": str(i), "text": t} for i, t in enumerate(answers or ["a", "b"])]},
        "_workload": workload, "_round": rnd, "_load_avg": 2.0}
    return doc


def test_rounds_are_runs_points_merge_them_and_the_failed_stay() -> None:
    mod = _script()
    configs = [("none", ["spec=none"]), ("ngram-b4", ["spec=ngram", "spec.budget=4"])]
    runs = {"none": [_doc(w, "none", None, 10.0 + r, r) for r in (1, 2, 3) for w in ("edit", "prose")],
            "ngram-b4": [_doc("edit", "ngram", 4, 19.0 + r, r, answers=["a", "c"]) for r in (1, 2, 3)]
            + [_doc("prose", "ngram", 4, 0.0, 1, status="failed")]}
    workloads = {"edit": {"name": "edit"}, "prose": {"name": "prose"}}
    doc = mod.assemble("vllm", {"hardware": "cpu"}, configs, runs, workloads, {"cores": 2}, "python x "
                       "server.api_key=sk-landscape-secret-123")
    from sweep.sim.landscape import write

    written = write(Path(tempfile.mkdtemp()) / "l.json", doc, argv=["server.api_key=sk-landscape-secret-123"])
    text = written.read_text()
    assert "sk-landscape-secret-123" not in text  # the command, the argv, the composed server: masked where it leaves
    assert doc["schema"] == "specsweep.landscape/1" and set(doc["workloads"]) == {"edit", "prose"}
    assert len(doc["runs"]) == 10 and {r["round"] for r in doc["runs"]} == {1, 2, 3}
    edit = [r for r in doc["runs"] if r["config"] == "ngram-b4" and r["workload"] == "edit"]
    assert all(len(r["cells"]) == 2 and r["cells"][0]["cache"] == "off" for r in edit)
    # greedy identity against the baseline's answers, prompt by prompt: one of two differs
    assert all(r["greedy_identical"] == 0.5 for r in edit)
    point = next(p for p in doc["points"] if p["config"] == "ngram-b4" and p["concurrency"] == 1)
    assert point["output_tok_s_runs"] == [20.0, 21.0, 22.0] and point["repeats"] == 3
    failed = [t for t in doc["trials"] if t["status"] != "ok"]
    assert len(failed) == 1 and failed[0]["failure"]["reason"] == "bad_flag"


def test_the_summary_pools_rounds_into_intervals(tmp_path: Path) -> None:
    mod = _script()
    configs = [("none", ["spec=none"]), ("ngram-b4", ["spec=ngram", "spec.budget=4"])]
    runs = {"none": [_doc("edit", "none", None, 10.0 + r, r) for r in (1, 2, 3)],
            "ngram-b4": [_doc("edit", "ngram", 4, 19.0 + r, r) for r in (1, 2, 3)]}
    doc = mod.assemble("vllm", {"hardware": "cpu"}, configs, runs, {"edit": {"name": "edit"}}, {}, "x")
    path = tmp_path / "land.json"
    path.write_text(json.dumps(doc))
    lines = mod.summary(path)
    row = next(line for line in lines if line.startswith("| cpu-ngram-edit | 1 |"))
    assert next(line for line in lines if line.startswith("| cpu-none-edit | 1 |")).split("|")[3].strip() == "3"
    # three rounds: 20, 21, 22 -> 21.0 [18.5, 23.5]; speedup 21/12 with both intervals
    assert "| 3 | 21.0 [18.5, 23.5] |" in row and "1.75x [1.33, 2.17]" in row and row.endswith("| 1.00 |")
    assert lines[-1].startswith("box spread: median relative SD of one round's tok/s")


def test_cells_carry_their_box_state_points_are_busy_when_a_round_was_and_a_refusal_is_seen() -> None:
    from sweep.bench.boxstate import judge, state_key
    from sweep.sim import landscape

    mod = _script()
    quiet = judge({"others_cpu": 0.1, "load_avg": 1.6, "window_s": 5.0}, 0.5)
    busy = judge({"others_cpu": 1.4, "load_avg": 6.2, "window_s": 5.0,
                  "busy_procs": [{"pid": 9, "name": "cc1plus", "cpu": 1.4}]}, 0.5)
    configs = [("none", ["spec=none"])]
    runs = {"none": [_doc("edit", "none", None, 10.0 + r, r, box_state=busy if r == 2 else quiet)
                     for r in (1, 2, 3)]}
    doc = mod.assemble("vllm", {"hardware": "cpu"}, configs, runs, {"edit": {"name": "edit"}}, {}, "x")
    assert [r["cells"][0]["box_state"]["busy"] for r in doc["runs"]] == [False, True, False]
    point = next(p for p in doc["points"] if p["concurrency"] == 1)
    assert point["box_state"]["busy"] is True and "cc1plus (pid 9)" in point["box_state"]["why"][0]
    assert state_key(point) == "busy" and state_key(doc["runs"][0]["cells"][0]) is None
    path = Path(tempfile.mkdtemp()) / "l.json"
    landscape.write(path, doc, argv=[])
    landscape.load(path)  # the reader of landscapes takes the state (checked as a result cell's)
    line = "refused: the box is busy before the trial (workload.busy_box=refuse, waited 300 s): ..."
    from sweep.bench.boxstate import recording_policy, refused

    assert refused({"status": "failed", "failure": {"reason": "busy_box", "message": line}}) == line
    assert refused(runs["none"][0]) is None
    assert recording_policy([]) == ["workload.busy_box=refuse", "workload.busy_wait_s=300"]
    assert recording_policy(["workload.busy_box=mark"]) == ["workload.busy_wait_s=300"]  # the user's wins
