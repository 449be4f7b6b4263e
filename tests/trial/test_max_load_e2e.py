"""The max-load search end to end: `python -m sweep workload=max_load` against the real simulator.

The truth the search is held to is one it does not share: the twin's own
prediction of TPOT per concurrency (``sweep.sim.predict``, the model the sim
server runs on, noise off) says where the SLO's edge is; the search only sees
the requests it measures over HTTP.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from _support import free_port

pytestmark = pytest.mark.slow

BASE = ["spec=none", "workload=max_load", "workload.max_tokens=64", "workload.coding=off",
        "server.sim.load_seconds=0.2", "server.sim.noise=0", "mlflow.enabled=false"]
TPOT_MS = 12.0


def sweep(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sweep", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=400)


def predicted_edge() -> int:
    """The highest concurrency whose predicted TPOT meets the limit (the twin, no server)."""
    from sweep.compose.cmdline import compose
    from sweep.compose.config import from_omegaconf
    from sweep.sim.predict import predict_cells

    overrides = [o for o in BASE if not o.startswith("workload=")] + ["workload.contexts=[1024]",
                                                                      f"workload.concurrency=[{','.join(map(str, range(1, 33)))}]"]
    cells = predict_cells(from_omegaconf(compose(overrides)))
    return max(c["concurrency"] for c in cells if c["tpot_ms_p50"] <= TPOT_MS)


def test_max_load_search_finds_the_twins_edge_in_one_server_start(tmp_path: Path) -> None:
    out = sweep(tmp_path, *BASE, f"server.port={free_port()}", f"objective.slo.tpot_ms={TPOT_MS}",
                "workload.repeats=2")
    assert out.returncode == 0, out.stderr[-3000:]
    [path] = list(tmp_path.rglob("result.json"))
    doc = json.loads(path.read_text())
    ml = doc["max_load"]
    assert doc["status"] == "ok" and ml["over"] == "concurrency" and ml["stopped"] == "tolerance"
    edge = predicted_edge()
    assert edge - 1 <= ml["value"] <= edge + 1, (ml, edge)
    # every probe is a kept cell, judged, at the one context; the answer's cell met the target
    probes = doc["cells"]
    assert len(probes) == ml["probes"] >= 4 and {c["load_search"] for c in probes} == {"max_load"}
    assert {c["context"] for c in probes} == {1024}
    at = {c["concurrency"]: c for c in probes}
    assert at[int(ml["value"])]["slo_attainment"] >= 0.9
    assert at[int(ml["bracket"][1])]["slo_attainment"] < 0.9
    assert [c["concurrency"] for c in probes][:3] == [1, 2, 4]           # doubling first
    # repeats > 1: an uncertainty, and goodput's interval over the repeats
    assert ml["value_ci"] is not None and ml["value_ci"][0] <= ml["value"] <= ml["value_ci"][1]
    assert at[int(ml["value"])]["repeats"] == 2 and ml["goodput_tok_s_ci"] is not None
    # the trial's headline metrics carry it; the result file alone judges another SLO
    assert doc["metrics"]["max_load"] == ml["value"] and doc["metrics"]["goodput_tok_s"] > 0
    from sweep.record.result import TrialResult
    from sweep.score.metrics import max_load_of
    from sweep.stats.slo import Slo

    loose = max_load_of(TrialResult.load(path), Slo(tpot_ms=TPOT_MS * 10))
    assert loose is not None and loose >= max(at)                       # every probe meets a 10x looser SLO
    assert "max load under TPOT <= 12 ms at p90" in out.stdout + out.stderr


def test_a_config_failing_the_correctness_gate_has_no_max_load(tmp_path: Path) -> None:
    out = sweep(tmp_path, *[o for o in BASE if o != "workload.coding=off"], "workload.coding=five",
                "workload.coding_max_tokens=200", "server.sim.faults.wrong_answer_rate=1",
                f"server.port={free_port()}", f"objective.slo.tpot_ms={TPOT_MS}")
    [path] = list(tmp_path.rglob("result.json"))
    doc = json.loads(path.read_text())
    assert doc["coding"]["pass_rate"] < 1.0
    assert doc["max_load"]["value"] is None and doc["max_load"]["stopped"] == "correctness"
    assert doc["cells"] == [] and doc["metrics"]["max_load"] is None
    assert "not searched" in out.stdout + out.stderr
