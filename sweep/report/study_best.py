"""What a study's last report named best, read back from its ``optimization_results.yaml``.

Why: a study and the sweep's closing table are two views of one search, and they
contradicted each other -- growing a study printed ``rerun: ... spec.topk=4`` from the
sweeper and below it ``run the best again: ... spec.topk=8`` from the table. The
sweeper reads the previous best here before it writes the file again (to say in one
line what growing changed); the closing table reads the new one, so it names the
study's best once instead of a second rerun command of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FILENAME = "optimization_results.yaml"


def study_best(sweep_dir: Path) -> tuple[int, dict[str, Any]] | None:
    """(trial number, params) the study's report named best; None when there is no study here, no
    best yet, or the file cannot be read (through the one reader of files the project wrote)."""
    import yaml

    from sweep.io import readback

    path = Path(sweep_dir) / FILENAME
    if not path.is_file():
        return None
    try:
        doc = readback.mapping(str(path), yaml.safe_load(readback.read_text(path)))
        trial = readback.count(f"{path}: best_trial", doc.get("best_trial"))
        params = readback.mapping(f"{path}: best_params", doc.get("best_params"))
    except (readback.BadFile, readback.Invalid, yaml.YAMLError):
        return None
    return (trial, params) if trial is not None else None
