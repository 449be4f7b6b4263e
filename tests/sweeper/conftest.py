"""Run the sweeper's test app (tests/sweeper/speed_app) as a real Hydra multirun subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from _support import ROOT, subprocess_env  # noqa: F401 - ROOT: the sweeper tests import it from here

APP = Path(__file__).with_name("speed_app") / "speed_app.py"
SPACE = ["spec.budget=choice(4,6,8,12,16,24,32)", "spec.topk=choice(1,2,4,8)",
         "spec.window=choice(512,1024,2048,4096)"]


def env() -> dict[str, str]:
    """PYTHONPATH=repo root: Hydra discovers hydra_plugins/ through sys.path (the editable
    install's import hook hides namespace packages from pkgutil)."""
    return subprocess_env()


def app_argv(sweep_dir: Path, storage: str, *overrides: str) -> list[str]:
    return [sys.executable, str(APP), "-m", "hydra/sweeper=optuna", f"hydra.sweep.dir={sweep_dir}",
            f"hydra.sweeper.storage='{storage}'", "hydra.sweeper.plots.enabled=false", *overrides]


@pytest.fixture
def run_app(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """run_app(*overrides, storage=..., check=True): one sweep of the test app in tmp_path."""

    def run(*overrides: str, storage: str | None = None, check: bool = True,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        storage = storage or f"sqlite:///{tmp_path}/study.db"
        proc = subprocess.run(app_argv(tmp_path / "sweep", storage, *overrides), cwd=tmp_path,
                              env=env(), capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    return run


def load(storage: str, name: str = "speed_app") -> Any:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if storage.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend, JournalStorage

        return optuna.load_study(study_name=name,
                                 storage=JournalStorage(JournalFileBackend(storage[8:])))
    return optuna.load_study(study_name=name, storage=storage)
