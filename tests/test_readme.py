"""Every command block of README.md and of every docs/*.md page runs as written, in order, from a fresh copy of the checkout.

What a new user types is what this runs: each block's commands (tests/readme_blocks.py
reads them and the ``<!-- readme-test: ... -->`` comment before a block) in a directory
that starts as a copy of the files git tracks -- a clone -- so a later block sees what an
earlier one left (``python -m sweep.report --dir multirun/`` reports the grid above it).
The unit that runs in order is a README section, or a whole docs page: under xdist each is
one group, in one worker, in a directory of its own (an engine's section or page joins
that engine's tests). Each command must exit as the block says (0 unless ``exit N``); a
transcript's shown output must appear in what it printed; no output may pass a simulated
failure off as SGLang's own (its "open an issue" text).

The time of every command is printed at the end of the test session (the pages say how
long each example takes; this is where those figures come from). Blocks that cannot run
here say why in their comment and show as skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

import llamacpp_env
import vllm_env
import readme_blocks
from _support import ROOT, docs_commands, engine_env

README = ROOT / "README.md"
# config-keys.md is generated from the key table (no commands); every other page's examples run
PAGES = [README, *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "config-keys.md")]
BLOCKS = [b for page in PAGES for b in readme_blocks.blocks(page, page.relative_to(ROOT).as_posix())]
# No output may dress a simulated server up as SGLang asking for bug reports.
NOT_IN_OUTPUT = ("sgl-project/sglang/issues", "Open an issue on GitHub")


@pytest.fixture(scope="session")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files a clone of this commit has (tracked, plus new files not yet committed).

    One per session (per xdist worker); each README section and docs page gets its own copy of
    it (:func:`_workdir`): other tests may run between two commands of a section, and the
    directory the first left must still be there for the next."""
    dest = tmp_path_factory.mktemp("readme") / "specsweep"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, listed):
        src = ROOT / name.decode()
        if src.is_file():
            (dest / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            (dest / name.decode()).write_bytes(src.read_bytes())
            (dest / name.decode()).chmod(src.stat().st_mode)
    link = ROOT / "sweep" / "conf"  # a development tree's own conf (an untracked link to ../conf): kept, so
    if link.is_symlink() and not (dest / "sweep" / "conf").exists():  # the copy composes its own configs
        (dest / "sweep" / "conf").symlink_to(os.readlink(link))
    return dest


def _workdir(checkout: Path, group: str) -> Path:
    """The section's (or page's) own copy of the checkout, made at its first command."""
    work = checkout.parent / "groups" / group / "specsweep"
    if not work.is_dir():
        shutil.copytree(checkout, work, symlinks=True)
    return work


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


# The reviewed skip list: the first command of every block of the README and the docs pages that
# is not run in CI. A new skip fails test_every_skip_is_reviewed until it is added here -- a skipped
# example is one nobody checks, so each needs a reason that CI truly cannot run it (a GPU, a remote
# box, a cluster, a server that never returns, a step CI itself already does, or an hour of CPU).
REVIEWED_SKIPS = (
    "python3 -m venv .venv",      # the install: .ci/run does it, into the venv the tests run in
    "bash .ci/run",               # CI itself
    "mlflow ui",                  # runs until Ctrl-C; tests/record/test_ui_chromium.py opens the pages
    "pip install -e '.[llamacpp]'",  # .ci/run installs the extras (a pip here would repoint the venv)
    "python -m sweep.engines vllm",  # .ci/run installs it; the block's grid and search are run as printed by
    # tests/engines/test_vllm_trials.py and test_vllm_search.py, which check what they wrote (minutes, once)
    "python -m sweep.calibrate multirun/",  # needs result files from a real GPU box
    "python -m sweep.calibrate -o sweep/sim/calibrations",  # rewrites the shipped calibrations
    "python -m sweep -m hydra/sweeper=optuna launcher=slurm hydra.sweeper.n_jobs=4",  # a GPU cluster's
    # partition, account, database and MLflow server (the test cluster runs the block before it)
    "python -m sweep.sync /shared/",  # a cluster's shared dir and MLflow server
    "python -m sweep -m spec.budget=4,8,16 hydra/launcher=submitit_slurm hydra.launcher.partition=gpu",  # a GPU cluster
    "python benchmarks/",          # benchmarks: minutes to hours of CPU, run on purpose (docs/*.md say how long)
    "python -m sweep.doctor launcher=ssh",  # a remote GPU box over SSH (tests/ssh/ run a real sshd)
    "python -m sweep -m hydra/sweeper=optuna launcher=ssh",  # real boxes over SSH and a PostgreSQL server
    "sudo apt-get install -y postgresql",  # setting up a database server on a machine
    "pip install 'mlflow>=3'",   # a tracking server on a machine of its own
    "python -m sweep -m hydra/sweeper=optuna 'launcher.hosts=[...]'",  # real boxes, their database server
    "optuna-dashboard",           # a web server that runs until Ctrl-C
    "python -m pytest",           # the suite runs these tests itself
    "C=",                          # the recorded simulated schedules: ~40 min of grids (docs/deployment.md)
    "python -m sweep.schedule --dir SWEEP_DIR --export vllm [",  # a template; tests/report/test_dynamic.py
    # runs these exports on real runs
    "dynamic vs best static:",     # what benchmarks/dynamic_sd.py prints, not a command
    "python -m sweep -m hydra/sweeper=optuna hydra/sweeper/space=",  # a template over the full matrix;
    # tests/sweeper/test_curve_objectives.py runs a per-load study on the simulator
    "python -m sweep server=vllm spec=ngram spec.budget=8 'spec.p",  # a full edit matrix on vLLM (hours);
    # tests/engines/test_vllm_dynamic.py runs a table from YAML on the real engine
    "python -m sweep.schedule --dir D --export vllm",  # a template (D: your measurement's dir)
    "python -m sweep.sim.predict --config-dir ~/myconf",  # reads the user's home; tests/sim/
    # test_twin_gpu_parts.py writes the page's two files to a stand-in home and runs the command as printed
)


def test_the_pages_have_blocks_and_every_skip_says_why() -> None:
    ran = [b for b in BLOCKS if not b.skip]
    assert len([b for b in ran if b.page == "README.md"]) >= 2, [b.id for b in BLOCKS]
    assert {b.page for b in ran} >= {"README.md", "docs/usage.md", "docs/search.md", "docs/deployment.md"}
    assert all(b.skip.strip() for b in BLOCKS if b.skip)


def test_every_skip_is_reviewed() -> None:
    unreviewed = [f"{b.where}: {b.commands[0].text[:60]!r} ({b.skip})" for b in BLOCKS
                  if b.skip and not b.commands[0].text.startswith(REVIEWED_SKIPS)]
    assert not unreviewed, "skipped blocks nobody reviewed (add them to REVIEWED_SKIPS " \
                           f"with why CI cannot run them): {unreviewed}"


def test_the_marker_convention_refuses_what_it_does_not_know(tmp_path: Path) -> None:
    """A misspelt directive or a skip without a reason is an error, not a silently run block."""
    for bad in ("<!-- readme-test: skip: -->", "<!-- readme-test: exits 2 -->", "<!-- readme-test: needs gpu -->"):
        (tmp_path / "R.md").write_text(f"# x\n\n{bad}\n\n    python -m sweep\n")
        with pytest.raises(readme_blocks.MarkerError, match="docs/R.md:3"):
            readme_blocks.blocks(tmp_path / "R.md", "docs/R.md")
    (tmp_path / "R.md").write_text("# x\n\n<!-- readme-test: exit 2; timeout 30 -->\n\n"
                                   "    $ python -m sweep spec=fast\n    error: spec: unknown\n\n"
                                   "```yaml\nnot: run\n```\n\n    a \\\n      b\n")
    first, second = readme_blocks.blocks(tmp_path / "R.md")
    assert (first.exit, first.timeout_s, first.commands[0].text) == (2, 30.0, "python -m sweep spec=fast")
    assert first.commands[0].expected == ["error: spec: unknown"]
    assert [c.text for c in second.commands] == ["a b"] and second.exit == 0


def _group(block: readme_blocks.Block) -> str:
    """Where a block runs in order: an engine's group, a README section, or a whole docs page."""
    engine = next((e for e in ("llamacpp", "vllm", "slurm") if e in block.needs), None)
    if engine is not None:
        return engine
    if block.page == "README.md":
        return "readme-" + block.slug
    return "docs-" + Path(block.page).stem.lower()


def _items() -> list[object]:
    """One test per command (each its own time limit), skipped as its block says."""
    items: list[object] = []
    for block in BLOCKS:
        for cmd in block.commands:
            # a README section's or a docs page's commands in one xdist worker, in order
            # (tests/conftest.py); an engine's with that engine's tests
            marks = [pytest.mark.timeout(block.timeout_s + 60), pytest.mark.xdist_group(_group(block))]
            if block.skip:
                marks.append(pytest.mark.skip(reason=f"{block.where}: {block.skip}"))
            page = "readme" if block.page == "README.md" else Path(block.page).stem.lower()
            items.append(pytest.param(block, cmd, marks=marks, id=f"{page}-L{cmd.line}-{block.slug}"))
    return items


@pytest.mark.slow
@pytest.mark.parametrize("block, cmd", _items())
def test_readme_command(block: readme_blocks.Block, cmd: readme_blocks.Command, checkout: Path,
                        request: pytest.FixtureRequest) -> None:
    if "llamacpp" in block.needs:
        llamacpp_env.require()
    if "vllm" in block.needs:
        vllm_env.require()
    env = docs_commands.env()
    if "slurm" in block.needs:
        env.update(_slurm_cluster().env)
    where = f"{block.page}:{cmd.line}"
    work = _workdir(checkout, _group(block))
    t0 = time.monotonic()
    try:
        out = subprocess.run(["bash", "-c", cmd.text], cwd=work, env=env, capture_output=True,
                             text=True, timeout=block.timeout_s, stdin=subprocess.DEVNULL,
                             preexec_fn=engine_env.yield_the_cpu if {"llamacpp", "vllm"} & set(block.needs)
                             else None)
    except subprocess.TimeoutExpired as exc:
        request.node.user_properties.append(  # conftest's summary table (also from xdist workers)
            ("readme_time", (where, cmd.text, time.monotonic() - t0, "timeout")))
        pytest.fail(f"{where}: `{cmd.text}` ran past {block.timeout_s:.0f} s\n{str(exc.stderr or '')[-3000:]}")
    took = time.monotonic() - t0
    both = out.stdout + out.stderr
    request.node.user_properties.append(("readme_time", (where, cmd.text, took, f"exit {out.returncode}")))
    assert out.returncode == block.exit, (
        f"{where}: `{cmd.text}` exited {out.returncode}, the page says {block.exit}\n"
        f"{out.stderr[-4000:]}\n{out.stdout[-2000:]}")
    missing = _in_order(cmd.expected, both)
    assert missing is None, f"{where}: `{cmd.text}` did not print {missing!r}:\n{both[-3000:]}"
    for text in NOT_IN_OUTPUT:
        assert text not in both, f"{where}: `{cmd.text}` printed {text!r}"
