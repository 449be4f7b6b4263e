"""Fixtures: a real MLflow sqlite store and a real ``mlflow server`` over HTTP.

The server is started once per session (its first start migrates a fresh
sqlite database, ~15 s), on a free loopback port, in its own process group,
and that group is stopped at teardown.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

from _support import free_port

# MLflow's usage telemetry would try the network; tests stay on loopback.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")

sys.path.insert(0, str(Path(__file__).resolve().parent))



@pytest.fixture(autouse=True)
def _fresh_warning_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees the first warning (and experiment lookup) of its own 'process'."""
    import sweep.record.tracking as tracking

    monkeypatch.setattr(tracking, "_warned", False)
    monkeypatch.setattr(tracking, "_experiment_ids", {})
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a live ``mlflow server`` (sqlite backend, proxied artifacts)."""
    from _support.services import mlflow_server as start_mlflow_server

    root = tmp_path_factory.mktemp("mlflow-server")
    with start_mlflow_server(f"sqlite:///{root / 'mlflow.db'}", root) as url:
        yield url


@pytest.fixture(scope="session")
def sqlite_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One migrated sqlite store for the session (tests use their own experiments)."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow-sqlite') / 'mlflow.db'}"


@pytest.fixture
def closed_port_uri() -> str:
    """An http URI nobody listens on: the tracking server is down."""
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture(scope="session")
def http_sweep(mlflow_server: str, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The issue's sweep (b300, budgets 8/16/32) logged once over HTTP, shared
    by the HTTP checks and the UI check (each upload costs ~20 requests)."""
    from result_docs import make_sweep

    from sweep.record.tracking import Tracker
    from sweep.report.mlflow_artifacts import sweep_artifacts, trial_plots

    sweep_dir = tmp_path_factory.mktemp("http-sweep") / "multirun" / "2026-01-01" / "12-00-00"
    trials = make_sweep(sweep_dir)
    tracker = Tracker({"enabled": True, "tracking_uri": mlflow_server, "experiment": "http-sweep"})
    parent = tracker.start_parent(sweep_dir, "b300 budget sweep", {"spec.budget": "8,16,32"})
    run_ids = [tracker.log_trial(doc, job_dir, parent_run_id=tracker.parent_for(sweep_dir), plots=trial_plots)
               for job_dir, doc in trials]
    tracker.end_parent(sweep_dir, artifacts=sweep_artifacts)
    return {"url": mlflow_server, "experiment": "http-sweep", "parent": parent, "run_ids": run_ids,
            "trials": trials, "sweep_dir": sweep_dir}
