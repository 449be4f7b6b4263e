"""The benchmarks that read files and take overrides answer bad input in one line, exit 2, before anything runs.

``benchmarks/dynamic_sd.py`` parsed its arguments by hand (``--budgets a``: a ValueError traceback;
a truncated ``--measured`` landscape: "no landscape ... (unreadable: [PosixPath(...)])" after the
copy) and ``record_landscape.py --summary`` of a truncated or mis-shaped landscape ended as an
internal error. Both now go through the argument table (sweep/compose/arguments.py) and the error
boundary (sweep/errors.py); each case here is refused before a server could start.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
LANDSCAPE = ROOT / "benchmarks" / "busy-box" / "vllm-cpu-smollm2.json"


def _script(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("landscapes")
    (d / "truncated.json").write_bytes(LANDSCAPE.read_bytes()[:3000])
    (d / "list.json").write_text("[1, 2]")
    doc = json.loads(LANDSCAPE.read_text())
    doc["configs"] = [1, 2]
    (d / "configs.json").write_text(json.dumps(doc))
    doc = json.loads(LANDSCAPE.read_text())
    doc["workloads"] = {"edit": [1]}
    (d / "workloads.json").write_text(json.dumps(doc))
    return d


def _refused(capsys: pytest.CaptureFixture[str], main: Any, argv: list[str]) -> str:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own exit, with its usage block
        code = exc.code
    out = capsys.readouterr()
    lines = [x for x in out.err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, out.err)
    assert "Traceback" not in out.err + out.out
    return lines[0]


@pytest.mark.parametrize("argv, says", [
    (["--requests", "x"], "error: --requests: invalid int value: 'x'"),
    (["--budgets", "a"], "error: --budgets[0]: must be an integer"),
    (["--budgets", "1,3"], "error: --budgets: 1,3: a subset of 1,2,4,8"),
    (["--concurrency", "1,-2"], "error: --concurrency[1]: must be in [1, 100000]"),
    (["--rounds", "0"], "error: --rounds: must be in [1, 100]"),
    (["--workloads", "edit,nope"], "error: workload: unknown option 'nope'"),
    (["spec.budgit=4"], "error: spec.budgit: no such key; did you mean spec.budget?"),
    (["--work", "/proc/x"], "error: --work: '/proc/x' is on a pseudo filesystem"),
    (["--measured", "{d}/missing.json"], "error: --measured: no such file"),
    (["--measured", "{d}/truncated.json"], "error: --measured: landscape {d}/truncated.json: not JSON"),
    (["--measured", "{d}/list.json"], "error: --measured: landscape: {d}/list.json is not a landscape"),
    (["--measured", "{d}/configs.json"], "error: --measured: landscape {d}/configs.json: configs[0]: 1 is not"),
])
def test_dynamic_sd_refuses_bad_input_in_one_line(argv: list[str], says: str, bad_files: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    main = _script("dynamic_sd").main
    argv = [a.replace("{d}", str(bad_files)) for a in argv]
    if "--work" not in argv:
        argv += ["--work", str(tmp_path / "work")]
    assert _refused(capsys, main, argv).startswith(says.replace("{d}", str(bad_files)))
    assert not (tmp_path / "work" / "measure-runs").exists()  # nothing measured


@pytest.mark.parametrize("name, says", [
    ("truncated.json", "not JSON"), ("list.json", "is not a landscape"),
    ("configs.json", "configs[0]: 1 is not an object"), ("workloads.json", "workloads.edit: a list is not an object"),
])
def test_record_landscape_summary_of_a_bad_file_is_one_line(name: str, says: str, bad_files: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    line = _refused(capsys, _script("record_landscape").main, ["--summary", str(bad_files / name)])
    assert line.startswith("error: --summary: ") and says in line, line
