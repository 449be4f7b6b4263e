"""``python -m sweep.sync --tracking-uri`` uploads to the store it names, even results already
synced to another (a local sqlite store first, the team's server later), and refuses a URI
no MLflow store answers to in one line before touching anything. Real MLflow sqlite stores."""

from __future__ import annotations

from pathlib import Path

import pytest
from result_docs import make_sweep, read

from sweep import sync


def _run_ids(uri: str) -> set[str]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exps = client.search_experiments()
    return {r.info.run_id for e in exps for r in client.search_runs([e.experiment_id], max_results=100)}


def test_sync_to_another_store_uploads_what_the_first_already_has(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "multirun"
    trials = make_sweep(root / "2026-01-01" / "13-00-00", experiment="two-stores")
    first, second = f"sqlite:///{tmp_path}/first.db", f"sqlite:///{tmp_path}/second.db"
    assert sync.main([str(root), "--tracking-uri", first]) == 0
    assert "3 uploaded" in capsys.readouterr().err
    in_first = _run_ids(first)
    assert sync.main([str(root), "--tracking-uri", first]) == 0
    assert "3 already in MLflow" in capsys.readouterr().err
    # another store: the results are not there yet, whatever result.json says about the first
    assert sync.main([str(root), "--tracking-uri", second]) == 0
    assert "3 uploaded" in capsys.readouterr().err
    assert len(_run_ids(second)) == len(in_first) == 4  # three trials and their parent
    assert all(read(job_dir)["mlflow"]["tracking_uri"] == second for job_dir, _ in trials)
    # back to the first: found there by their tags, nothing duplicated
    assert sync.main([str(root), "--tracking-uri", first]) == 0
    assert "0 uploaded, 3 linked to existing runs" in capsys.readouterr().err
    assert _run_ids(first) == in_first


@pytest.mark.parametrize("uri", ["notascheme://x", "postgres://u:pw@h/db", "http://", "sqlite://rel.db"])
def test_sync_refuses_a_uri_no_mlflow_store_takes_in_one_line(tmp_path: Path, uri: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "multirun"
    trials = make_sweep(root / "2026-01-01" / "13-00-00", experiment="bad-uri")
    assert sync.main([str(root), "--tracking-uri", uri]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("error: --tracking-uri:"), err
    assert "pw" not in err[0]
    assert all(read(job_dir)["mlflow"]["synced"] is False for job_dir, _ in trials)
