"""Real trials against the CPU engines (installed by `python -m sweep.engines llamacpp|vllm`).

``sweep_cli(*overrides)`` runs ``python -m sweep server=llamacpp`` as a user
would, in a subprocess, on a free port, with the tiny ``workload=llamacpp_ci``
and MLflow off unless asked; ``vllm_cli`` the same for ``server=vllm`` with
``workload=vllm_ci``; ``results(dir)`` reads the result.json files a run left,
in job order.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from _support import engine_env

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

import llamacpp_env  # noqa: E402
import vllm_env  # noqa: E402

# One thread: on a busy 2-core box (CI, or engineers sharing one) llama.cpp's threads
# spin at barriers while descheduled and 2 threads decode slower than 1.
BASE = ["server=llamacpp", "workload=llamacpp_ci", "server.threads=1"]
VLLM_BASE = ["server=vllm", "workload=vllm_ci"]


@pytest.fixture(autouse=True)
def _yield_the_cpu() -> Iterator[None]:
    """Each engine test (and the servers it starts) at nice 5: tests/_support/engine_env.py."""
    with engine_env.yielding_the_cpu():
        yield


@pytest.fixture(scope="session")
def engine() -> dict[str, Path]:
    return llamacpp_env.require()


@pytest.fixture(scope="session")
def vllm_engine() -> dict[str, Path]:
    return vllm_env.require()


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")  # hydra_plugins/
    e["PYTHONUNBUFFERED"] = "1"
    return e


def _runner(cwd: Path, base: list[str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(*overrides: str, mlflow: bool = False, timeout: float = 600,
            port: int | None = None, baseline: bool = False) -> subprocess.CompletedProcess[str]:
        flags = [o for o in overrides if o.startswith("-")]  # -m before the overrides (argparse)
        args = [*flags, *base, f"server.port={port or llamacpp_env.free_port()}",
                *(o for o in overrides if not o.startswith("-"))]
        if not mlflow:
            args.append("mlflow.enabled=false")
        if not baseline:  # a real engine runs its baseline first by default: tests ask for it
            args.append("baseline.auto_run=false")
        return subprocess.run([sys.executable, "-m", "sweep", *args], cwd=cwd, env=env(),
                              capture_output=True, text=True, timeout=timeout)

    return run


@pytest.fixture
def sweep_cli(tmp_path: Path, engine: dict[str, Path]) -> Callable[..., subprocess.CompletedProcess[str]]:
    return _runner(tmp_path, BASE)


@pytest.fixture
def vllm_cli(tmp_path: Path, vllm_engine: dict[str, Path]) -> Callable[..., subprocess.CompletedProcess[str]]:
    return _runner(tmp_path, VLLM_BASE)


def results(root: Path) -> list[dict[str, Any]]:
    docs = [json.loads(p.read_text()) for p in sorted(root.rglob("result.json"))]
    return sorted(docs, key=lambda d: d["trial"]["job_num"])


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
