"""Failures, written the way SGLang writes them (texts in ``faults.yaml``).

The launcher classifies a dead server by its log (``cuda_graph``, ``oom``,
``missing_module``, ``python_headers``, ``port_in_use``, ``crashed``), so
each fault prints what a real server prints -- the exception line the
classifier keys on, inside a plausible traceback. The texts live in YAML
because they quote server flags, and flag strings stay out of Python.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from sweep.sim import logs

FAULTS_FILE = Path(__file__).with_name("faults.yaml")
EXIT_CODE = 1  # the launch process dies with the scheduler
STARTUP_FAULTS = ("cuda_graph", "oom", "hang", "missing_module", "python_headers")


@lru_cache(maxsize=1)
def templates() -> dict[str, Any]:
    with FAULTS_FILE.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def emit(kind: str, **values: Any) -> None:
    """Print fault ``kind``'s log records with ``values`` filled in, then the line saying
    it is simulated (a log tail must not read as a real server's, bug-report hints and all)."""
    for record in templates()[kind]:
        for where, text in record.items():
            line = text.format(**values)
            if where == "scheduler":
                logs.scheduler(line)
            elif where == "server":
                logs.log(line)
            else:
                logs.raw(line)
    why = (templates().get("_why") or {}).get(kind, "")
    logs.log(templates()["_note"].format(kind=kind, why=why.format(**values)))

