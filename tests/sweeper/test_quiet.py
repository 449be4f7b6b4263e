"""A search on the simulator as a person sees it: no library warnings, a command that fits,
no lock file left behind -- and what was kept off the screen is in the files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from _support import free_port
from sweep.report.long_command import on_screen

from .test_e2e import sweep_cli


@pytest.mark.slow
def test_search_prints_no_library_warning_and_a_short_command_and_leaves_no_lock(tmp_path: Path) -> None:
    proc = sweep_cli(
        "-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=2",
        "hydra.sweeper.storage=sqlite:///study.db",  # relative: the working directory, as in docs/search.md
        "workload=smoke", "server.sim.load_seconds=0.2", "mlflow.enabled=false",
        f"server.port={free_port()}", "hydra.sweep.dir=sweep", "hydra.sweeper.plots.enabled=false",
        cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    screen = proc.stdout + proc.stderr
    assert "ExperimentalWarning" not in screen and "warnings.warn" not in screen, screen[:2000]
    # kept for whoever upgrades Optuna: the sweep dir's log has it
    assert "ExperimentalWarning" in (tmp_path / "sweep" / "sweeper.log").read_text()
    # nothing but what the user asked for in the working directory, no lock in the sweep dir
    assert sorted(p.name for p in tmp_path.iterdir()) == ["study.db", "sweep"]
    assert not list((tmp_path / "sweep").glob("*lock*"))
    line = next(ln for ln in proc.stdout.splitlines() if "server command:" in ln)
    assert len(line) < 300, line
    assert line.endswith("in full in best.yaml)") and "--sim-model" not in line
    # the flags the two trials differ by are shown; the whole command is in best.yaml
    assert re.search(r"--speculative-ddtree-budget \d+", line), line
    best = (tmp_path / "sweep" / "best.yaml").read_text()
    assert "--sim-model" in best and "--speculative-ddtree-budget" in best


COMMAND = ("env SGLANG_DDTREE_MAX_TOPK=4 python -m sweep.sim --model-path m --tp-size 8 "
           "--speculative-ddtree-budget 8 --sim-hardware '" + '{"x": 1}' * 60 + "' --port 30000")


def test_a_long_command_shows_its_program_and_the_flags_that_differ() -> None:
    other = COMMAND.replace("budget 8", "budget 16")
    shown = on_screen(COMMAND, "best.yaml", [other], limit=200)
    assert shown == ("env SGLANG_DDTREE_MAX_TOPK=4 python -m sweep.sim ... --speculative-ddtree-budget 8"
                     f"  (the flags that differ; {len(COMMAND):,} chars in full in best.yaml)")
    alone = on_screen(COMMAND, "best.yaml", limit=200)  # nothing to compare: long values by size
    assert "--sim-hardware <480 chars>" in alone and alone.endswith("in full in best.yaml)")
    assert on_screen("python -m sweep.sim --port 1", "best.yaml") == "python -m sweep.sim --port 1"
