"""The issue's sweep (budgets 8, 16, 32 on b300) logged into a real sqlite store."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from result_docs import SECRET, make_result, make_sweep, read

from sweep.record.tracking import Tracker
from sweep.report.mlflow_artifacts import sweep_artifacts, trial_plots


def _client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def test_sweep_lands_as_parent_and_children(tmp_path: Path, sqlite_uri: str) -> None:
    sweep_dir = tmp_path / "multirun" / "2026-01-01" / "12-00-00"
    trials = make_sweep(sweep_dir)
    tracker = Tracker({"enabled": True, "tracking_uri": sqlite_uri, "experiment": "sqlite-sweep"})
    parent = tracker.start_parent(sweep_dir, "b300 ddtree budget sweep", {"overrides": "spec.budget=8,16,32"})
    assert parent and tracker.parent_for(sweep_dir) == parent
    assert json.loads((sweep_dir / "mlflow_parent.json").read_text())["run_id"] == parent
    ids = [tracker.log_trial(doc, job_dir, parent_run_id=tracker.parent_for(sweep_dir), plots=trial_plots) for job_dir, doc in trials]
    assert all(ids)
    tracker.end_parent(sweep_dir, artifacts=sweep_artifacts)

    client = _client(sqlite_uri)
    exp = client.get_experiment_by_name("sqlite-sweep")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent]
    assert [p.info.run_id for p in parents] == [parent] and len(children) == 3
    assert parents[0].info.status == "FINISHED"
    assert {c.info.run_name for c in children} == {f"b300-ddtree-b{b}-t4-w2048" for b in (8, 16, 32)}
    assert sorted(c.data.params["spec.budget"] for c in children) == ["16", "32", "8"]
    failed = [c for c in children if c.info.status == "FAILED"]
    assert len(failed) == 2 and {c.data.tags["failure.reason"] for c in failed} == {"cuda_graph"}
    ok = next(c for c in children if c.info.status == "FINISHED")
    assert ok.data.metrics["tok_s_c1"] > 0 and ok.data.tags["simulated"] == "true"
    history = client.get_metric_history(ok.info.run_id, "1 tok_s/ctx00000060")
    assert sorted(m.step for m in history) == [1, 2, 4]
    arts = {f.path for f in client.list_artifacts(ok.info.run_id)}
    assert {"result.json", "config.yaml", "command.txt", "server.log", "cells.json", "plots"} <= arts
    assert "log_tail.txt" in {f.path for f in client.list_artifacts(failed[0].info.run_id)}
    parent_arts = {f.path for f in client.list_artifacts(parent, "plots")}
    # the deployment answer too: which config at which load per context, tok/s per user vs per GPU
    assert parent_arts == {"plots/throughput_vs_budget.png", "plots/pareto_per_stream_vs_aggregate.png",
                           "plots/schedule-ctx60.png", "plots/schedule-ctx1024.png", "plots/pareto-user-vs-gpu.png"}

    # Written back into every result file; logging the same result again is a no-op.
    for (job_dir, doc), run_id in zip(trials, ids):
        recorded = read(job_dir)["mlflow"]
        assert recorded.pop("experiment_id") == tracker.connect()[1]
        assert recorded == {"run_id": run_id, "synced": True, "tracking_uri": sqlite_uri,
                            "experiment": "sqlite-sweep"}
        assert tracker.log_trial(doc, job_dir, parent_run_id=parent) == run_id
    assert len(client.search_runs([exp.experiment_id])) == 4


def test_no_secret_reaches_params_tags_or_artifacts(tmp_path: Path, sqlite_uri: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """server.api_key comes from $SPECSWEEP_API_KEY (the config's ${oc.env:...});
    even when a caller forgets to redact the command, log or config, nothing leaks."""
    monkeypatch.setenv("SPECSWEEP_API_KEY", SECRET)
    sweep_dir = tmp_path / "sweep"
    tracker = Tracker({"enabled": True, "tracking_uri": sqlite_uri, "experiment": "secrets"})
    parent = tracker.start_parent(sweep_dir, "secret sweep", {"server.api_key": SECRET})
    run_ids = []
    for job_dir, doc in (make_result(sweep_dir, 0, 8, api_key=SECRET),
                         make_result(sweep_dir, 1, 16, status="failed", reason="cuda_graph", api_key=SECRET)):
        assert SECRET in (job_dir / "server.log").read_text() and SECRET in doc["command"]
        run_ids.append(tracker.log_trial(doc, job_dir, parent_run_id=parent, plots=trial_plots))
    tracker.end_parent(sweep_dir, artifacts=sweep_artifacts)

    client = _client(sqlite_uri)
    for run_id in [parent, *run_ids]:
        run = client.get_run(run_id)
        assert SECRET not in json.dumps(run.data.params) + json.dumps(run.data.tags)
        local = Path(client.download_artifacts(run_id, "", dst_path=str(tmp_path / "dl" / run_id)))
        files = [p for p in local.rglob("*") if p.is_file()]
        assert files
        for path in files:
            assert SECRET.encode() not in path.read_bytes(), path
    assert client.get_run(run_ids[0]).data.params["server.api_key"] == "***"
    assert "--api-key ***" in (tmp_path / "dl" / run_ids[0] / "command.txt").read_text()


def test_unwritable_store_warns_once_and_keeps_the_result(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sweep_dir = tmp_path / "sweep"
    trials = make_sweep(sweep_dir)
    bad = tmp_path / "not-a-dir"
    bad.write_text("")
    tracker = Tracker({"tracking_uri": f"sqlite:///{bad}/mlflow.db", "experiment": "x"})
    with caplog.at_level(logging.WARNING, logger="sweep.record.tracking"):
        assert [tracker.log_trial(doc, job_dir, parent_run_id=None) for job_dir, doc in trials] == [None] * 3
    assert len([r for r in caplog.records if r.name == "sweep.record.tracking"]) == 1
    assert all(read(job_dir)["mlflow"]["synced"] is False for job_dir, _ in trials)


def test_relative_sweep_dir_is_the_launch_dirs(tmp_path: Path, sqlite_uri: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Hydra gives ``multirun/<date>/<time>`` relative to the launch dir; a job
    whose cwd is its own dir (hydra.job.chdir) must still find the same parent."""
    import sweep.record.tracking as tracking

    monkeypatch.chdir(tmp_path)
    rel = Path("multirun") / "2026-01-01" / "15-00-00"
    settings = {"tracking_uri": sqlite_uri, "experiment": "relative"}
    parent = Tracker(settings).start_parent(rel, "relative sweep", {})
    trials = make_sweep(tmp_path / rel)
    monkeypatch.setattr(tracking, "launch_dir", lambda: tmp_path)  # what Hydra reports
    for job_dir, doc in trials:
        monkeypatch.chdir(job_dir)
        doc["trial"]["sweep_dir"] = str(rel)
        doc["config"]["optuna"] = {"study_name": "b300-search", "trial_number": doc["trial"]["job_num"]}
        tracker = Tracker(settings)
        assert tracker.parent_for(rel) == parent
        tracker.log_trial(doc, job_dir, parent_run_id=None)  # found through the record file
    runs = _client(sqlite_uri).search_runs([_client(sqlite_uri).get_experiment_by_name("relative").experiment_id])
    assert len(runs) == 4
    assert sum(r.data.tags.get("mlflow.parentRunId") == parent for r in runs) == 3
    children = [r for r in runs if r.info.run_id != parent]
    assert sorted(r.data.tags["optuna.trial_number"] for r in children) == ["0", "1", "2"]
    assert {r.data.tags["optuna.study_name"] for r in children} == {"b300-search"}
