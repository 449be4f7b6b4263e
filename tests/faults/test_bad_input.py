"""Bad input is refused up front: exit 2, one line naming the key, nothing started (issue 11, section 5).

Three ways in:

* every key of the key table (``sweep.compose.keys.RULES``) with a value its
  rule refuses, plus the issue's own examples (``bad_inputs``), through the
  command-line check ``python -m sweep`` runs before Hydra
  (``sweep.compose.cmdline.check``), in this process;
* the issue's examples through the real CLI, as subprocesses: exit status 2,
  one line on stderr, no traceback, no job dir, no server process on the
  run's port;
* a fuzzer (hypothesis) over the override grammar: keys of the table and
  random ones, values built from the grammar's special characters, sweeps,
  lists, mappings; whatever it makes is accepted or refused in one line with
  exit 2, never a traceback.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _support import free_port, subprocess_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faults.bad_inputs import ISSUE, BadInput, cases
from faults.orphan_scenarios import Server, port_free
from sweep.cli import plugins
from sweep.compose import bounds, cmdline

plugins.register()


def check(args: list[str]) -> tuple[int | None, str]:
    """(exit status, stderr) of the command-line check; None: it accepted the input."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            cmdline.check(args)
    except SystemExit as exc:
        return int(exc.code or 0), err.getvalue()
    return None, err.getvalue()


def _refused_in_one_line(case: BadInput, code: int | None, err: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, f"{case.label}: accepted ({case.why})"
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith(f"error: {case.key}"), f"{case.label}: {lines}"


@pytest.mark.parametrize("case", cases(), ids=lambda c: c.label[:80])
def test_every_key_refuses_a_bad_value_in_one_line(case: BadInput) -> None:
    _refused_in_one_line(case, *check(list(case.args)))


def test_the_table_covers_every_key() -> None:
    named = {c.key for c in cases()}
    for key in bounds.RULES:
        assert any(k == key or bounds.rule_key_of(k) == key for k in named), key


def _cli(tmp_path: Path, case: BadInput, i: int) -> tuple[BadInput, subprocess.CompletedProcess[str], Path, int]:
    cwd = tmp_path / f"case{i}"
    cwd.mkdir()
    port = free_port()
    proc = subprocess.run([sys.executable, "-m", "sweep", *case.argv(f"server.port={port}")], cwd=cwd,
                          env=subprocess_env(), capture_output=True, text=True, timeout=120)
    return case, proc, cwd, port


@pytest.mark.slow
def test_the_issues_bad_inputs_through_the_real_cli(tmp_path: Path) -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = list(pool.map(lambda ic: _cli(tmp_path, ic[1], ic[0]), enumerate(ISSUE)))
    for case, proc, cwd, port in runs:
        _refused_in_one_line(case, proc.returncode, proc.stderr)
        assert proc.stdout == "", proc.stdout
        assert sorted(p.name for p in cwd.iterdir()) == [], f"{case.label}: wrote {list(cwd.iterdir())}"
        assert port_free(port) and Server([port], token=None).processes() == {}


# ------------------------------------------------------------------------------ the fuzzer

KEYS = sorted(k for k in bounds.RULES if not k.endswith(".*"))
SPECIAL = "[]{},:='\"$()\\ ;-+.@/~*?%#!&|<>`\t"
words = st.text(alphabet=st.sampled_from("abcxyz019_" + SPECIAL), min_size=0, max_size=12)
scalars = st.one_of(
    st.integers(min_value=-10**12, max_value=10**12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["true", "false", "null", "maybe", "no", "nan", "inf", "-inf", "1e999", "${oc.env:HOME}",
                     "${x.y}", "''", '""', "choice()", "range(1)", "interval(a,b)", "tag(log,x)", "glob(*)"]),
    words)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3).map(lambda xs: "[" + ",".join(xs) + "]"),
    st.lists(st.tuples(words, inner), max_size=2).map(lambda kv: "{" + ",".join(f"{k}:{v}" for k, v in kv) + "}"),
    st.lists(inner, min_size=1, max_size=3).map(",".join),
    st.lists(inner, max_size=3).map(lambda xs: "choice(" + ",".join(xs) + ")")), max_leaves=6)
keys = st.one_of(st.sampled_from(KEYS), st.sampled_from(["spec", "hardware", "server", "launcher", "workload",
                                                          "hydra/sweeper", "hydra.sweeper.params"]), words)
overrides = st.tuples(st.sampled_from(["", "+", "++", "~"]), keys, st.sampled_from(["=", "", "==", "=="]), values) \
    .map(lambda t: "".join(t) if t[2] else t[0] + t[1])


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.lists(overrides, min_size=1, max_size=3), st.booleans())
def test_fuzzed_overrides_never_end_in_a_traceback(args: list[str], multirun: bool) -> None:
    args = [a for a in args if not a.startswith("-")]  # flags are argparse's business
    code, err = check((["-m"] if multirun else []) + args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    if code is not None:
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (args, err)


def test_a_glob_over_a_group_is_checked_as_the_jobs_hydra_runs() -> None:
    """``hardware=glob(...)`` is Hydra's sweep of a group's options: the check expands it as
    the basic sweeper will (it used to refuse every glob: "ConfigLoader is not set")."""
    jobs = cmdline.expand(["hardware=glob(pro6000_*,exclude=pro6000_tp8)", "spec.budget=4,8"], True)
    assert sorted(" ".join(j) for j in jobs) == [
        "hardware=pro6000_ep4 spec.budget=4", "hardware=pro6000_ep4 spec.budget=8",
        "hardware=pro6000_ep8 spec.budget=4", "hardware=pro6000_ep8 spec.budget=8"]
    assert check(["-m", "hardware=glob(pro6000_ep*)", "workload=smoke", "dry_run=true"]) == (None, "")


def test_an_mlflow_store_mlflow_refuses_is_refused_before_the_first_trial(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scheme no MLflow store has, and (MLflow 3.13+) a file store, used to fail only when the
    first trial was recorded; MLFLOW_TRACKING_URI is checked as the key would be."""
    from importlib.metadata import version

    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    code, err = check([f"mlflow.tracking_uri=notascheme://{tmp_path}"])
    assert code == 2 and err.startswith("error: mlflow.tracking_uri: unknown scheme 'notascheme'"), err
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "notascheme://x")
    code, err = check([])
    assert code == 2 and err.startswith("error: MLFLOW_TRACKING_URI: unknown scheme"), err
    assert check(["mlflow.enabled=false"]) == (None, "")  # no store used: not checked
    assert check([f"mlflow.tracking_uri=sqlite:///{tmp_path}/m.db"]) == (None, "")  # the key wins
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    major, minor = (int(x) for x in version("mlflow").split(".")[:2])
    for store in (str(tmp_path / "mlruns"), (tmp_path / "mlruns").as_uri()):
        code, err = check([f"mlflow.tracking_uri={store}"])
        if (major, minor) >= (3, 13):
            assert code == 2 and "is a file store" in err and "MLFLOW_ALLOW_FILE_STORE" in err, err
        else:
            assert code is None, err
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    assert check([f"mlflow.tracking_uri={tmp_path / 'mlruns'}"]) == (None, "")
