"""Startup and runtime faults of the real sim process: the text a real server
prints (what the launcher classifies on) and the exit status."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import httpx
import pytest

from _support import free_port

from sweep.sim.launch import render_overrides


def test_b300_budget_16_crashes_at_cuda_graph_capture(sim_server) -> None:
    sim = sim_server("hardware=b300", "spec.budget=16", wait=False)
    assert sim.wait_exit(20) != 0
    log = sim.log_text()
    assert "Capture cuda graph failed" in log and "RuntimeError: CUDA error" in log
    assert "The server is fired up" not in log


def test_b300_budget_16_runs_without_cuda_graphs_slower(sim_server) -> None:
    sim = sim_server("hardware=b300", "spec.budget=16", "server.disable_cuda_graph=true",
                     "server.sim.time_scale=0", "server.decode_log_interval=3")
    with httpx.Client(timeout=30, trust_env=False) as c:
        r = c.post(sim.base_url + "/v1/chat/completions",
                   json={"messages": [{"role": "user", "content": "x"}], "max_tokens": 64, "ignore_eos": True})
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 64
    assert "cuda graph: False" in sim.log_text()
    assert "Capture cuda graph begin" not in sim.log_text()


@pytest.mark.parametrize("kind, text", [
    ("oom", "torch.OutOfMemoryError: CUDA out of memory"),
    ("missing_module", "ModuleNotFoundError: No module named 'flash_attn.cute'"),
    ("python_headers", "fatal error: Python.h: No such file or directory"),
    ("cuda_graph", "Capture cuda graph failed"),
])
def test_requested_startup_faults(sim_server, kind: str, text: str) -> None:
    sim = sim_server("hardware=h200", f"server.sim.faults.startup={kind}", wait=False)
    assert sim.wait_exit(20) != 0
    assert text in sim.log_text()


def test_vision_tower_warmup_crash_unless_skipped(sim_server) -> None:
    sim = sim_server("hardware=h200", "server.skip_server_warmup=false", wait=False)
    assert sim.wait_exit(20) != 0
    assert "No module named 'flash_attn.cute'" in sim.log_text()


def test_hang_never_ready(sim_server) -> None:
    """Up and answering, never ready. (It slept 1.2 s and assumed the port was bound by then: on a
    loaded CI box the sim's start took longer and the test saw "connection refused".)"""
    sim = sim_server("server.sim.faults.startup=hang", wait=False)
    deadline = time.monotonic() + 60
    status = None
    while status is None and time.monotonic() < deadline:
        assert sim.proc.poll() is None, sim.log_text()
        try:
            status = httpx.get(sim.base_url + "/health", trust_env=False).status_code
        except httpx.TransportError:  # not bound yet
            time.sleep(0.1)
    assert status == 503
    time.sleep(1.5)  # past the simulated load time (server.sim.load_seconds): still not ready
    assert sim.proc.poll() is None
    assert httpx.get(sim.base_url + "/health", trust_env=False).status_code == 503


def test_slow_start_adds_load_time(sim_server) -> None:
    t0 = time.monotonic()
    sim_server("server.sim.faults.slow_start_seconds=1.0")
    assert time.monotonic() - t0 >= 1.1


def test_crash_after_requests(sim_server) -> None:
    sim = sim_server("server.sim.faults.crash_after_requests=2", "server.sim.time_scale=0")
    body = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 8}
    with httpx.Client(timeout=10, trust_env=False) as c:
        for _ in range(2):
            assert c.post(sim.base_url + "/v1/chat/completions", json=body).status_code == 200
        with pytest.raises(httpx.TransportError):
            c.post(sim.base_url + "/v1/chat/completions", json=body)
    assert sim.wait_exit(10) != 0
    assert "Scheduler hit an exception" in sim.log_text()


def test_wrong_answer_rate_one_breaks_the_code(sim_server) -> None:
    sim = sim_server("server.sim.faults.wrong_answer_rate=1.0", "server.sim.time_scale=0")
    prompt = "Write a Python function with exactly this signature:\n\ndef gcd(a: int, b: int) -> int:\n"
    with httpx.Client(timeout=10, trust_env=False) as c:
        text = c.post(sim.base_url + "/v1/chat/completions", json={
            "messages": [{"role": "user", "content": prompt}], "max_tokens": 512}).json()["choices"][0][
            "message"]["content"]
    ns: dict = {}
    exec(text.split("```python\n")[1].split("```")[0], ns)  # noqa: S102 - our own answer
    assert ns["gcd"](0, 0) != 0 or ns["gcd"](-12, 18) != 6


def test_port_in_use_fails_fast(tmp_path) -> None:
    port = free_port()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen(1)
        argv, env, _ = render_overrides(["server=sim", f"server.port={port}", "server.sim.load_seconds=0.2"])
        proc = subprocess.run(argv, env={**__import__("os").environ, **env}, capture_output=True, text=True,
                              timeout=30)
    assert proc.returncode != 0
    assert "address already in use" in proc.stderr


def test_unknown_flag_is_an_argparse_error() -> None:
    argv, env, _ = render_overrides(["server=sim", "server.extra_args=[--no-such-flag,1]"])
    proc = subprocess.run(argv, env={**__import__("os").environ, **env}, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in proc.stderr
    missing = subprocess.run([sys.executable, "-m", "sweep.sim"], capture_output=True, text=True, timeout=30)
    assert missing.returncode == 2 and "--model-path" in missing.stderr
