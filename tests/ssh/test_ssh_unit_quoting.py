"""The unit writer vs systemd's quoting rules (the stand-in's independent parser, and
``systemd-analyze verify`` where it exists)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import standin_unitfile as sd

from launchers._ssh_unit import check_launch, env_file, exec_line, render_unit
from launchers.base import LaunchFailure
from sweep.compose.render import Launch

NASTY = [
    "plain", "two words", "", "tab\there", 'double"quote', "single'quote", "back\\slash",
    "trailing\\", "100%", "%n%h%%", "$HOME", "${HOME}", "$$", "cost: $5", ";", "a;b", "\\;",
    '{"name":"b300","quirks":{"budget":8}}', "ünïcödé ✓", "--flag=x y", "#not-a-comment",
    "'", '"', "-dash", "@at", "ctrl\x01char", "bell\x07",
]


def _parse_exec(line: str, env: dict[str, str] | None = None) -> list[str]:
    return sd.expand_env(sd.parse_exec(line), env or {})


@pytest.mark.parametrize("word", NASTY)
def test_each_word_round_trips_through_systemds_rules(word: str) -> None:
    line = exec_line(["/usr/bin/env", word, "end"])
    assert _parse_exec(line) == ["/usr/bin/env", word, "end"]


def test_secrets_become_variables_from_a_0600_env_file() -> None:
    launch = Launch(executable=("/usr/bin/python3",), args=("--api-key", "sk-It's$ecret%1", "--x", "pre-sk-It's$ecret%1"),
                    env={"A": "1"}, secrets=frozenset({"sk-It's$ecret%1"}))
    unit, secret_vars = render_unit(launch, name="t.service", description="d", workdir="/tmp",
                                    stop_grace_s=5, env_file_path="/tmp/t.env")
    assert "sk-It" not in unit and "${SPECSWEEP_SECRET_0}" in unit
    env = sd.parse_env_file(env_file(secret_vars))
    line = next(ln for ln in unit.splitlines() if ln.startswith("ExecStart="))
    assert _parse_exec(line.split("=", 1)[1], env) == launch.argv


def test_newlines_and_nul_are_refused_before_writing() -> None:
    for bad in ("a\nExecStartPre=/bin/rm -rf /", "x\r", "nul\x00"):
        with pytest.raises(LaunchFailure) as err:
            check_launch(Launch(executable=("/bin/echo",), args=(bad,), env={}))
        assert err.value.reason == "preflight"
    with pytest.raises(LaunchFailure):
        check_launch(Launch(executable=("/bin/echo",), args=(), env={"K": "v\nExecStart=/bin/sh"}))
    with pytest.raises(LaunchFailure):
        check_launch(Launch(executable=("/bin/echo",), args=(), env={"BAD-NAME": "v"}))
    with pytest.raises(LaunchFailure):
        check_launch(Launch(executable=("./relative",), args=(), env={}))


def _full_unit(tmp_path: Path) -> tuple[Path, Launch]:
    launch = Launch(executable=(sys.executable, "-c", "import sys; print(sys.argv)"),
                    args=tuple(w for w in NASTY if "\x01" not in w and "\x07" not in w),
                    env={"PCT": "50%", "DOLLAR": "$x", "SPACE": "a b", "QUOTE": 'q"q'})
    text, _ = render_unit(launch, name="specsweep-verify.service", description="specsweep 100% test",
                          workdir=str(tmp_path), stop_grace_s=7, env_file_path=None)
    path = tmp_path / "specsweep-verify.service"
    path.write_text(text)
    return path, launch


def test_the_stand_in_reconstructs_the_whole_unit(tmp_path: Path) -> None:
    path, launch = _full_unit(tmp_path)
    loaded = sd.load_unit(path.name, [str(tmp_path)])
    assert sd.expand_env(loaded["argv_raw"], loaded["env"]) == launch.argv
    assert loaded["env"] == dict(launch.env)
    assert loaded["workdir"] == str(tmp_path) and loaded["stop_s"] == 7


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    path, _ = _full_unit(tmp_path)
    res = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    assert "specsweep-verify" not in res.stderr, res.stderr  # no warning about our unit


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify_rejects_a_broken_unit(tmp_path: Path) -> None:
    """The check above is not vacuous: verify does fail on bad quoting."""
    bad = tmp_path / "broken.service"
    bad.write_text('[Service]\nExecStart=/usr/bin/true "unterminated\n')
    res = subprocess.run(["systemd-analyze", "verify", str(bad)], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode != 0
