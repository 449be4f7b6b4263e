"""Every command block of README.md runs as written, in order, from a fresh copy of the checkout.

What a new user types is what this runs: each block's commands (tests/readme_blocks.py
reads them and the ``<!-- readme-test: ... -->`` comment before a block) in one
directory that starts as a copy of the files git tracks -- a clone -- so a later
block of a section sees what an earlier one left (``python -m sweep.report --dir
multirun/`` reports the grid above it). Under xdist each section is one group, in
order, in its worker's copy (an engine's section joins that engine's tests). Each
command must exit as the block says (0 unless ``exit N``); a transcript's shown
output must appear in what it printed; no output may pass a simulated failure off
as SGLang's own (its "open an issue" text).

The time of every command is printed at the end of the test session (the README
says how long each example takes; this is where those figures come from).
Blocks that cannot run here say why in their comment and show as skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any
from pathlib import Path

import pytest

import llamacpp_env
import vllm_env
import readme_blocks
from _support import ROOT, engine_env

README = ROOT / "README.md"
BLOCKS = readme_blocks.blocks(README)
# No output may dress a simulated server up as SGLang asking for bug reports.
NOT_IN_OUTPUT = ("sgl-project/sglang/issues", "Open an issue on GitHub")


@pytest.fixture(scope="session")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files a clone of this commit has (tracked, plus new files not yet committed).

    One per session (per xdist worker): other tests may run between two commands of a
    section, and the directory the first left must still be there for the next."""
    dest = tmp_path_factory.mktemp("readme") / "specsweep"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, listed):
        src = ROOT / name.decode()
        if src.is_file():
            (dest / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            (dest / name.decode()).write_bytes(src.read_bytes())
            (dest / name.decode()).chmod(src.stat().st_mode)
    return dest


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")  # `python` is ours
    env.pop("MLFLOW_TRACKING_URI", None)  # the README's default: sqlite:///mlflow.db where you run it
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "160"
    return env


def _slurm_cluster() -> Any:
    """The test SLURM cluster (started or reused), or skip (fail under CI) without SLURM."""
    from _support.slurm_cluster import missing, start

    gone = missing()
    if gone:
        if os.environ.get("CI"):
            pytest.fail(f"SLURM is not installed ({', '.join(gone)}): .ci/run installs it")
        pytest.skip(f"SLURM not installed ({', '.join(gone)})")
    return start()


def _in_order(expected: list[str], output: str) -> str | None:
    """The first expected line not found (in order, spaces normalised); None when all are."""
    text = " ".join(output.split())
    at = 0
    for line in expected:
        want = " ".join(line.split())
        found = text.find(want, at)
        if found < 0:
            return line
        at = found + len(want)
    return None


# The reviewed skip list: the first command of every README block that is not run in CI. A new
# skip fails test_every_skip_is_reviewed until it is added here -- a skipped example is one nobody
# checks, so each needs a reason that CI truly cannot run it (a GPU, a remote box, a cluster, a
# server that never returns, or a step CI itself already does).
REVIEWED_SKIPS = (
    "python3 -m venv .venv",      # the install: .ci/run does it, into the venv the tests run in
    "bash .ci/run",               # CI itself
    "mlflow ui",                  # runs until Ctrl-C; tests/record/test_ui_chromium.py opens the pages
    "pip install -e '.[llamacpp]'",  # .ci/run installs the extras (a pip here would repoint the venv)
    "python -m sweep.calibrate",  # needs result files from a real GPU box
    "python -m sweep -m hydra/sweeper=optuna launcher=slurm hydra.sweeper.n_jobs=4",  # a GPU cluster's
    # partition, account, database and MLflow server (the test cluster runs the block before it)
)


def test_the_readme_has_blocks_and_every_skip_says_why() -> None:
    ran = [b for b in BLOCKS if not b.skip]
    assert len(ran) >= 5, [b.id for b in BLOCKS]
    assert all(b.skip.strip() for b in BLOCKS if b.skip)


def test_every_skip_is_reviewed() -> None:
    unreviewed = [f"README.md:{b.line}: {b.commands[0].text[:60]!r} ({b.skip})" for b in BLOCKS
                  if b.skip and not b.commands[0].text.startswith(REVIEWED_SKIPS)]
    assert not unreviewed, "skipped README blocks nobody reviewed (add them to REVIEWED_SKIPS " \
                           f"with why CI cannot run them): {unreviewed}"


def test_the_marker_convention_refuses_what_it_does_not_know(tmp_path: Path) -> None:
    """A misspelt directive or a skip without a reason is an error, not a silently run block."""
    for bad in ("<!-- readme-test: skip: -->", "<!-- readme-test: exits 2 -->", "<!-- readme-test: needs gpu -->"):
        (tmp_path / "R.md").write_text(f"# x\n\n{bad}\n\n    python -m sweep\n")
        with pytest.raises(readme_blocks.MarkerError):
            readme_blocks.blocks(tmp_path / "R.md")
    (tmp_path / "R.md").write_text("# x\n\n<!-- readme-test: exit 2; timeout 30 -->\n\n"
                                   "    $ python -m sweep spec=fast\n    error: spec: unknown\n\n"
                                   "```yaml\nnot: run\n```\n\n    a \\\n      b\n")
    first, second = readme_blocks.blocks(tmp_path / "R.md")
    assert (first.exit, first.timeout_s, first.commands[0].text) == (2, 30.0, "python -m sweep spec=fast")
    assert first.commands[0].expected == ["error: spec: unknown"]
    assert [c.text for c in second.commands] == ["a b"] and second.exit == 0


def _items() -> list[object]:
    """One test per command (each its own time limit), skipped as its block says."""
    items: list[object] = []
    for block in BLOCKS:
        for cmd in block.commands:
            # a section's commands in one xdist worker, in order (tests/conftest.py); an engine's
            # section with that engine's tests
            group = next((e for e in ("llamacpp", "vllm", "slurm") if e in block.needs),
                         "readme-" + block.id.split("-", 1)[1])
            marks = [pytest.mark.timeout(block.timeout_s + 60), pytest.mark.xdist_group(group)]
            if block.skip:
                marks.append(pytest.mark.skip(reason=f"README.md:{block.line}: {block.skip}"))
            items.append(pytest.param(block, cmd, marks=marks, id=f"L{cmd.line}-{block.id.split('-', 1)[1]}"))
    return items


@pytest.mark.slow
@pytest.mark.parametrize("block, cmd", _items())
def test_readme_command(block: readme_blocks.Block, cmd: readme_blocks.Command, checkout: Path,
                        request: pytest.FixtureRequest) -> None:
    if "llamacpp" in block.needs:
        llamacpp_env.require()
    if "vllm" in block.needs:
        vllm_env.require()
    env = _env()
    if "slurm" in block.needs:
        env.update(_slurm_cluster().env)
    t0 = time.monotonic()
    try:
        out = subprocess.run(["bash", "-c", cmd.text], cwd=checkout, env=env, capture_output=True,
                             text=True, timeout=block.timeout_s, stdin=subprocess.DEVNULL,
                             preexec_fn=engine_env.yield_the_cpu if {"llamacpp", "vllm"} & set(block.needs)
                             else None)
    except subprocess.TimeoutExpired as exc:
        request.node.user_properties.append(  # conftest's summary table (also from xdist workers)
            ("readme_time", (cmd.line, cmd.text, time.monotonic() - t0, "timeout")))
        pytest.fail(f"README.md:{cmd.line}: `{cmd.text}` ran past {block.timeout_s:.0f} s\n"
                    f"{str(exc.stderr or '')[-3000:]}")
    took = time.monotonic() - t0
    both = out.stdout + out.stderr
    request.node.user_properties.append(("readme_time", (cmd.line, cmd.text, took, f"exit {out.returncode}")))
    assert out.returncode == block.exit, (
        f"README.md:{cmd.line}: `{cmd.text}` exited {out.returncode}, the README says {block.exit}\n"
        f"{out.stderr[-4000:]}\n{out.stdout[-2000:]}")
    missing = _in_order(cmd.expected, both)
    assert missing is None, f"README.md:{cmd.line}: `{cmd.text}` did not print {missing!r}:\n{both[-3000:]}"
    for text in NOT_IN_OUTPUT:
        assert text not in both, f"README.md:{cmd.line}: `{cmd.text}` printed {text!r}"
