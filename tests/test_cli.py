"""The command line as a user meets it: exit codes and one-line errors."""

from __future__ import annotations

import subprocess
import sys

import pytest


def run(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sweep", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


@pytest.mark.parametrize("args, key", [
    (["spec.budget=0"], "spec.budget"),
    (["hardware=b301"], "hardware"),
    (["spec.topk=16"], "spec.topk"),
    (["-m", "spec.budget=8,0"], "spec.budget"),
    (["workload.concurrency=[0]"], "workload.concurrency[0]"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, key) -> None:
    out = run(*args, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {key}:"), out.stderr
    assert not (tmp_path / "multirun").exists()  # nothing ran, no job dirs


def test_cfg_job_shows_the_groups(tmp_path) -> None:
    out = run("--cfg", "job", cwd=tmp_path)
    assert out.returncode == 0
    for group in ("hardware:", "spec:", "model:", "server:", "launcher:", "workload:"):
        assert f"\n{group}" in "\n" + out.stdout


def test_cfg_job_is_resolved_with_secrets_masked(tmp_path) -> None:
    import os

    env = {**os.environ, "SPECSWEEP_API_KEY": "sk-cfg-job-canary-4711"}
    out = subprocess.run([sys.executable, "-m", "sweep", "--cfg", "job", "spec.budget=16"], capture_output=True,
                         text=True, cwd=tmp_path, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "${" not in out.stdout and f"- {sys.executable}" in out.stdout  # ${sweep.python:} resolved
    assert "--speculative-ddtree-budget: 16" in out.stdout
    assert "sk-cfg-job-canary-4711" not in out.stdout and "api_key: '***'" in out.stdout


def test_a_usage_error_is_one_line(tmp_path) -> None:
    """Hydra's parser printed its usage block and the error (twice, before the boundary took it):
    now one line naming the argument, as for every other bad input; --hydra-help lists the flags."""
    out = run("-m", "spec.budget=8,16", "--no-such-flag", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip() == ("error: --no-such-flag: is no argument this command takes "
                                  "(python -m sweep --hydra-help)"), out.stderr
    out = run("--cfg", "jobb", cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip().startswith("error: --cfg: invalid choice: 'jobb'"), out.stderr
    assert "--multirun" in run("--hydra-help", cwd=tmp_path).stdout  # where the flags are listed


def test_dry_run_leaves_no_job_dirs(tmp_path) -> None:
    assert run("dry_run=true", cwd=tmp_path).returncode == 0
    assert run("-m", "dry_run=true", "spec.budget=4,8", cwd=tmp_path).returncode == 0
    assert list(tmp_path.iterdir()) == []  # no outputs/, no multirun/, no empty app.log


def test_dry_run_ddtree_sglang(tmp_path) -> None:
    out = run("dry_run=true", "hardware=b300", "spec=ddtree", "server=sglang", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    last = out.stdout.strip().splitlines()[-1]
    assert "SGLANG_DDTREE_MAX_TOPK=4" in last
    assert "--speculative-algorithm DDTREE" in last and "--speculative-ddtree-budget 8" in last


def test_sweeper_plugin_is_found_outside_the_repo(tmp_path) -> None:
    """An editable install hides hydra_plugins from Hydra's scan; sweep.cli.plugins registers it."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-m", "sweep", "--info", "plugins"], capture_output=True,
                         text=True, cwd=tmp_path, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "SpecsweepOptunaSweeper" in out.stdout


def test_flags_may_come_after_overrides(tmp_path) -> None:
    """Hydra's parser takes the overrides as one run of words: ``workload=smoke -m spec.budget=4,8``
    answered "unrecognized arguments: spec.budget=4,8". The flags are moved first, nothing else."""
    from sweep.compose.cmdline import flags_first

    assert flags_first(["a=1", "-m", "b=2,3", "--cfg", "job", "-cd", "/x", "c=4", "--info", "d=5"]) == \
        ["-m", "--cfg", "job", "-cd", "/x", "--info", "a=1", "b=2,3", "c=4", "d=5"]
    assert flags_first(["a=1", "--info", "config", "--cfg=job", "-x", "b=2"]) == \
        ["--info", "config", "--cfg=job", "a=1", "-x", "b=2"]
    out = run("workload=smoke", "-m", "spec.budget=4,8", "dry_run=true", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("--speculative-ddtree-budget 4 ") == 1 and out.stdout.count("--speculative-ddtree-budget 8 ") == 1
