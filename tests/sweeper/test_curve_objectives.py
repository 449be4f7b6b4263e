"""Searching for the curve: a multi-objective study on the simulator, its Pareto set everywhere.

`objective.metrics=[per_stream_tok_s_lowc,tok_s_peak]` (tok/s one user sees at
low load vs the box's tok/s at its highest) makes the ready-made search
multi-objective; the Pareto set must land in best.yaml, pareto.yaml and the
report, over feasible trials only (a config that changes answers never does).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from _support import free_port

from .conftest import env, load

pytestmark = pytest.mark.slow


def test_multi_objective_study_reports_its_pareto_set(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path}/study.db"
    sweep_dir = tmp_path / "sweep"
    proc = subprocess.run([
        sys.executable, "-m", "sweep", "-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=3",
        f"hydra.sweeper.storage={storage}", "hydra.sweeper.plots.enabled=false", "hydra.sweeper.enqueue=[]",
        "objective.metrics=[per_stream_tok_s_lowc,tok_s_peak]", "spec.budget=choice(4,8)", "spec.topk=4",
        "spec.window=2048", "workload=smoke", "workload.concurrency=[1,8]", "workload.max_tokens=48",
        "server.sim.load_seconds=0.2", "mlflow.enabled=false", f"server.port={free_port()}",
        f"hydra.sweep.dir={sweep_dir}"], cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    study = load(storage, "b300-ddtree-smoke-per_stream_tok_s_lowc+tok_s_peak")  # named after both metrics
    assert study.metric_names == ["per_stream_tok_s_lowc", "tok_s_peak"] and len(study.directions) == 2
    best = (sweep_dir / "best.yaml").read_text()
    pareto = yaml.safe_load((sweep_dir / "pareto.yaml").read_text())["pareto"]
    assert pareto and all(set(p["values"]) == {"per_stream_tok_s_lowc", "tok_s_peak"} for p in pareto)
    assert all(any(o.startswith("spec.budget=") for o in p["overrides"]) for p in pareto)
    assert f"Pareto set ({len(pareto)} feasible trials" in best
    for p in pareto:
        assert f"trial {p['trial']}: per_stream_tok_s_lowc=" in best
    # the report recomputes the same set from the result files alone
    report = (sweep_dir / "report.html").read_text()
    assert "Pareto set of the study (per_stream_tok_s_lowc, tok_s_peak)" in report
    from sweep.record.result import iter_results
    from sweep.report.compare import build_groups
    from sweep.report.study_front import study_front

    found = list(iter_results(sweep_dir))
    [group] = build_groups([d for _, d in found], [str(Path(p).resolve()) for p, _ in found])
    number = {str(Path(t.user_attrs["result_path"]).resolve()): t.number for t in study.trials
              if t.user_attrs.get("result_path") and "duplicate_of" not in t.user_attrs}
    assert {number[r.source] for r, _ in study_front(group)} == {p["trial"] for p in pareto}


def test_per_load_study_searches_the_budget_per_load_and_ends_with_the_table(tmp_path: Path) -> None:
    """hydra/sweeper/space=per_load: the budget only, one objective per load (tok_s_at_c<N> from
    workload.concurrency); at its end the family's per-load table is derived from the sweep dir,
    printed and written (dynamic-sim.yaml), and the command that verifies it is printed."""
    storage = f"sqlite:///{tmp_path}/study.db"
    sweep_dir = tmp_path / "sweep"
    port = free_port()
    proc = subprocess.run([
        sys.executable, "-m", "sweep", "-m", "hydra/sweeper=optuna", "hydra/sweeper/space=per_load",
        "hydra.sweeper.n_trials=3", f"hydra.sweeper.storage={storage}", "hydra.sweeper.plots.enabled=false",
        "spec.budget=choice(4,8)", "workload=smoke", "workload.concurrency=[1,8]", "workload.max_tokens=48",
        "server.sim.load_seconds=0.2", "mlflow.enabled=false", f"server.port={port}",
        f"hydra.sweep.dir={sweep_dir}"], cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    study = load(storage, "b300-ddtree-smoke-per-load")
    assert study.metric_names == ["tok_s_at_c1", "tok_s_at_c8"] and len(study.directions) == 2
    assert {t.params["spec.budget"] for t in study.trials} <= {4, 8} and set(study.best_trials[0].params) == {
        "spec.budget"}
    assert "per-load table: b300 (tp8) · kimi_k26 · smoke" in proc.stdout
    # the study's own launch overrides go with it (the export carries only the identity knobs)
    assert (f"verify it: python -m sweep.verify_dynamic --dir {sweep_dir} --rounds 3 server.sim.load_seconds=0.2 "
            f"mlflow.enabled=false server.port={port}\n") in proc.stdout
    doc = yaml.safe_load((sweep_dir / "dynamic-sim.yaml").read_text())
    [table] = doc["tables"]
    assert table["budgets"] == [4, 8] and [lv["load"] for lv in table["levels"]] == [1, 8]
    assert table["per_load"] is None or table["per_load"][0][0] == 1


def test_a_per_load_metric_names_a_measured_load(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "sweep", "objective.metrics=[tok_s_at_c1,tok_s_at_c3]",
                           "workload=smoke", "workload.concurrency=[1,8]", "dry_run=true"], cwd=tmp_path, env=env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "error: objective.metrics: tok_s_at_c3: concurrency 3 is not measured (workload.concurrency [1, 8])")
