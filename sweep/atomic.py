"""Files that readers never see half-written, and the one clock format they carry.

``write_atomic`` is how every JSON record reaches disk (result files, the
sweep's MLflow record, the local launcher's server state files): a temporary
file in the same directory (``mkstemp``: mode 0600), fsync, rename.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping


def now_iso() -> str:
    """UTC now, ISO 8601 to the second (what result files and logs record)."""
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


def read_json(path: Path) -> Any:
    with open(path) as fh:
        return json.load(fh)
