"""The landscape reader judges a landscape as data (issue 39): values, copies, size and time bounded.

``sweep.sim.landscape.load`` (through ``sweep/io/readback.py``) refuses rounds of 1e308 tok/s,
text in a round, rounds copied from another, a file over its size and one of more rounds than a
landscape holds -- each in one line naming the file and the value; ``python -m sweep.schedule
--dir`` names each bad one (``skipped <path>: <why>``), schedules the good one and exits 1. The
recorded landscapes still read.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from _support import subprocess_env

from faults import landscape_cases as lc
from sweep.sim import landscape
from sweep.sim.landscape import LandscapeError


def _refusal(path: Path) -> str:
    t0 = time.monotonic()
    with pytest.raises(LandscapeError) as info:
        landscape.load(path)
    assert time.monotonic() - t0 < 5, "a refusal that takes long is no bound"
    text = str(info.value)
    assert "\n" not in text and str(path) in text
    return text


def test_the_recorded_landscapes_still_read() -> None:
    for path in (lc.VLLM, lc.LLAMACPP):
        land = landscape.load(path)
        assert landscape.trial_docs(land)


def test_rounds_of_absurd_tok_s_are_refused(tmp_path: Path) -> None:
    text = _refusal(lc.write(tmp_path / "l.json", lc._huge))
    assert "runs[0].cells[0].output_tok_s: 1e+308 is out of range" in text


def test_text_in_a_round_is_refused(tmp_path: Path) -> None:
    text = _refusal(lc.write(tmp_path / "l.json", lc._text))
    assert "runs[0].cells[0].output_tok_s: 'fast' is not a number" in text


@pytest.mark.parametrize("where, value, named", [
    ("argv", "python -m x", "runs[0].argv"), ("env", ["A=1"], "runs[0].env"),
    ("round", -1, "runs[0].round"), ("config", "nope", "runs[0].config"),
    ("acceptance", {"per_position": [2.0]}, "runs[0].acceptance.per_position[0]"),
    ("cells", "60x1", "runs[0].cells")])
def test_a_round_of_the_wrong_shape_is_refused(where: str, value: object, named: str, tmp_path: Path) -> None:
    def edit(doc: dict) -> None:  # type: ignore[type-arg]
        doc["runs"][0][where] = value

    assert f": {named}" in _refusal(lc.write(tmp_path / "l.json", edit))


def test_copied_rounds_are_refused(tmp_path: Path) -> None:
    text = _refusal(lc.write(tmp_path / "l.json", lc._copied))
    assert "runs[1].cells: the very cells of runs[0]" in text and "copied round" in text


def test_a_landscape_over_its_size_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = lc.big(tmp_path / "l.json")
    assert landscape.is_landscape(path)  # recognised from its head: never passed over in silence
    assert "more than the 16 MiB a landscape holds" in _refusal(path)


def test_more_rounds_than_a_landscape_holds_are_refused_at_once(tmp_path: Path) -> None:
    text = _refusal(lc.write(tmp_path / "l.json", lc._many_rounds))
    assert f"runs: 30,000 entries, more than the {landscape.MAX_ROUNDS}" in text


@pytest.mark.slow
def test_schedule_names_each_bad_landscape_and_schedules_the_good_one(tmp_path: Path) -> None:
    good, bad = lc.hostile_dir(tmp_path / "d")
    proc = subprocess.run([sys.executable, "-m", "sweep.schedule", "--dir", str(tmp_path / "d"), "--no-write",
                           "--slo", "tpot_ms=100"], cwd=tmp_path, env=subprocess_env(COLUMNS="300"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr[-2000:]
    for case, path in bad.items():
        lines = [line for line in proc.stderr.splitlines() if str(path) in line]
        assert len(lines) == 1 and lines[0].startswith(f"skipped {path}: "), (case, lines)
        assert lines[0].count(str(path)) == 1, lines[0]
    assert "ngram-b8" in proc.stdout + proc.stderr  # the good landscape is scheduled (the shared "cpu" in its title)
    assert "inf" not in proc.stdout
