"""A copy whose identity fields contradict its own launch is named and left out, never pooled (issue 39).

Result files written as the trial writes them (``record/result_docs.make_result``: the simulated b300,
DDTree at budgets 8 and 4, argv and env as rendered) and copies of them edited:

* ``config.spec.budget`` says 4 while its argv ran ``--speculative-ddtree-budget 8``: it pooled with
  b8's copies and, as their newest, made b8's cells appear as a b4 config;
* ``trial.config_id`` is not the id its content hashes to;
* ``config.spec.per_load`` malformed (a band from 0): the newest copy of b8 made b8 a "dynamic" config
  and dropped it from its family, so no per-load table was derived.

Each is named in one line (``skipped <path>: ...``) by the command that reads the files (exit 1), and
the good copies give the answer they give alone.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from record.result_docs import make_result
from sweep.io import readback
from sweep.record.result import TrialResult, iter_results
from sweep.score import configs
from sweep.score.consistency import contradiction

NEWER = "2026-01-01T13:00:00+00:00"


def _copy(src: dict[str, Any], path: Path, **edits: Any) -> Path:
    doc = json.loads(json.dumps(src))
    doc["trial"]["finished"] = NEWER  # the newest copy: the one a pooled config shows
    for where, value in edits.items():
        node = doc
        *parents, last = where.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def sweep_dir(tmp_path: Path) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    d = tmp_path / "sweep"
    _, b8 = make_result(d, 0, 8)
    _, b4 = make_result(d, 1, 4)
    return d, b8, b4


def test_the_trials_own_files_are_consistent(sweep_dir: tuple[Path, dict[str, Any], dict[str, Any]]) -> None:
    d, b8, _ = sweep_dir
    for _, doc in iter_results(d):
        assert contradiction(doc) is None
    b8["trial"]["config_id"] = configs.config_id(TrialResult.from_dict(b8))
    assert contradiction(TrialResult.from_dict(b8)) is None


def test_a_budget_its_launch_did_not_run_is_named(sweep_dir: tuple[Path, dict[str, Any], dict[str, Any]]) -> None:
    d, b8, _ = sweep_dir
    forged = TrialResult.load(_copy(b8, d / "2" / "result.json", **{"config.spec.budget": 4}))
    why = contradiction(forged)
    assert why is not None and "--speculative-ddtree-budget 4" in why and "ran --speculative-ddtree-budget 8" in why


def test_a_config_id_its_content_does_not_hash_to_is_named(
        sweep_dir: tuple[Path, dict[str, Any], dict[str, Any]]) -> None:
    d, b8, b4 = sweep_dir
    b8_id = configs.config_id(TrialResult.from_dict(b8))
    forged = TrialResult.load(_copy(b4, d / "2" / "result.json", **{"trial.config_id": b8_id}))
    why = contradiction(forged)
    assert why is not None and f"trial.config_id {b8_id} is not the id its content hashes to" in why


def _schedule(d: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    from sweep.schedule import main

    code = main(["--dir", str(d), "--no-write", *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_schedule_leaves_a_forged_copy_out_and_names_it(sweep_dir: tuple[Path, dict[str, Any], dict[str, Any]],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    d, b8, _ = sweep_dir
    path = _copy(b8, d / "2" / "result.json", **{"config.spec.budget": 4})
    code, out, err = _schedule(d, capsys)
    lines = [line for line in err.splitlines() if str(path) in line]
    assert code == 1 and len(lines) == 1 and lines[0].startswith(f"skipped {path}: a copy that contradicts itself")
    # pooled anywhere else (the report, the HTML, MLflow's): named on stderr and left out -- b8 is
    # measured once (the forged copy is no second measurement of it), b4 is the real b4 alone
    from sweep.report.compare import build_groups

    found = list(iter_results(d))
    names = [(r.name, r.copies) for g in build_groups([doc for _, doc in found], [str(p) for p, _ in found])
             for r in g.rows]
    assert f"skipped {path}: a copy that contradicts itself" in capsys.readouterr().err
    assert sorted(names) == [("b300-ddtree-b4-t4-w2048", 1), ("b300-ddtree-b8-t4-w2048", 1)], names


def test_a_malformed_per_load_copy_is_named_and_its_config_keeps_its_family(
        sweep_dir: tuple[Path, dict[str, Any], dict[str, Any]]) -> None:
    from sweep.report.dynamic import derive

    d, b8, _ = sweep_dir
    path = _copy(b8, d / "2" / "result.json", **{"config.spec.per_load": [[0, 4, 8]]})
    skipped = readback.Skipped(out=open(os.devnull, "w"))  # noqa: SIM115
    found = list(iter_results(d, on_error=skipped))
    assert [b.path for b in skipped.files] == [path] and "spec.per_load" in skipped.files[0].why
    tables = derive([doc for _, doc in found], [str(p) for p, _ in found])
    assert tables and sorted(tables[0].statics) == [4, 8]
