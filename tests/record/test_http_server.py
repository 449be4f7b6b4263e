"""Against a real ``mlflow server`` over HTTP: the issue's sweep, MLflow down,
then sync (exactly once), then the report."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
from result_docs import make_sweep, read

from sweep import sync
from sweep.report import __main__ as report
from sweep.record.tracking import Tracker


def _runs(url: str, experiment: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=url)
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else list(client.search_runs([exp.experiment_id], max_results=100))


def _check_issue_sweep(url: str, experiment: str) -> None:
    """The issue's 'done when': one parent, three children, spec.budget, tok_s_c1,
    "1 tok_s/ctx00000060" at steps = concurrencies, two children FAILED with cuda_graph."""
    from mlflow.tracking import MlflowClient

    runs = _runs(url, experiment)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1, [r.info.run_name for r in runs]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert len(children) == 3 and len(runs) == 4
    assert sorted(int(c.data.params["spec.budget"]) for c in children) == [8, 16, 32]
    failed = [c for c in children if c.info.status == "FAILED"]
    assert [c.data.tags["failure.reason"] for c in failed] == ["cuda_graph", "cuda_graph"]
    ok = [c for c in children if c.info.status == "FINISHED"]
    assert len(ok) == 1 and ok[0].data.metrics["tok_s_c1"] > 0
    # the view's columns: the workload, and headline values rounded in tags (metrics stay whole)
    tags, metrics = ok[0].data.tags, ok[0].data.metrics
    assert tags["workload"] == "smoke" and metrics["headline_concurrency"] == 1
    assert metrics["tok_s_lowc"] == metrics["tok_s_c1"] and tags["low-load tok/s"] == f"{metrics['tok_s_lowc']:.4g}"
    assert tags["accept len"] == f"{metrics['accept_len']:.4g}" and len(tags["accept len"]) <= 5
    history = MlflowClient(tracking_uri=url).get_metric_history(ok[0].info.run_id, "1 tok_s/ctx00000060")
    assert sorted(m.step for m in history) == [1, 2, 4]
    assert parents[0].info.status == "FINISHED"


def test_sweep_over_http(http_sweep: dict) -> None:
    assert http_sweep["parent"] and all(http_sweep["run_ids"])
    for (job_dir, doc), run_id in zip(http_sweep["trials"], http_sweep["run_ids"]):
        assert doc["mlflow"]["run_id"] == run_id
        recorded = read(job_dir)["mlflow"]
        assert recorded.pop("experiment_id")  # what the printed link to the run needs
        assert recorded == {"run_id": run_id, "synced": True, "tracking_uri": http_sweep["url"],
                            "experiment": "http-sweep"}
    _check_issue_sweep(http_sweep["url"], "http-sweep")


def test_down_then_sync_exactly_once(mlflow_server: str, closed_port_uri: str, tmp_path: Path,
                                     caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "multirun"
    sweep_dir = root / "2026-01-01" / "13-00-00"
    trials = make_sweep(sweep_dir, experiment="down-sync")
    down = Tracker({"enabled": True, "tracking_uri": closed_port_uri, "experiment": "down-sync"})
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="sweep.record.tracking"):
        assert down.start_parent(sweep_dir, "b300 budget sweep (offline)", {"spec.budget": "8,16,32"}) is None
        for job_dir, doc in trials:
            assert down.log_trial(doc, job_dir, parent_run_id=down.parent_for(sweep_dir)) is None
        down.end_parent(sweep_dir, "FINISHED")
    assert time.monotonic() - t0 < 15, "a down tracking server must not hold the sweep"
    warnings = [r for r in caplog.records if r.name == "sweep.record.tracking" and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "unreachable" in warnings[0].getMessage()
    for job_dir, _ in trials:
        assert read(job_dir)["mlflow"]["synced"] is False
    record = json.loads((sweep_dir / "mlflow_parent.json").read_text())
    assert record["run_id"] is None and record["ended"] is True

    # Sync to the URI the sweep recorded, still down: nothing uploaded, exit 1, files untouched.
    assert sync.main([str(root), "--recorded-uri"]) == 1
    assert all(read(job_dir)["mlflow"]["synced"] is False for job_dir, _ in trials)

    # The server is reachable now (here: another URI, the current one); sync goes there by
    # default, not to the dead recorded one, and uploads exactly once.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    assert sync.main([str(root)]) == 0
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    _check_issue_sweep(mlflow_server, "down-sync")
    ids = {r.info.run_id for r in _runs(mlflow_server, "down-sync")}
    for job_dir, _ in trials:
        mlf = read(job_dir)["mlflow"]
        assert mlf["synced"] is True and mlf["run_id"] in ids and mlf["tracking_uri"] == mlflow_server

    # Second sync: nothing new. Even a result whose write-back was lost is found by its tag.
    job_dir = trials[0][0]
    doc = read(job_dir)
    doc["mlflow"] = {"run_id": None, "synced": False}
    (job_dir / "result.json").write_text(json.dumps(doc))
    capsys.readouterr()
    assert sync.main([str(root), "--tracking-uri", mlflow_server]) == 0
    assert "0 uploaded, 1 linked to existing runs, 2 already in MLflow" in capsys.readouterr().err
    assert {r.info.run_id for r in _runs(mlflow_server, "down-sync")} == ids
    assert read(job_dir)["mlflow"]["synced"] is True
    assert sync.main([str(root), "--tracking-uri", mlflow_server]) == 0
    assert "0 uploaded, 0 linked to existing runs, 3 already in MLflow" in capsys.readouterr().err
    assert {r.info.run_id for r in _runs(mlflow_server, "down-sync")} == ids

    # The report over MLflow: every trial, the failures, the best feasible one, plots.
    monkeypatch.setenv("COLUMNS", "250")
    plots = tmp_path / "plots"
    assert report.main(["--tracking-uri", mlflow_server, "--experiment", "down-sync",
                        "--sweep-id", "13-00-00", "--hardware", "b300", "--plots", str(plots), "--full-names"]) == 0
    out = capsys.readouterr().out
    for budget in (8, 16, 32):
        assert f"b300-ddtree-b{budget}-t4-w2048" in out  # the full names under the table (its rows: b8, b16, b32)
    assert "★" in out and "cuda_graph" in out and "2.20x" in out
    assert (plots / "throughput_vs_budget.png").stat().st_size > 1000
    assert (plots / "pareto_per_stream_vs_aggregate.png").stat().st_size > 1000
    assert list(plots.glob("trials/b300-ddtree-b8-t4-w2048*/throughput_vs_concurrency.png"))

    # --sweep-id takes the parent run's name as the UI shows it
    assert report.main(["--tracking-uri", mlflow_server, "--experiment", "down-sync",
                        "--sweep-id", "b300 budget sweep (offline)", "--format", "csv"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 1 + 3

    # ... and straight from the files (MLflow not needed).
    assert report.main(["--dir", str(root), "--spec", "ddtree", "--full-names"]) == 0
    assert "b300-ddtree-b16-t4-w2048" in capsys.readouterr().out
