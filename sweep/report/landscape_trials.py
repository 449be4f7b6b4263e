"""Recorded landscapes as the trials they ran, for every reader of a results directory.

A landscape file (``specsweep.landscape/1``, recorded by ``benchmarks/record_landscape.py``)
keeps every round of every config and workload; each round is one trial, so
the schedule and the report compare them like a sweep dir's result files
(``python -m sweep.report --dir benchmarks/measured/landscapes`` said "no
trials found" and exited 1: the recorded measurements had no report). The
one reader (:mod:`sweep.sim.landscape`, through sweep/io/readback.py) checks
each file; a file it refuses goes to ``on_error`` and the others are read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable


def landscape_trials(root: Path, on_error: Callable[[Path, Exception], None]) -> list[tuple[str, Any]]:
    """(source, TrialResult) for every round of every landscape among ``root``'s JSON files
    (result.json files are the sweep's own: not landscapes); its metrics computed as a trial's are."""
    from sweep.score.metrics import metrics
    from sweep.sim import landscape

    out: list[tuple[str, Any]] = []
    for path in sorted(Path(root).rglob("*.json")):
        if path.name == "result.json" or not path.is_file() or not landscape.is_landscape(path):
            continue
        try:
            docs = landscape.trial_docs(landscape.load(path))  # the one reader (sweep/io/readback.py)
        except (landscape.LandscapeError, ValueError, TypeError, KeyError) as exc:
            on_error(path, exc)
            continue
        for source, doc in docs:
            doc.metrics = metrics(doc)
            out.append((source, doc))
    return out
