"""``python -m sweep.verify_dynamic`` judges its export file and its command line as input, before any run.

An export is a file read back: it names configs, it never chooses what starts or where it writes
(sweep/compose/dynamic_read.py). Each case runs the command's ``main`` on a real export file in a
real directory (``--dry-run`` composes and checks every run as ``python -m sweep`` would, and runs
no server); the FIFO case runs the command as a process, since the old reader blocked in it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sweep.verify_dynamic import main

SECRET = "sk-verify-7f3a9c2e51"


def export(root: Path, **table: Any) -> Path:
    """A one-table ``dynamic-sim.yaml`` of the ddtree family b4/b8 on the simulated b300, with ``table``'s changes."""
    t: dict[str, Any] = {
        "workload": "seed", "context": 1024, "family": "b300-ddtree", "engine": "sim", "budgets": [4, 8],
        "per_load": [[1, 2, 8], [3, 16, 4]],
        "overrides": ["server=sim", "spec=ddtree", "hardware=b300", "spec.budget=8",
                      "spec.per_load=[[1,2,8],[3,16,4]]"],
        "levels": [{"load": 1}, {"load": 2}, {"load": 4}, {"load": 8}],
        "statics": {4: {"name": "b4", "overrides": ["spec=ddtree", "spec.budget=4", "hardware=b300"]},
                    8: {"name": "b8", "overrides": ["spec=ddtree", "spec.budget=8", "hardware=b300"]}},
        "baseline": {"name": "none", "overrides": ["spec=none", "hardware=b300"]},
        "workload_overrides": ["workload.contexts=[1024]"],
    }
    t.update(table)
    root.mkdir(parents=True, exist_ok=True)
    path = root / "dynamic-sim.yaml"
    path.write_text(yaml.safe_dump({"format": "specsweep.dynamic/1", "engine": "sim", "tables": [t]}))
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def refused(code: int, err: str) -> str:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_a_statics_key_from_the_file_never_becomes_a_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "d"
    export(root, statics={"/../../x_statics": {"name": "x", "overrides": ["spec=ddtree", "spec.budget=4"]},
                          8: {"name": "b8", "overrides": ["spec=ddtree", "spec.budget=8"]}})
    code, out, err = run(capsys, "--dir", str(root), "--dry-run", "--rounds", "1")
    assert "statics key '/../../x_statics'" in refused(code, err) and "x_statics" not in out
    assert not list(tmp_path.rglob("*x_statics*"))


def test_launch_plumbing_in_the_file_is_not_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """server.executable, env, setup, launcher and hosts come from the user, never from the export."""
    root = tmp_path / "d"
    forged = ["server.executable=[/bin/sh,-c,touch /tmp/forged]", "+server.env.LD_PRELOAD=/tmp/x.so",
              "launcher=ssh", "launcher.host=evil.example", "hydra.sweep.dir=/tmp/elsewhere"]
    export(root, overrides=["server=sim", "spec=ddtree", "hardware=b300", "spec.budget=8", *forged],
           statics={4: {"name": "b4", "overrides": ["spec=ddtree", "spec.budget=4", "server.setup=[rm -rf /]"]},
                    8: {"name": "b8", "overrides": ["spec=ddtree", "spec.budget=8"]}})
    code, out, err = run(capsys, "--dir", str(root), "--dry-run", "--rounds", "1")
    assert code == 0, err
    for word in ("server.executable", "LD_PRELOAD", "launcher", "evil.example", "/tmp/elsewhere", "server.setup"):
        assert word not in out, word
    assert "not taken from the file" in err and "server.executable" in err  # named, not silently dropped
    assert all(f"hydra.sweep.dir={root.resolve()}/verify/" in line for line in out.splitlines())


def test_an_interpolation_in_the_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "d"
    export(root, overrides=["spec=ddtree", "spec.algorithm=${oc.env:HOME}", "spec.budget=8"])
    code, _, err = run(capsys, "--dir", str(root), "--dry-run")
    assert "an interpolation in a file read back is not taken" in refused(code, err)


