"""hydra.sweeper.quirks on the b300 simulator, end to end (real sweeper, real sim servers).

b300 declares its CUDA-graph bug in conf/hardware/b300.yaml (quirks.rules); the
simulator crashes the same way on its own (sweep/sim/perf.py), so a budget-16
server started with CUDA graphs fails here as it would on the box.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from optuna.trial import TrialState

from _support import free_port

from .conftest import load
from .test_e2e import sweep_cli

STUDY = "b300-ddtree-smoke-tok_s_lowc"
B16 = "{spec.budget:16,spec.topk:4,spec.window:2048}"


def run(tmp_path: Path, *overrides: str) -> tuple[str, Path]:
    sweep_dir = tmp_path / "sweep"
    proc = sweep_cli("-m", "hydra/sweeper=optuna", f"hydra.sweeper.storage=sqlite:///{tmp_path}/study.db",
                     "workload=smoke", "server.sim.load_seconds=0.2", "mlflow.enabled=false",
                     f"server.port={free_port()}", f"hydra.sweep.dir={sweep_dir}",
                     "hydra.sweeper.plots.enabled=false", *overrides, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr, sweep_dir


def budgets_started(sweep_dir: Path) -> list[tuple[int, bool, str]]:
    """(budget, eager, status) of every server a trial started, from its result.json."""
    out = []
    for path in sorted(sweep_dir.glob("*/result.json")):
        doc = json.loads(path.read_text())
        m = re.search(r"--speculative-ddtree-budget (\d+)", doc["command"])
        assert m, doc["command"]
        # eager: SGLang 0.5.23's form (conf/server/sglang.yaml), not the deprecated --disable-cuda-graph
        out.append((int(m.group(1)), "--cuda-graph-backend-decode disabled" in doc["command"], doc["status"]))
    return out


@pytest.mark.slow
def test_avoid_never_starts_a_budget_the_box_crashes_on(tmp_path: Path) -> None:
    output, sweep_dir = run(tmp_path, "hydra.sweeper.n_trials=3",  # quirks=avoid is the default
                            f"hydra.sweeper.enqueue=[{B16},{{spec.budget:8,spec.topk:4,spec.window:2048}}]")
    assert "avoided: quirk cuda_graph_capture" in output  # the budget-16 seed was not queued
    started = budgets_started(sweep_dir)
    assert len(started) == 3 and all(b <= 8 and s == "ok" for b, _, s in started), started
    study = load(f"sqlite:///{tmp_path}/study.db", STUDY)
    assert all(t.state == TrialState.COMPLETE for t in study.trials)
    assert study.trials[0].params["spec.budget"] == 8


@pytest.mark.slow
def test_workaround_starts_it_eager_as_a_distinct_config(tmp_path: Path) -> None:
    output, sweep_dir = run(tmp_path, "hydra.sweeper.quirks=workaround", "hydra.sweeper.n_trials=1",
                            f"hydra.sweeper.enqueue=[{B16}]")
    assert budgets_started(sweep_dir) == [(16, True, "ok")]
    (trial,) = load(f"sqlite:///{tmp_path}/study.db", STUDY).trials
    assert trial.state == TrialState.COMPLETE and trial.params["spec.budget"] == 16
    assert trial.user_attrs["workaround"] == ["server.disable_cuda_graph=true"]
    doc = json.loads((sweep_dir / "0" / "result.json").read_text())
    assert doc["trial"]["name"].endswith("-nocg-smoke") and "server.disable_cuda_graph=true" in doc["trial"]["overrides"]
    # the rerun line and best.yaml carry the workaround: the winner is reproducible as run
    assert "disable_cuda_graph: true" in (sweep_dir / "best.yaml").read_text()
    assert "with the workaround of quirk cuda_graph_capture: server.disable_cuda_graph=true" in output
