"""The trial result document (``result.json``) and how it reaches disk.

The result file is the source of truth: it is written atomically in the
Hydra job dir before anything else (MLflow, plots, the summary) can fail,
and rewritten as the trial progresses (``running`` -> ``ok`` / ``failed`` /
``interrupted``). MLflow sync reads these files later when the tracking
server was down. Schema: docs/ARCHITECTURE.md.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator, Mapping

SCHEMA = 1
FILENAME = "result.json"


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    return str(obj)


def write_atomic(path: Path, doc: Mapping[str, Any]) -> Path:
    """Write JSON so that a reader never sees a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".result-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh, indent=2, default=_default, allow_nan=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def read(path: Path) -> dict[str, Any]:
    with open(path) as fh:
        return json.load(fh)


def iter_results(*roots: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every readable result.json under the given directories."""
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            continue
        for path in root.rglob(FILENAME):
            try:
                yield path, read(path)
            except (OSError, ValueError):
                continue


def clean_number(x: Any) -> Any:
    """JSON has no NaN/inf: turn them into None so writes never fail."""
    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
        return None
    if isinstance(x, dict):
        return {k: clean_number(v) for k, v in x.items()}
    if isinstance(x, list):
        return [clean_number(v) for v in x]
    return x
