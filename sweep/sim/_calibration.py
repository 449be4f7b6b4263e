"""The simulator's calibration constants (``calibration.yaml``), read once.

Its own module so that :mod:`sweep.sim.accept` (acceptance) and
:mod:`sweep.sim.perf` (timing, which builds on acceptance) both read it
without importing each other.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

CALIBRATION_FILE = Path(__file__).with_name("calibration.yaml")


@lru_cache(maxsize=1)
def calibration() -> dict[str, Any]:
    """The calibration constants (read once)."""
    with CALIBRATION_FILE.open(encoding="utf-8") as fh:
        return dict(yaml.safe_load(fh))