@pytest.mark.parametrize("per_load, says", [
    ([[3, 16, 4], [1, 2, 8]], "bands sorted, not overlapping"),          # unsorted
    ([[1, 4, 8], [3, 16, 4]], "bands sorted, not overlapping"),          # overlapping
    ([[1, 2, -8], [3, 16, 4]], "must be in [0, 1024]"),                  # negative
    ([[1, 2, 8], [3, 10**9, 4]], "must be in [1, 100000]"),              # absurd
    ([[1, 2, 16], [3, 16, 4]], "budget 16 is not one of the family's budgets (4, 8)"),
])
def test_a_bad_table_in_the_file_is_refused_before_any_run(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            per_load: Any, says: str) -> None:
    root = tmp_path / "d"
    export(root, per_load=per_load)
    code, out, err = run(capsys, "--dir", str(root), "--dry-run")
    line = refused(code, err)
    assert line.startswith("error: --file: ") and "tables[0].per_load" in line and says in line, line
    assert out == ""


def test_loads_must_be_sorted_and_a_hand_table_stays_in_the_family(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "d"
    export(root, levels=[{"load": 4}, {"load": 1}])
    code, _, err = run(capsys, "--dir", str(root), "--dry-run")
    assert "tables[0].levels[1].load: 1 after 4" in refused(code, err)
    export(root)
    code, _, err = run(capsys, "--dir", str(root), "--dry-run", "--table", "[[1,256,32]]")
    assert "--table[0]: budget 32 is not one of the family's budgets" in refused(code, err)


def test_keys_the_verification_sets_and_typos_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "d"
    export(root)
    for given, says in (("workload.cells=[[60,1]]", "error: workload.cells: is set by the verification"),
                        ("hydra.sweep.dir=/tmp/x", "error: hydra.sweep.dir: is set by the verification"),
                        ("spec.budgit=4", "error: spec.budgit: no such key; did you mean spec.budget?")):
        code, out, err = run(capsys, "--dir", str(root), "--dry-run", given)
        assert refused(code, err).startswith(says), err
        assert out == ""


def test_an_api_key_on_the_command_line_is_never_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "d"
    export(root)
    code, out, err = run(capsys, "--dir", str(root), "--dry-run", "--rounds", "1", f"server.api_key={SECRET}")
    assert code == 0, err
    assert SECRET not in out + err and "server.api_key=***" in out


def test_a_second_verification_of_the_dir_is_refused_in_one_line(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from sweep.io import dirlock

    root = tmp_path / "d"
    export(root)
    held = dirlock.acquire(root / "verify")  # another verification of this dir, running
    try:
        code, out, err = run(capsys, "--dir", str(root), "--rounds", "1")
    finally:
        held.release()
    line = refused(code, err)
    assert line.startswith(f"error: --dir: {root.resolve()}/verify is in use by another verify_dynamic (pid "), line
    assert not [p for p in (root / "verify").iterdir() if p.is_dir()]  # nothing started


def test_every_run_gets_its_own_dir_and_their_rounds_stay_apart(tmp_path: Path) -> None:
    """A rerun writes beside the earlier run, never into it; the report counts both runs' rounds."""
    from sweep.report.verify import round_key
    from sweep.verify_dynamic import _new_run_dir

    first, second = _new_run_dir(tmp_path / "verify"), _new_run_dir(tmp_path / "verify")
    assert first != second and first.is_dir() and second.is_dir()
    a, b = f"{first}/round1/0-b4/0/result.json", f"{second}/round1/0-b4/0/result.json"
    assert round_key(a) != round_key(b) and round_key(a) == round_key(f"{first}/round1/3-b8/0/result.json")
    assert round_key(f"{tmp_path}/elsewhere/0/result.json") is None


@pytest.mark.parametrize("kind", ["fifo", "alias bomb"])
def test_the_export_is_read_by_the_one_reader(tmp_path: Path, kind: str) -> None:
    """A FIFO named dynamic-sim.yaml hung the command; an alias bomb is refused before it is built."""
    root = tmp_path / "d"
    root.mkdir()
    path = root / "dynamic-sim.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        lines = ["format: specsweep.dynamic/1", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
        path.write_text("\n".join([*lines, "tables: [{workload: seed, overrides: *a8}]"]) + "\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                        os.environ.get("PYTHONPATH", "")])}
    try:
        out = subprocess.run([sys.executable, "-m", "sweep.verify_dynamic", "--dir", str(root), "--dry-run"],
                             capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"verify_dynamic hung on a {kind}")
    says = "a FIFO, not a regular file" if kind == "fifo" else "an alias bomb"
    assert out.returncode == 2 and says in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
