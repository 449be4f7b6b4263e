"""What keeps recording a trial cheap, and that it changes nothing in what is recorded:
a fresh sqlite store built without per-commit fsyncs has MLflow's own schema;
params and metrics share batches within MLflow's limits; the experiment id is
looked up once per process (and again when the experiment was deleted);
plots come out byte for byte as ``savefig`` draws them."""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest
from result_docs import make_result, make_sweep

from sweep.record import _sqlite_store, tracking
from sweep.record.result import TrialResult
from sweep.report import plots
from sweep.record.tracking import Tracker
from sweep.report.mlflow_artifacts import trial_plots


def _schema(db: Path) -> tuple[list, list]:
    """Every table, index and trigger, and the schema revision. Clauses of a
    CREATE statement are compared as a set: MLflow's own batch migrations
    emit a table's CHECK constraints in hash-seed order."""
    con = sqlite3.connect(db)
    try:
        rows = con.execute("select type, name, tbl_name, sql from sqlite_master").fetchall()
        return (sorted((t, n, tbl, sorted(line.strip().rstrip(",") for line in (sql or "").splitlines()))
                       for t, n, tbl, sql in rows),
                con.execute("select version_num from alembic_version").fetchall())
    finally:
        con.close()


def test_fresh_store_has_mlflows_own_schema(tmp_path: Path) -> None:
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    fast = tmp_path / "fast" / "mlflow.db"
    assert _sqlite_store.prepare(f"sqlite:///{fast}") is True
    assert sorted(p.name for p in fast.parent.iterdir()) == ["mlflow.db"]  # no temporary left
    own = tmp_path / "own" / "mlflow.db"
    SqlAlchemyStore(f"sqlite:///{own}", (tmp_path / "own" / "mlruns").as_uri())
    assert _schema(fast) == _schema(own)
    assert _sqlite_store.prepare(f"sqlite:///{fast}") is False  # exists: left alone


def test_prepare_leaves_everything_else_to_mlflow(tmp_path: Path) -> None:
    existing = tmp_path / "existing.db"
    existing.write_bytes(b"not touched")
    assert _sqlite_store.prepare(f"sqlite:///{existing}") is False
    assert existing.read_bytes() == b"not touched"
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    assert _sqlite_store.prepare(f"sqlite:///{not_a_dir}/mlflow.db") is False  # never raises
    for uri in ("sqlite:///relative.db", "sqlite:///:memory:", f"sqlite:///{tmp_path}/q.db?timeout=5",
                "http://127.0.0.1:1", f"file://{tmp_path}/mlruns"):
        assert _sqlite_store.prepare(uri) is False, uri
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing.db", "file"]


def test_params_and_metrics_share_batches_within_mlflows_limits(tmp_path: Path) -> None:
    calls: list[tuple[list, list]] = []
    client = SimpleNamespace(log_batch=lambda run_id, metrics, params: calls.append((metrics, params)))
    t = Tracker({"tracking_uri": f"sqlite:///{tmp_path}/unused.db"})
    t._client, t._experiment_id = client, "0"
    params = {f"p{i}": str(i) for i in range(250)}
    metrics = [(f"m{i % 7}", float(i), i) for i in range(1500)]
    t.log_batch("run", params=params, metrics=metrics, timestamp=1)
    assert all(len(p) <= 100 and len(m) + len(p) <= 1000 for m, p in calls)
    assert [p.key for _, ps in calls for p in ps] == list(params)
    assert [(m.key, m.value, m.step) for ms, _ in calls for m in ms] == metrics
    assert len(calls) == 3  # 250 params need three requests; the metrics ride along


def test_experiment_looked_up_once_per_process_and_restored_after_deletion(
        tmp_path: Path, sqlite_uri: str, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    settings = {"tracking_uri": sqlite_uri, "experiment": "cached-id"}
    lookups = []
    real = tracking.ensure_experiment
    monkeypatch.setattr(tracking, "ensure_experiment", lambda *a: lookups.append(a) or real(*a))
    sweep_dir = tmp_path / "sweep"
    jobs = [make_result(sweep_dir, i, 8 * 2 ** i) for i in range(3)]
    first = Tracker(settings).log_trial(jobs[0][1], jobs[0][0], plots=trial_plots)
    second = Tracker(settings).log_trial(jobs[1][1], jobs[1][0], plots=trial_plots)  # a later job of a multirun
    assert first and second and len(lookups) == 1

    client = MlflowClient(tracking_uri=sqlite_uri)
    exp_id = client.get_experiment_by_name("cached-id").experiment_id
    client.delete_experiment(exp_id)
    with caplog.at_level(logging.WARNING, logger="sweep.record.tracking"):
        third = Tracker(settings).log_trial(jobs[2][1], jobs[2][0], plots=trial_plots)
    assert third and not [r for r in caplog.records if r.name == "sweep.record.tracking"]
    assert client.get_experiment(exp_id).lifecycle_stage == "active"
    assert client.get_run(third).info.experiment_id == exp_id and len(lookups) == 2


def test_plots_are_the_same_pngs_as_savefig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = [TrialResult.from_dict(doc) for _, doc in make_sweep(tmp_path / "sweep")]

    def digests(out: Path) -> list[str]:
        written = plots.trial_plots(docs[0], out / "trial") + plots.sweep_plots(docs, out / "sweep")
        return [hashlib.sha256(p.read_bytes()).hexdigest() for p in written]

    ours = digests(tmp_path / "agg")

    def savefig(fig, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
        return path

    monkeypatch.setattr(plots, "_save", savefig)
    assert len(ours) == 4 and ours == digests(tmp_path / "savefig")
