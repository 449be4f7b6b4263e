"""The main job end to end: `python -m sweep` against the real simulator.

Every test runs the real CLI in a subprocess (Hydra, the local launcher, the
sim process over real HTTP, the harness, the sandboxed coding eval) and reads
what a user would read: result.json files and the processes left behind.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _support import free_port

pytestmark = pytest.mark.slow

FAST = ["workload=smoke", "server.sim.load_seconds=0.2", "mlflow.enabled=false"]



def sim_pids(port: int) -> list[int]:
    """Simulator processes listening (or meant to listen) on ``port``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [w.decode(errors="replace") for w in cmd]
        if "sweep.sim" in words and str(port) in words:
            try:
                state = (entry / "stat").read_text().split()[2]
            except OSError:
                continue
            if state != "Z":
                pids.append(int(entry.name))
    return pids


def sweep(tmp_path: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sweep", *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=timeout)


def results(root: Path) -> list[dict]:
    docs = [json.loads(p.read_text()) for p in sorted(root.rglob("result.json"))]
    return sorted(docs, key=lambda d: d["trial"]["job_num"])


def test_single_trial_smoke_passes_coding_and_leaves_no_process(tmp_path: Path) -> None:
    port = free_port()
    out = sweep(tmp_path, *FAST, f"server.port={port}")
    assert out.returncode == 0, out.stderr[-3000:]
    [doc] = results(tmp_path / "outputs")
    assert doc["status"] == "ok", doc.get("failure")
    assert doc["simulated"] is True
    assert doc["coding"]["passed"] == doc["coding"]["total"] == 5
    [cell] = doc["cells"]
    assert cell["context"] == 60 and cell["concurrency"] == 2 and cell["errors"] == 0
    assert cell["completion_tokens"] == cell["requests"] * 64  # from usage, ignore_eos
    assert cell["output_tok_s"] > 0 and cell["accept_len"] > 1.5
    assert doc["server"]["reused"] is False and doc["server"]["startup_s"] > 0
    assert doc["fingerprint"] and doc["command"].startswith("env SGLANG_DDTREE_MAX_TOPK=4 ")
    # smoke measures concurrency 2 only: the headline says so, tok_s_c1 stays empty
    assert doc["metrics"]["tok_s_lowc"] == cell["output_tok_s"] and doc["metrics"]["headline_concurrency"] == 2
    assert doc["metrics"]["tok_s_c1"] is None
    assert doc["trial"]["name"] == "b300-ddtree-b8-t4-w2048-smoke"
    assert doc["config"]["spec"]["budget"] == 8
    assert sim_pids(port) == []
    # one run, one report: report.html and the plots beside result.json, said at the end
    job_dir = Path(doc["trial"]["job_dir"])
    assert (job_dir / "report.html").is_file() and "b300-ddtree-b8-t4-w2048-smoke" in (
        job_dir / "report.html").read_text()
    plots = sorted(p.name for p in (job_dir / "plots").glob("*.png"))
    assert plots == ["latency_vs_concurrency.png", "throughput_vs_concurrency.png"]
    last = out.stderr.strip().splitlines()[-2:]
    assert last[0].startswith("report: ") and last[0].endswith("report.html"), last
    assert last[1].startswith("plots:  ") and "latency_vs_concurrency.png" in last[1], last
    assert (tmp_path / last[0].split(": ", 1)[1]).is_file()  # a path the user can paste, from where they ran
    # the coding eval's progress says its count once
    assert "coding eval (five): 5/5  all passed" in out.stderr and "5/5  5/5" not in out.stderr


def test_budget_grid_on_b300_fails_large_budgets_with_cuda_graph(tmp_path: Path) -> None:
    port = free_port()
    out = sweep(tmp_path, "-m", "hardware=b300", "spec.budget=8,16,32", *FAST, f"server.port={port}")
    assert out.returncode == 0, out.stderr[-3000:]
    docs = results(tmp_path / "multirun")
    assert [d["config"]["spec"]["budget"] for d in docs] == [8, 16, 32]
    assert [d["status"] for d in docs] == ["ok", "failed", "failed"]
    for d in docs[1:]:
        assert d["failure"]["reason"] == "cuda_graph"
        assert "graph" in d["failure"]["log_tail"].lower()
        assert "sgl-project/sglang" not in d["failure"]["log_tail"] and "is simulated" in d["failure"]["log_tail"]
    assert sim_pids(port) == []
    # the grid's report, plots and the command that runs its best config again
    sweep_dir = Path(docs[0]["trial"]["sweep_dir"])
    assert (sweep_dir / "report.html").is_file()
    assert {p.name for p in (sweep_dir / "plots").glob("*.png")} >= {"pareto_per_stream_vs_aggregate.png"}
    rerun = [ln for ln in out.stderr.splitlines() if ln.startswith("run the best again: ")]
    assert rerun and "python -m sweep " in rerun[0] and "spec.budget=8" in rerun[0], out.stderr[-2000:]
    assert "python -m sweep " in (sweep_dir / "report.html").read_text()
    tail = out.stderr.strip().splitlines()
    assert tail[-2].startswith("report: ") and tail[-1].startswith("plots:  "), tail[-3:]


def test_baseline_auto_run_runs_the_baseline_first_and_the_single_report_shows_both(tmp_path: Path) -> None:
    port = free_port()
    out = sweep(tmp_path, *FAST, "workload.coding=off", "spec.budget=4", "baseline.auto_run=true",
                f"server.port={port}")
    assert out.returncode == 0, out.stderr[-3000:]
    docs = results(tmp_path / "outputs")
    [base] = [d for d in docs if d["config"]["spec"]["algorithm"] == "none"]
    [spec] = [d for d in docs if d["config"]["spec"]["algorithm"] == "ddtree"]
    assert base["status"] == spec["status"] == "ok"
    assert Path(base["trial"]["job_dir"]) == Path(spec["trial"]["job_dir"]) / "baseline"
    assert "spec=none" in base["trial"]["overrides"] and "spec.budget=4" not in base["trial"]["overrides"]
    assert spec["speedup_vs_baseline"] == pytest.approx(
        spec["metrics"]["tok_s_lowc"] / base["metrics"]["tok_s_lowc"], rel=1e-3)
    report = (Path(spec["trial"]["job_dir"]) / "report.html").read_text()
    # both trials, and the speedup beside the trial (which of the two is best depends on the box's load)
    assert base["trial"]["name"] in report and spec["trial"]["name"] in report
    assert f"{spec['speedup_vs_baseline']:.2f}×" in report
    assert sim_pids(port) == []


def test_workload_only_multirun_starts_the_server_once(tmp_path: Path) -> None:
    port = free_port()
    out = sweep(tmp_path, "-m", "workload.max_tokens=32,64", *FAST, f"server.port={port}")
    assert out.returncode == 0, out.stderr[-3000:]
    docs = results(tmp_path / "multirun")
    assert [d["status"] for d in docs] == ["ok", "ok"]
    assert [d["server"]["reused"] for d in docs] == [False, True]
    assert docs[0]["fingerprint"] == docs[1]["fingerprint"]
    assert [d["cells"][0]["completion_tokens"] / d["cells"][0]["requests"] for d in docs] == [32, 64]
    assert sim_pids(port) == []


def test_server_affecting_change_restarts(tmp_path: Path) -> None:
    port = free_port()
    out = sweep(tmp_path, "-m", "spec.topk=2,4", *FAST, "workload.coding=off", f"server.port={port}")
    assert out.returncode == 0, out.stderr[-3000:]
    docs = results(tmp_path / "multirun")
    assert [d["server"]["reused"] for d in docs] == [False, False]
    assert docs[0]["fingerprint"] != docs[1]["fingerprint"]


def test_port_already_taken_is_a_failed_trial(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = sweep(tmp_path, *FAST, f"server.port={port}")
    assert out.returncode == 1, out.stderr[-3000:]  # a single run whose trial failed (sweep/cli/app.py)
    [doc] = results(tmp_path / "outputs")
    assert doc["status"] == "failed" and doc["failure"]["reason"] == "port_in_use"
    assert "Traceback" not in out.stderr


def test_ctrl_c_writes_interrupted_and_stops_the_server(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweep", "workload=seed", "workload.coding=off",
         "server.sim.load_seconds=0.2", "mlflow.enabled=false", f"server.port={port}"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = list((tmp_path / "outputs").rglob("result.json")) if (tmp_path / "outputs").exists() else []
            if found and json.loads(found[0].read_text()).get("server"):
                break
            time.sleep(0.2)
        else:
            pytest.fail("the trial never got its server up")
        time.sleep(1.0)  # benchmark under way
        assert sim_pids(port), "the simulator should be running mid-trial"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    [path] = list((tmp_path / "outputs").rglob("result.json"))
    doc = json.loads(path.read_text())
    assert doc["status"] == "interrupted"
    deadline = time.monotonic() + 10
    while sim_pids(port) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sim_pids(port) == []


def test_one_accept_length_the_client_and_the_server_log_agree(tmp_path: Path) -> None:
    """Accept length is tokens per verify step, the bonus token in and the prefill's first token out,
    over the matrix's window: the client's figure (from each request's counters) and the server's own
    log line (SGLang's ``Decode batch ... accept len``, batches weighted by their size) measure the
    same thing, so they agree -- at several loads, and with the coding eval (whose answers accept
    otherwise) outside the window. The simulator's log is the SGLang format; the twin did not tune it."""
    port = free_port()
    out = sweep(tmp_path, *FAST, f"server.port={port}", "workload.concurrency=[1,8]",
                "workload.max_tokens=128", "server.decode_log_interval=5", "server.sim.time_scale=0.3")
    assert out.returncode == 0, out.stderr[-2000:]
    [doc] = results(tmp_path)
    acc = doc["accept_len"]
    assert acc["requests"] is not None and acc["log"] is not None and acc["log_samples"] >= 3
    assert acc["log"] == pytest.approx(acc["requests"], rel=0.04), acc
    printed = out.stdout + out.stderr
    assert "tokens per verify step" in printed and "server log" in printed
