"""Landscapes broken every way issue 39 found (not a test module).

Shared by ``tests/faults/test_landscape_reader.py`` and ``benchmarks/fault_matrix.py`` (section
``issue39``). Each case is made from the recorded vLLM landscape
(``benchmarks/busy-box/vllm-cpu-smollm2.json``, 28 rounds of 7 configs):

* rounds of 1e308 tok/s (intervals ``[-inf-inf]`` and ``inf`` in schedule.yaml before);
* text in a round (accepted before; with ``--slo`` an internal error);
* every round of a config a copy of its first (no spread: 16 levels "decided" where the real file
  decides none);
* 100 MB (a sparse file: silently passed over by ``python -m sweep.schedule --dir`` before);
* more rounds than a landscape holds (30,000 of them kept the schedule busy past two minutes).

Each must be named in one line, ``skipped <path>: <why>``, by a command that reads many files
(exit 1), the good files still used.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
LANDSCAPES = ROOT / "benchmarks" / "measured" / "landscapes"
VLLM = ROOT / "benchmarks" / "busy-box" / "vllm-cpu-smollm2.json"  # a fixed file: the shipped one is re-recorded
LLAMACPP = LANDSCAPES / "llamacpp-cpu-smollm2.json"
MB = 1000 * 1000


def good() -> dict[str, Any]:
    return json.loads(VLLM.read_text())


def _huge(doc: dict[str, Any]) -> None:
    for run in doc["runs"][:2]:
        run["cells"][0]["output_tok_s"] = 1e308


def _text(doc: dict[str, Any]) -> None:
    doc["runs"][0]["cells"][0]["output_tok_s"] = "fast"


def _copied(doc: dict[str, Any]) -> None:
    first: dict[tuple[str, str], list[Any]] = {}
    for run in doc["runs"]:
        key = (run["config"], run["workload"])
        if key in first:
            run["cells"] = copy.deepcopy(first[key])
        else:
            first[key] = run["cells"]


def _many_rounds(doc: dict[str, Any]) -> None:
    """30,000 small rounds (3 MB): within the size limit, past the rounds'."""
    run = {k: doc["runs"][0][k] for k in ("config", "workload", "status")}
    doc["runs"] = [{**run, "round": i, "cells": []} for i in range(30_000)]


EDITS: dict[str, Callable[[dict[str, Any]], None]] = {
    "rounds of 1e308 tok/s": _huge,
    "text in a round": _text,
    "copied rounds": _copied,
    "30,000 rounds": _many_rounds,
}


def write(path: Path, edit: Callable[[dict[str, Any]], None] | None = None) -> Path:
    doc = good()
    if edit is not None:
        edit(doc)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def big(path: Path, size: int = 100 * MB) -> Path:
    """A landscape's head and then nothing, ``size`` bytes long: sparse, so it takes no disk and no time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(b'{"schema": "specsweep.landscape/1", "engine": "vllm", "runs": [')
        fh.truncate(size)
    return path


def hostile_dir(folder: Path) -> tuple[Path, dict[str, Path]]:
    """A directory holding the good landscape and one file per case; (good, {case: path})."""
    good_path = write(folder / "good" / "vllm.json")
    bad = {name: write(folder / f"bad{i}" / "land.json", edit) for i, (name, edit) in enumerate(EDITS.items())}
    bad["100 MB"] = big(folder / "big" / "land.json")
    return good_path, bad
