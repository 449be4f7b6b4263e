"""Files the project reads back, broken every way the class knows (not a test module; issue 32).

Shared by ``tests/faults/test_readback.py`` and ``benchmarks/fault_matrix.py`` (section
``readback``). Each case is a file a command meets among good ones: a special file in place of
``result.json`` (a FIFO, a symlink to ``/dev/zero``, a 1 GiB sparse file), JSON the project never
writes (``NaN``, ``1e400``, 10,000 levels deep) and documents of the right shape with a value of
the wrong type or range (a cell that is a string, a trial that is a string, tok/s as text,
latency rows of strings, a context of 1e30 or -1, a negative count, a recorded config whose
SLO is text). Every one must be named in one line on stderr and skipped, the good files used,
the command's exit status 1 (``sweep/io/readback.py``: ``EXIT_SKIPPED``).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
MEASURED = ROOT / "benchmarks" / "measured"
GIB = 1024 ** 3


def _doc(edit: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], bytes]:
    def make(good: dict[str, Any]) -> bytes:
        doc = copy.deepcopy(good)
        edit(doc)
        return json.dumps(doc).encode()
    return make


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Set ``a.b[0].c`` in a document."""
    def edit(doc: dict[str, Any]) -> None:
        node: Any = doc
        parts = path.replace("]", "").replace("[", ".").split(".")
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        last = parts[-1]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return edit


# name -> the bytes of a result file made from a good one
CONTENT: dict[str, Callable[[dict[str, Any]], bytes]] = {
    "a cell that is a string": _doc(_set("cells[0]", "60x1")),
    "a trial that is a string": _doc(_set("trial", "b300")),
    "tok/s as text": _doc(_set("cells[1].output_tok_s", "fast")),
    "latency rows of strings": _doc(_set("cells[0].latencies", [["30", "3.4", "900", "64", "4"]])),
    "context 1e30": _doc(_set("cells[0].context", 1e30)),
    "context -1": _doc(_set("cells[0].context", -1)),
    "a negative count": _doc(_set("cells[0].errors", -3)),
    "cells null": _doc(_set("cells", None)),
    "metrics a list": _doc(_set("metrics", [1, 2])),
    "a config group that is a string": _doc(_set("config.workload", "smoke")),
    "an SLO limit as text": _doc(_set("config.objective.slo", {"tpot_ms": "fast"})),
    "NaN": lambda good: json.dumps(good).replace('"output_tok_s": ', '"output_tok_s": NaN, "x": ', 1).encode(),
    "1e400": lambda good: json.dumps(good).replace('"output_tok_s": ', '"output_tok_s": 1e400, "x": ', 1).encode(),
    "nested 10,000 deep": lambda good: json.dumps({**good, "deep": None}).replace(
        '"deep": null', '"deep": ' + "[" * 10_000 + "]" * 10_000).encode(),
}


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _sparse(path: Path) -> None:
    with open(path, "wb") as fh:  # 1 GiB that takes no disk: read whole, it would peak at 2 GB
        fh.truncate(GIB)


SPECIAL: dict[str, Callable[[Path], None]] = {
    "a FIFO named result.json": _fifo,
    "a symlink to /dev/zero": _zero,
    "a 1 GiB file": _sparse,
}


def hostile_sweep(sweep_dir: Path) -> tuple[list[Path], dict[str, Path]]:
    """Two good trials (jobs 0, 1) and one bad result file per case above; (good, {case: bad path})."""
    from record.result_docs import make_result

    job0, good = make_result(sweep_dir, 0, 8)
    job1, _ = make_result(sweep_dir, 1, 4)
    bad: dict[str, Path] = {}
    cases: list[tuple[str, Callable[[Path], None]]] = [
        *((name, lambda p, f=fn: p.write_bytes(f(good))) for name, fn in CONTENT.items()),
        *SPECIAL.items()]
    for i, (name, make) in enumerate(cases, start=2):
        path = sweep_dir / str(i) / "result.json"
        path.parent.mkdir(parents=True)
        make(path)
        bad[name] = path
    return [job0 / "result.json", job1 / "result.json"], bad


# ------------------------------------------------------------------------------ calibrate

ESCAPE = "../../../../PWN_calib"


def calibrate_inputs(folder: Path) -> tuple[list[Path], dict[str, Path]]:
    """Real result files (copies of benchmarks/measured) and bad ones beside them: a box name that
    would write ``<-o>/../../../../PWN_calib.yaml``, a landscape whose point is a string, a FIFO."""
    folder.mkdir(parents=True, exist_ok=True)
    good = []
    for name in ("b300-none-c1.json", "b300-ddtree-b8-t4-w2048-c8.json", "b300-ddtree-b8-t4-w2048-c1-full.json"):
        shutil.copy(MEASURED / name, folder / name)
        good.append(folder / name)
    doc = json.loads((MEASURED / "b300-none-c1.json").read_text())
    doc["config"]["hardware"].setdefault("perf", {})["box"] = ESCAPE
    bad = {"a box name that escapes -o": folder / "escape.json"}
    bad["a box name that escapes -o"].write_text(json.dumps(doc))
    land = json.loads((ROOT / "tests" / "fixtures" / "landscape-mini.json").read_text())
    land["points"][0] = "a point"
    bad["a landscape point that is a string"] = folder / "land.json"
    bad["a landscape point that is a string"].write_text(json.dumps(land))
    os.mkfifo(folder / "fifo.json")
    bad["a FIFO"] = folder / "fifo.json"
    return good, bad
