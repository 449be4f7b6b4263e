"""The study in a real PostgreSQL (a throwaway cluster), resumed across runs."""

from __future__ import annotations

from typing import Iterator

import pytest
from _support.services import postgres_cluster

from .conftest import load


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL cluster with a database for the study."""
    with postgres_cluster() as cluster:
        yield cluster.create_database("optuna")


def test_postgresql_storage_resumes(run_app, postgres_url: str) -> None:
    run_app("hydra.sweeper.n_trials=2", storage=postgres_url)
    run_app("hydra.sweeper.n_trials=3", storage=postgres_url)
    study = load(postgres_url)
    assert len(study.trials) == 3 and all(t.state.is_finished() for t in study.trials)
    assert study.trials[0].params == {"spec.budget": 8, "spec.topk": 4, "spec.window": 2048}
