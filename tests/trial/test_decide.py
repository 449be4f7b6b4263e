"""``python -m sweep.decide``: race the open levels; only contenders are measured again, and they pool.

A real grid on the simulator (two configs that differ only in the model's served name, which the
simulator's speed ignores: two configs, one speed, so their level is open), then the command as a
user runs it: ``--dry-run`` names the contenders and cells; a budget of two runs measures each once
more at that cell only (``workload.cells``), the runs land under ``<dir>/decide/<run>/round1/`` as
copies of the same configs, the report pools them, and the copies never become a config's
headline or its "run the best again". A second decide writes beside the first (nothing
overwritten); a config whose file sets launch plumbing (an environment variable) is not run from
the file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from _support import free_port

pytestmark = pytest.mark.slow

FAST = ["workload=smoke", "server.sim.load_seconds=0.2", "mlflow.enabled=false", "workload.coding=off"]


def run(cwd: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_decide_races_the_open_level_and_the_copies_pool(tmp_path: Path) -> None:
    grid = tmp_path / "grid"
    port = free_port()
    out = run(tmp_path, "-m", "sweep", "-m", *FAST, "model.served_name=a,b",
              f"server.port={port}", f"hydra.sweep.dir={grid}")
    assert out.returncode == 0, out.stderr[-2000:]
    plan = run(tmp_path, "-m", "sweep.decide", "--dir", str(grid), "--dry-run")
    assert plan.returncode == 0, plan.stderr
    would = [line for line in plan.stdout.splitlines() if line.startswith("would run")]
    if len(would) != 2:  # say what the level looked like (the schedule judges it with the same model)
        sched = run(tmp_path, "-m", "sweep.schedule", "--dir", str(grid), "--no-write")
        pytest.fail(f"{plan.stdout}\n{sched.stdout[-3000:]}\n{sched.stderr[-2000:]}")
    assert all("at ctx 60 x conc 2" in line for line in would), plan.stdout
    assert not list(grid.rglob("decide"))  # a dry run runs nothing
    from sweep.io import dirlock

    held = dirlock.acquire(grid / "decide")  # one decider per directory: a second is refused in one line
    try:
        busy = run(tmp_path, "-m", "sweep.decide", "--dir", str(grid), "--max-trials", "2", "mlflow.enabled=false")
    finally:
        held.release()
    assert busy.returncode == 2 and "in use" in busy.stderr and busy.stderr.count("\n") == 1, busy.stderr
    assert not list((grid / "decide").rglob("result.json"))
    for _ in range(2):  # twice: the second writes beside the first, never over it
        # margin 0: two copies of one config are never "equivalent", so the second run races too
        done = run(tmp_path, "-m", "sweep.decide", "--dir", str(grid), "--max-trials", "2", "--margin", "0",
                   "mlflow.enabled=false", f"server.port={port}")
        assert done.returncode in (0, 3), done.stderr[-2000:]
        assert "spent: 2 run(s)" in done.stdout and "verdicts changed" in done.stdout
    copies = sorted((grid / "decide").rglob("result.json"))
    assert len(copies) == 4 and len({p.parent.parent.parent for p in copies}) == 2
    original = [json.loads(p.read_text()) for p in grid.glob("[0-9]/result.json")]
    for path in copies:
        doc = json.loads(path.read_text())
        assert doc["status"] == "ok" and "workload.cells=[[60,2]]" in doc["trial"]["overrides"]
        assert [(c["context"], c["concurrency"]) for c in doc["cells"]] == [(60, 2)]
        assert doc["trial"]["config_id"] in {d["trial"]["config_id"] for d in original}
    rep = run(tmp_path, "-m", "sweep.report", "--dir", str(grid), "--format", "json")
    assert rep.returncode == 0, rep.stderr
    rows = json.loads(rep.stdout)["groups"][0]["rows"]
    assert len(rows) == 2 and max(r["repeats"] for r in rows) == 3
    # the copies pool into their cell only: the config's overrides are still its own grid job's
    from sweep.record.result import TrialResult
    from sweep.report.compare import build_groups

    docs = [TrialResult.load(p) for p in sorted(grid.rglob("result.json"))]
    [g] = build_groups(docs, [str(p) for p in sorted(grid.rglob("result.json"))])
    for r in g.rows:
        assert not any(o.startswith("workload.cells=") for o in r.doc.trial.overrides)


def test_decide_never_takes_launch_plumbing_from_a_file() -> None:
    """A copy's overrides give only its identity's knobs: an executable, an environment variable or a
    path from a result file is named (the config is not run from it), how it was reached is dropped."""
    from sweep.decide import identity_overrides

    kept, plumbing = identity_overrides([
        "spec=ddtree", "spec.budget=8", "workload=smoke", "+server.extra_env.LD_PRELOAD=/x.so",
        "server.executable=[/bin/sh,-c,touch /tmp/pwned]", "server.port=1", "workload.cells=[[1,1]]",
        "hydra.run.dir=/tmp/x", "model.path=/elsewhere", "server.api_key=***", "mlflow.enabled=false"])
    assert kept == ["spec=ddtree", "spec.budget=8", "workload=smoke"]
    assert set(plumbing) == {"server.extra_env.LD_PRELOAD", "server.executable", "model.path", "server.api_key"}


def test_decide_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    for args, key in ((["--dir", "/proc"], "--dir"), (["--dir", str(tmp_path), "spec.budgit=4"], "spec.budgit"),
                      (["--dir", str(tmp_path), "workload.cells=[[60,1]]"], "workload.cells"),
                      (["--dir", str(tmp_path), "--margin", "2"], "--margin")):
        out = run(tmp_path, "-m", "sweep.decide", *args)
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and key in out.stderr, (args, out.stderr)
