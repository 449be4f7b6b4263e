"""Which constants the performance model runs with: priors, or a box's calibration.

The model's public figures (bandwidth, TFLOPS, link latency, model shapes)
come from the hardware and model configs. Its free constants -- kernel
efficiencies, software overheads, the acceptance model -- come from one of:

1. ``hardware.perf.calibration``: an explicit calibration file (``none`` =
   force the uncalibrated twin);
2. the user's calibration dir (``$SPECSWEEP_CALIBRATIONS``, default
   ``$XDG_CONFIG_HOME/specsweep/calibrations``), where ``python -m
   sweep.calibrate`` writes by default;
3. the calibrations shipped in ``sweep/sim/calibrations/``;
4. else the priors in ``priors.yaml`` ("uncalibrated: spec-sheet physics").

In 2 and 3 a box's file is ``<box>.yaml`` (else ``<profile>.yaml``); the box
is ``hardware.perf.box`` or the profile name without its layout suffix
(``pro6000_ep4`` -> ``pro6000``), so every layout of one box shares one
calibration: what differs between layouts is the parallelism the physics
models, not the kernels' efficiencies.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import yaml

from sweep.compose.input_files import CALIBRATION_OFF, CALIBRATION_SCHEMA
from sweep.errors import ConfigError

PRIORS_FILE = Path(__file__).with_name("priors.yaml")
SHIPPED_DIR = Path(__file__).with_name("calibrations")
ENV_DIR = "SPECSWEEP_CALIBRATIONS"
KEY = "hardware.perf.calibration"
UNCALIBRATED = "uncalibrated: spec-sheet physics"
OFF = CALIBRATION_OFF
SCHEMA = CALIBRATION_SCHEMA


class CalibrationError(ConfigError):
    """A calibration that cannot be used: one line naming the key (``hardware.perf.calibration``)."""


@lru_cache(maxsize=1)
def priors() -> dict[str, Any]:
    """The parsed priors.yaml (read once per process)."""
    with PRIORS_FILE.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def fitted_names(group: str | None = None) -> tuple[str, ...]:
    """Names of the fitted constants (of one group: ``box`` or ``model``), in file order."""
    return tuple(n for n, p in priors()["fitted"].items() if group is None or p["group"] == group)


def prior(name: str, nvlink: bool = True) -> dict[str, Any]:
    """{value, sd, transform, group, what} of a fitted constant (PCIe overrides applied)."""
    base = dict(priors()["fitted"][name])
    if not nvlink:
        base.update(priors().get("pcie", {}).get(name, {}))
    return base


def to_z(name: str, value: float) -> float:
    """A constant in the space its prior is normal in (log or logit)."""
    if priors()["fitted"][name]["transform"] == "logit":
        v = min(max(value, 1e-9), 1 - 1e-9)
        return math.log(v / (1 - v))
    return math.log(max(value, 1e-300))


def from_z(name: str, z: float) -> float:
    if priors()["fitted"][name]["transform"] == "logit":
        return 1.0 / (1.0 + math.exp(-z))
    return math.exp(z)


@dataclass(frozen=True)
class Calibration:
    """The constants one prediction runs with, and where they came from.

    ``names``/``covariance``: posterior covariance of the fitted constants in
    their transformed space (for uncertainty bands); ``residual_sd``: the
    fit's residual scatter (log scale).
    """

    values: Mapping[str, float]
    source: str
    box: str = ""
    path: str | None = None
    calibrated: bool = False
    names: tuple[str, ...] = ()
    covariance: tuple[tuple[float, ...], ...] = ()
    residual_sd: float = 0.0
    points: int = 0
    key: tuple[Any, ...] = field(default=(), compare=False)

    def __getitem__(self, name: str) -> float:
        return self.values[name]

    def with_values(self, changes: Mapping[str, float], tag: str = "") -> Calibration:
        """A copy with some constants replaced (fitting and sensitivity analysis)."""
        values = {**self.values, **changes}
        return Calibration(values=values, source=self.source, box=self.box, path=self.path,
                           calibrated=self.calibrated, names=self.names, covariance=self.covariance,
                           residual_sd=self.residual_sd, points=self.points,
                           key=(tag or "custom", tuple(sorted(values.items()))))


def _nvlink(hardware: Mapping[str, Any]) -> bool:
    return bool((hardware.get("perf") or {}).get("nvlink", True))


def prior_values(nvlink: bool = True) -> dict[str, float]:
    """Every constant at its prior centre, plus the fixed ones."""
    values = {name: float(prior(name, nvlink)["value"]) for name in fitted_names()}
    values.update({k: float(v) for k, v in priors()["fixed"].items()})
    return values


def uncalibrated(hardware: Mapping[str, Any] | None = None) -> Calibration:
    nvlink = _nvlink(hardware or {})
    return Calibration(values=prior_values(nvlink), source=UNCALIBRATED,
                       box=box_name(hardware or {}), key=("priors", nvlink))


def box_name(hardware: Mapping[str, Any]) -> str:
    """The physical box a hardware profile runs on (its layouts share constants)."""
    perf = hardware.get("perf") or {}
    if perf.get("box"):
        return str(perf["box"])
    return re.sub(r"_(tp|ep|dp)\d+$", "", str(hardware.get("name") or "unknown"))


def user_dir() -> Path:
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or "~/.config"
    return Path(base).expanduser() / "specsweep" / "calibrations"


def find(hardware: Mapping[str, Any]) -> Path | None:
    """The calibration file rules 1-3 pick for this hardware, or None (priors)."""
    perf = hardware.get("perf") or {}
    explicit = perf.get("calibration")
    if explicit is not None and explicit is not False and str(explicit).strip():
        if str(explicit).strip().lower() in OFF:
            return None
        path = Path(str(explicit)).expanduser()
        if path.suffix not in (".yaml", ".yml") or not path.is_file():
            raise CalibrationError(KEY, f"no calibration file at {str(explicit)!r} "
                                   f"(a .yaml written by python -m sweep.calibrate, or 'none')")
        return path
    if explicit is False:
        return None
    name, box = str(hardware.get("name") or ""), box_name(hardware)
    for folder in (user_dir(), SHIPPED_DIR):
        candidate = folder / f"{box}.yaml"
        if candidate.is_file():
            return candidate
        candidate = folder / f"{name}.yaml"
        if name and candidate.is_file():
            return candidate
    return None


def load(path: Path, hardware: Mapping[str, Any] | None = None) -> Calibration:
    """A calibration file over the priors (missing constants stay at their prior)."""
    from sweep.compose.input_files import read_calibration

    try:  # the file's shape is read where the config check reads it (one reader of the format)
        doc = read_calibration(KEY, Path(path))
    except ConfigError as err:
        raise CalibrationError(err.key, err.message) from None
    nvlink = _nvlink(hardware or {"perf": {"nvlink": doc.get("nvlink", True)}})
    values = prior_values(nvlink)
    for name, value in doc["constants"].items():
        if name not in values or not isinstance(value, (int, float)) or isinstance(value, bool):
            raise CalibrationError(KEY, f"{path}: constants.{name} is not a known number "
                                   f"(known: {', '.join(fitted_names())})")
        values[name] = float(value)
    unc = doc.get("uncertainty") or {}
    cov = tuple(tuple(float(x) for x in row) for row in unc.get("covariance") or ())
    box = str(doc.get("box") or box_name(hardware or {}))
    return Calibration(values=values, source=f"calibrated: {box} ({path})", box=box, path=str(path),
                       calibrated=True, names=tuple(unc.get("names") or ()), covariance=cov,
                       residual_sd=float(unc.get("residual_sd_log") or 0.0),
                       points=len(doc.get("points") or ()), key=("file", str(path)))


@lru_cache(maxsize=64)
def _cached(name: str, box: str, explicit: str, nvlink: bool, user: str) -> Calibration:
    hardware = {"name": name, "perf": {"box": box, "calibration": explicit or None, "nvlink": nvlink}}
    path = find(hardware)
    return load(path, hardware) if path else uncalibrated(hardware)


def for_hardware(hardware: Mapping[str, Any]) -> Calibration:
    """The calibration the simulator uses for this hardware (cached per process)."""
    perf = hardware.get("perf") or {}
    explicit = perf.get("calibration")
    explicit_s = "none" if explicit is False else str(explicit or "")
    return _cached(str(hardware.get("name") or ""), box_name(hardware), explicit_s,
                   _nvlink(hardware), str(user_dir()))


def resolve(hardware: Mapping[str, Any], calibration: Any = None) -> Calibration:
    """``calibration`` as given (a Calibration, a path, 'none') or the one for this hardware."""
    if calibration is None:
        return for_hardware(hardware)
    if isinstance(calibration, Calibration):
        return calibration
    if str(calibration).strip().lower() in OFF:
        return uncalibrated(hardware)
    path = Path(str(calibration)).expanduser()
    if not path.is_file():
        raise CalibrationError("calibration", f"no calibration file at {str(calibration)!r}")
    return load(path, hardware)
