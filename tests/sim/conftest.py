"""The simulator tests run on the shipped calibrations only.

A developer's own calibrations (``python -m sweep.calibrate`` writes to
``~/.config/specsweep/calibrations`` by default) would otherwise change what
the sim predicts under test: point the user calibration dir at an empty
directory for this process and the sim servers it starts.
"""

from __future__ import annotations

import os
import tempfile

os.environ["SPECSWEEP_CALIBRATIONS"] = tempfile.mkdtemp(prefix="specsweep-test-calibrations-")
