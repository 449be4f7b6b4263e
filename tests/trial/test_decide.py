"""``python -m sweep.decide``: only the open verdicts' cells are measured again, and they pool.

A real grid on the simulator (two configs that differ only in an environment variable the
simulator ignores: two configs, one speed, so their verdict is open), then the command as a user
runs it: ``--dry-run`` names the open configs and
cells; a budget of two runs measures each open config once more at that cell only
(``workload.cells``), the runs land under ``<dir>/decide/`` as copies of the same configs, and
the report pools them (two measurements per row) -- or, when a config is decided, it is not run.
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


def test_decide_measures_only_open_cells_and_the_copies_pool(tmp_path: Path) -> None:
    grid = tmp_path / "grid"
    port = free_port()
    out = run(tmp_path, "-m", "sweep", "-m", *FAST, "+server.extra_env.SPECSWEEP_TEST_TAG=a,b",
              f"server.port={port}", f"hydra.sweep.dir={grid}")
    assert out.returncode == 0, out.stderr[-2000:]
    plan = run(tmp_path, "-m", "sweep.decide", "--dir", str(grid), "--dry-run", "--what", "report")
    assert plan.returncode == 0, plan.stderr
    would = [line for line in plan.stdout.splitlines() if line.startswith("would run")]
    assert len(would) == 2 and all("at ctx 60 x conc 2" in line for line in would), plan.stdout
    assert not list(grid.rglob("decide"))  # a dry run runs nothing
    done = run(tmp_path, "-m", "sweep.decide", "--dir", str(grid), "--what", "report", "--max-trials", "2",
               "mlflow.enabled=false", f"server.port={port}")
    assert done.returncode in (0, 3), done.stderr[-2000:]
    copies = sorted((grid / "decide").rglob("result.json"))
    assert 1 <= len(copies) <= 2
    for path in copies:
        doc = json.loads(path.read_text())
        assert doc["status"] == "ok" and "workload.cells=[[60,2]]" in doc["trial"]["overrides"]
        assert [(c["context"], c["concurrency"]) for c in doc["cells"]] == [(60, 2)]
        original = [json.loads(p.read_text()) for p in grid.glob("[0-9]/result.json")]
        assert doc["trial"]["config_id"] in {d["trial"]["config_id"] for d in original}
    rep = run(tmp_path, "-m", "sweep.report", "--dir", str(grid), "--format", "json")
    assert rep.returncode == 0, rep.stderr
    rows = json.loads(rep.stdout)["groups"][0]["rows"]
    assert len(rows) == 2 and max(r["repeats"] for r in rows) == 2
    if done.returncode == 3:
        assert "stay open" in done.stderr
