"""Results a person can act on, end to end on the real simulator (``python -m sweep`` subprocesses).

* Ctrl-C mid-matrix keeps every finished cell in result.json, and the per-cell
  progress lines stream while the matrix runs when stderr is a pipe;
* a ``-m`` grid stopped by Ctrl-C resumes: the rerun skips the complete job
  (and the deterministic failure), runs the rest, and says so;
* the report on a directory mixing seed and smoke trials, with and without
  a baseline, prints separate groups and the speedups the trials computed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_trial_e2e import results, sim_pids, sweep

from _support import free_port
from sweep.report import __main__ as report

pytestmark = pytest.mark.slow
FAST = ["server.sim.load_seconds=0.2", "mlflow.enabled=false", "workload.coding=off"]


class Running:
    """``python -m sweep ...`` with stderr read line by line as it comes (a pipe, not a terminal)."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.lines: list[tuple[float, str]] = []
        self.proc = subprocess.Popen([sys.executable, "-u", "-m", "sweep", *args], cwd=cwd, text=True,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)

    def interrupt(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=90)
        self._reader.join(timeout=10)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _wait_for(what: str, check, timeout: float = 120.0, proc: Running | None = None):  # noqa: ANN001, ANN202
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        if proc is not None and proc.proc.poll() is not None:
            pytest.fail(f"the run ended before {what}: {proc.text()[-3000:]}")
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def _doc(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def test_ctrl_c_mid_matrix_keeps_finished_cells_and_progress_streams(tmp_path: Path) -> None:
    port = free_port()
    # three cells; the last (16 requests of 512 tokens) runs long enough to be interrupted
    run = Running(tmp_path, "workload=smoke", "workload.concurrency=[1,2,8]", "workload.max_tokens=512",
                  *FAST, f"server.port={port}", "hydra.run.dir=run")
    path = tmp_path / "run" / "result.json"
    try:
        two = _wait_for("two finished cells in result.json",
                        lambda: (d := _doc(path)) is not None and len(d["cells"]) >= 2 and d, proc=run)
        seen = _wait_for("the second cell's line", lambda: "cell 2/3" in (t := run.text()) and t, proc=run)
        code = run.interrupt()
    finally:
        run.kill()
    assert code != 0
    # the per-cell lines were on the pipe while the matrix ran, not at its end
    assert "cell 1/3  ctx     60 x conc 1" in seen and "cell 2/3  ctx     60 x conc 2" in seen, seen
    assert "cell 3/3" not in seen
    doc = _doc(path)
    assert doc is not None and doc["status"] == "interrupted", doc
    assert len(doc["cells"]) == 2 and doc["cells"] == two["cells"][:2]
    assert [c["concurrency"] for c in doc["cells"]] == [1, 2]
    assert doc["metrics"]["tok_s_lowc"] == doc["cells"][0]["output_tok_s"]
    assert doc["metrics"]["headline_concurrency"] == 1 and doc["metrics"]["tok_s_c1"] == doc["metrics"]["tok_s_lowc"]
    assert doc["server"]["info"].get("tokenizer_mode") == "auto"  # not a secret (issue 17, item 10)
    deadline = time.monotonic() + 15
    while sim_pids(port) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sim_pids(port) == []


def test_a_grid_stopped_by_ctrl_c_resumes(tmp_path: Path) -> None:
    port = free_port()
    sweep_dir = tmp_path / "grid"
    # job 0 ok, job 1 fails for a reason that repeats (cuda_graph on b300 above budget 8), job 2 interrupted
    args = ["-m", "spec.budget=4,16,8", "workload=smoke", "workload.max_tokens=1024", *FAST,
            f"server.port={port}", f"hydra.sweep.dir={sweep_dir}"]
    run = Running(tmp_path, *args)
    try:
        _wait_for("job 2's server", lambda: (d := _doc(sweep_dir / "2" / "result.json")) is not None
                  and d.get("server") and d["status"] == "running", timeout=240, proc=run)
        first = run.text()
        assert run.interrupt() != 0
    finally:
        run.kill()
    assert "[trial 1/3] spec.budget=4" in first and "[trial 3/3] spec.budget=8" in first
    assert "ETA" in first.split("[trial 2/3]")[1].splitlines()[0]
    # a trial that measured nothing is not told to run a baseline; the ok one without one is
    assert "baseline yet" in first.split("[trial 2/3]")[0]
    assert "baseline yet" not in first.split("[trial 2/3]")[1].split("[trial 3/3]")[0]
    before = {n: _doc(sweep_dir / str(n) / "result.json") for n in range(3)}
    assert [before[n]["status"] for n in range(3)] == ["ok", "failed", "interrupted"]

    again = sweep(tmp_path, *args, timeout=240)
    assert again.returncode == 0, again.stderr[-3000:]
    after = {n: _doc(sweep_dir / str(n) / "result.json") for n in range(3)}
    assert after[0] == before[0] and after[1] == before[1]  # not run again: the same files
    assert after[2]["status"] == "ok" and after[2]["trial"]["started"] != before[2]["trial"]["started"]
    out = again.stderr
    # (the name shows what the grid changed from workload=smoke: 1024 new tokens)
    assert "job 0 b300-ddtree-b4-t4-w2048-smoke-mt1024: skipped, complete (ok)" in out.replace("\n", " ")
    assert "job 1 b300-ddtree-b16-t4-w2048-smoke-mt1024: skipped, failed with cuda_graph" in out.replace("\n", " ")
    assert out.count("throughput matrix") == 1  # one trial ran
    # the skipped jobs still count in the sweep's table and report
    assert "3 trials in 1 group(s)" in " ".join(out.split()) and (sweep_dir / "report.html").is_file()

    # rerun_failed=true: the failed job runs again (and fails again); the complete ones are skipped
    third = sweep(tmp_path, *args, "resume.rerun_failed=true", timeout=240)
    assert third.returncode == 0, third.stderr[-3000:]
    final = {n: _doc(sweep_dir / str(n) / "result.json") for n in range(3)}
    assert final[0] == after[0] and final[2] == after[2]
    assert final[1]["status"] == "failed" and final[1]["trial"]["started"] != after[1]["trial"]["started"]
    assert sim_pids(port) == []


def test_report_on_seed_and_smoke_trials_groups_them_and_speedups_match_the_trials(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    seed = ["workload=seed", "workload.contexts=[60]", "workload.concurrency=[1,2]", "workload.max_tokens=64"]
    # the seed grid's dir is outside results.search_dirs: its ddtree job still finds the grid's baseline
    out = sweep(tmp_path, "-m", "spec=none,ddtree", *seed, *FAST, f"server.port={port}",
                f"hydra.sweep.dir={tmp_path / 'elsewhere' / 'seed'}")
    assert out.returncode == 0, out.stderr[-3000:]
    out = sweep(tmp_path, "-m", "spec.budget=4,8", "workload.max_tokens=32,48", "workload=smoke", *FAST,
                f"server.port={port}")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "no spec=none baseline yet" in out.stderr  # the trials say so themselves
    docs = {d["trial"]["name"]: d for d in results(tmp_path)}
    seed_part = "seed-ctx60-c1.2-mt64"  # what the command changed from workload=seed, in every name
    assert set(docs) == {f"b300-none-{seed_part}", f"b300-ddtree-b8-t4-w2048-{seed_part}",
                         *(f"b300-ddtree-b{b}-t4-w2048-smoke-mt{t}" for b in (4, 8) for t in (32, 48))}
    ddtree = docs[f"b300-ddtree-b8-t4-w2048-{seed_part}"]
    assert ddtree["speedup_vs_baseline"] is not None and ddtree["baseline"]["headline_concurrency"] == 1
    smoke = [d for name, d in docs.items() if name.endswith(("mt32", "mt48"))]
    assert all(d["speedup_vs_baseline"] is None and d["metrics"]["headline_concurrency"] == 2
               and d["metrics"]["tok_s_c1"] is None for d in smoke)

    assert report.main(["--dir", str(tmp_path), "--format", "json"]) == 0
    groups = json.loads(capsys.readouterr().out)["groups"]
    assert len(groups) == 3  # seed; smoke with 32 and with 48 new tokens: never ranked together
    by_trial = {r["trial"]: (g, r) for g in groups for r in g["rows"]}
    g, row = by_trial[f"b300-ddtree-b8-t4-w2048-{seed_part}"]
    assert {r["trial"] for r in g["rows"]} == {f"b300-none-{seed_part}", f"b300-ddtree-b8-t4-w2048-{seed_part}"}
    assert row["speedup_vs_baseline"] == pytest.approx(ddtree["speedup_vs_baseline"])
    assert row["speedup_baseline"] == f"b300-none-{seed_part}" and g["headline"] == "low-load tok/s (c1)"
    for name in (n for n in docs if n.endswith(("=32", "=48"))):
        g, row = by_trial[name]
        assert row["speedup_vs_baseline"] is None and g["headline"] == "low-load tok/s (c2)" and len(g["rows"]) == 2
    assert sim_pids(port) == []
