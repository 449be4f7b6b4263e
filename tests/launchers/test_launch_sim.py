"""The local launcher against the real simulator, started from the rendered command."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest
from launcher_helpers import free_port, pid_gone, settings

from launchers.base import LaunchFailure
from launchers.local import LocalLauncher, group_alive
from sweep.compose.config import TrialConfig
from sweep.compose.render import Launch

pytestmark = pytest.mark.slow


def compose(*overrides: str) -> tuple[TrialConfig, Launch]:
    """The typed config and rendered launch for ``python -m sweep <overrides>``."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    from sweep.compose.config import from_omegaconf
    from sweep.compose.render import render

    with initialize_config_module("sweep.conf", version_base="1.3"):
        cfg = hydra_compose("config", overrides=["mlflow.enabled=false", *overrides])
    trial = from_omegaconf(cfg)
    return trial, render(trial)


@pytest.fixture
def sim_launcher() -> Iterator[LocalLauncher]:
    lau = LocalLauncher(settings(ready_timeout_s=30.0, poll_interval_s=0.1, poll_max_s=1.0))
    try:
        yield lau
    finally:
        lau.stop()


def test_sim_ready_then_reused_and_restarted(sim_launcher: LocalLauncher, tmp_path: Path) -> None:
    port = free_port()
    base = [f"server.port={port}", "server.sim.load_seconds=0.5", "workload=smoke"]
    trial, launch = compose(*base)
    first = sim_launcher.ensure(launch, trial.server, tmp_path / "0")
    assert first.reused is False and first.startup_s >= 0.5
    assert httpx.get(f"{first.base_url}/health", trust_env=False).status_code == 200
    assert first.info, "server info (/get_server_info or /server_info) was not fetched"

    # a workload-only change renders the same command: the server is reused as is
    trial2, launch2 = compose(*base, "workload.max_tokens=32")
    assert launch2.fingerprint == launch.fingerprint
    t0 = time.monotonic()
    again = sim_launcher.ensure(launch2, trial2.server, tmp_path / "1")
    assert again.reused is True and again.pid == first.pid and again.startup_s == 0.0
    assert time.monotonic() - t0 < 1.0

    # a server-affecting change restarts it
    trial3, launch3 = compose(*base, "spec.budget=4")
    assert launch3.fingerprint != launch.fingerprint
    third = sim_launcher.ensure(launch3, trial3.server, tmp_path / "2")
    assert third.reused is False and third.pid != first.pid
    assert pid_gone(first.pid) and not group_alive(first.pid)
    sim_launcher.stop()
    assert pid_gone(third.pid) and not group_alive(third.pid)


def test_b300_budget_16_fails_with_cuda_graph(sim_launcher: LocalLauncher, tmp_path: Path) -> None:
    port = free_port()
    trial, launch = compose(f"server.port={port}", "server.sim.load_seconds=0.2",
                            "hardware=b300", "spec.budget=16")
    t0 = time.monotonic()
    with pytest.raises(LaunchFailure) as err:
        sim_launcher.ensure(launch, trial.server, tmp_path)
    assert time.monotonic() - t0 < 15
    assert err.value.reason == "cuda_graph"
    assert "Capture cuda graph failed" in err.value.log_tail
    assert "server.disable_cuda_graph=true" in err.value.message
    # a simulated failure is no SGLang bug: no "open an issue" text, and its tail says simulated
    tail = err.value.log_tail
    assert "sgl-project/sglang" not in tail and "open an issue" not in tail.lower()
    last = [ln for ln in tail.strip().splitlines() if not ln.startswith("===== specsweep")][-1]
    assert "simulated" in last and "cuda_graph" in last and "sm_103" in last, last
    # the workaround the log suggests is the current flag, not the deprecated one
    assert "--cuda-graph-backend-decode=disabled" in tail and "--disable-cuda-graph" not in tail
    assert not sim_launcher.alive()


def test_sim_api_key_never_written(sim_launcher: LocalLauncher, tmp_path: Path) -> None:
    port = free_port()
    secret = "sk-sim-secret-0042"
    trial, launch = compose(f"server.port={port}", "server.sim.load_seconds=0.2",
                            f"server.api_key={secret}")
    assert secret in launch.argv and secret in launch.secrets
    handle = sim_launcher.ensure(launch, trial.server, tmp_path)
    sim_launcher.stop()
    raw = (tmp_path / "server.log").read_bytes()
    assert secret.encode() not in raw
    assert b"--api-key" in raw and b"***" in raw
    assert secret not in repr(handle.info)


def test_stop_with_an_open_stream_does_not_wait_out_the_grace(tmp_path: Path) -> None:
    """An abandoned stream (an interrupted benchmark) must not hold the stop for stop_grace_s."""
    lau = LocalLauncher(settings(stop_grace_s=20.0))
    port = free_port()
    trial, launch = compose(f"server.port={port}", "server.sim.load_seconds=0.2")
    handle = lau.ensure(launch, trial.server, tmp_path)
    body = {"model": trial.model.served_name, "stream": True, "max_tokens": 20000,
            "ignore_eos": True, "messages": [{"role": "user", "content": "count to a million"}]}
    with httpx.Client(trust_env=False, timeout=10) as client:
        with client.stream("POST", f"{handle.base_url}/v1/chat/completions", json=body) as resp:
            assert resp.status_code == 200
            next(resp.iter_lines())  # streaming, and left open (an interrupted benchmark)
            t0 = time.monotonic()
            lau.stop()
            took = time.monotonic() - t0
    assert took < 8.0, f"stop waited {took:.1f} s"
    assert pid_gone(handle.pid) and not group_alive(handle.pid)
    assert "stopped (exit code -9)" not in (tmp_path / "server.log").read_text()
