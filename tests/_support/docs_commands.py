"""A docs page's command, run as printed by a test that checks more of what it wrote than its exit.

tests/test_readme.py runs every command block of README.md and docs/*.md as written. A real
engine's block costs minutes of CPU, and its engine's own tests would otherwise run the same
sweeps again to look inside them: such a block is run once, by those tests, which read each
command from the page (so the page and the test cannot drift apart), run it the way
test_readme does and record its time in the same table; the block's readme-test comment names
them, and test_readme skips it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import readme_blocks
from _support import ROOT, engine_env


def env() -> dict[str, str]:
    """What a page's command runs with: ``python`` is this venv's, MLflow at its default (a
    ``./mlflow.db`` where the command runs), output unbuffered, a 160-column screen."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("MLFLOW_TRACKING_URI", None)
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "160"
    return env


def command(page: str, starts: str) -> readme_blocks.Command:
    """The one command of ``page`` (relative to the checkout) whose text starts with ``starts``."""
    found = [c for b in readme_blocks.blocks(ROOT / page, page) for c in b.commands if c.text.startswith(starts)]
    assert len(found) == 1, f"{page}: {len(found)} commands start with {starts!r}"
    return found[0]


def run(page: str, starts: str, cwd: Path, request: Any, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    """Run the page's (real engine's) command in ``cwd`` as tests/test_readme.py would, at the engines'
    niceness, and put its time in the suite's table of the pages' commands."""
    cmd = command(page, starts)
    t0 = time.monotonic()
    out = subprocess.run(["bash", "-c", cmd.text], cwd=cwd, env=env(), capture_output=True, text=True,
                         timeout=timeout, stdin=subprocess.DEVNULL,
                         preexec_fn=engine_env.yield_the_cpu)
    request.node.user_properties.append(
        ("readme_time", (f"{page}:{cmd.line}", cmd.text, time.monotonic() - t0, f"exit {out.returncode}")))
    return out
