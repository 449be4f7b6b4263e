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
    """Names of the fitted constants (of one group: ``box``, ``model`` or ``workload``), in file order."""
    return tuple(n for n, p in priors()["fitted"].items() if group is None or p["group"] == group)


KINDS = ("nvlink", "pcie", "cpu")
WL = "@"  # a per-workload constant is written <name>@<workload>


def base_name(name: str) -> str:
    """``ngram_hit@edit`` -> ``ngram_hit``."""
    return name.split(WL, 1)[0]


def _kind(kind: str | bool) -> str:
    if isinstance(kind, bool):  # the old signature: nvlink or not
        return "nvlink" if kind else "pcie"
    return kind if kind in KINDS else "nvlink"


def kind_of(hardware: Mapping[str, Any]) -> str:
    """Which priors a box starts from: ``cpu`` (no GPU), ``pcie`` (no NVLink) or ``nvlink``."""
    if str(hardware.get("arch") or "").lower() == "cpu" or hardware.get("num_gpus") == 0:
        return "cpu"
    return "nvlink" if bool((hardware.get("perf") or {}).get("nvlink", True)) else "pcie"


def prior(name: str, kind: str | bool = "nvlink") -> dict[str, Any]:
    """{value, sd, transform, group, what} of a fitted constant (the box kind's overrides applied)."""
    base = dict(priors()["fitted"][base_name(name)])
    k = _kind(kind)
    if k != "nvlink":
        base.update(priors().get(k, {}).get(base_name(name), {}))
    return base


def _domain(name: str, kind: str | bool) -> str:
    return "a fraction in (0, 1)" if prior(name, kind)["transform"] == "logit" else "a number in (0, 1e12]"


def _in_domain(name: str, value: float, kind: str | bool) -> bool:
    """Whether a calibration's value is one the constant can take (its prior's transform says:
    a fraction for logit, a positive number for log)."""
    if prior(name, kind)["transform"] == "logit":
        return 0.0 < value < 1.0
    return 0.0 < value <= 1e12


def to_z(name: str, value: float, kind: str | bool = "nvlink") -> float:
    """A constant in the space its prior is normal in (log or logit)."""
    if prior(name, kind)["transform"] == "logit":
        v = min(max(value, 1e-9), 1 - 1e-9)
        return math.log(v / (1 - v))
    return math.log(max(value, 1e-300))


def from_z(name: str, z: float, kind: str | bool = "nvlink") -> float:
    if prior(name, kind)["transform"] == "logit":
        return 1.0 / (1.0 + math.exp(-z))
    return math.exp(z)


def for_workload(values: Mapping[str, float], workload: str | None) -> dict[str, float]:
    """The constants a prediction for ``workload`` runs with: its fitted ``<name>@<workload>``
    values in place of the priors (a workload nobody measured keeps the priors)."""
    out = {k: v for k, v in values.items() if WL not in k}
    if workload:
        suffix = f"{WL}{workload}"
        out.update({k[: -len(suffix)]: v for k, v in values.items() if k.endswith(suffix)})
    return out


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
    kind: str = "nvlink"
    residual_by_kind: tuple[tuple[str, float], ...] = ()  # per kind of point (output_tok_s, accept_len ...)
    # the box's public figures its efficiencies are fractions of (hardware.perf keys: FIGURES), as
    # the fitted points ran with them -- on a CPU box measured (machine.perf), not a spec sheet
    figures: tuple[tuple[str, Any], ...] = ()
    # the residual scatter split (log sd, per kind of point): one measurement's run-to-run noise as
    # measured (a landscape's rounds), and the model's own error beyond the noise of the fitted points
    noise_by_kind: tuple[tuple[str, float], ...] = ()
    model_by_kind: tuple[tuple[str, float], ...] = ()
    # the box's state while the points were measured (sweep/sim/calfile.py box_state; {}: not said)
    box_state: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def residual(self, kind: str | None = None) -> float:
        """The residual scatter of this kind of point (the overall one when not fitted per kind)."""
        return dict(self.residual_by_kind).get(kind or "", self.residual_sd)

    def unexplained(self, kind: str | None, repeats: int = 1, noise: float | None = None,
                    structure: float = 0.0) -> float:
        """What a band adds to the constants' uncertainty for a measurement of ``kind`` that is the
        mean of ``repeats`` runs: the model's error and that measurement's noise, in quadrature.
        ``kind`` is a kind of point, or ``accept_len:<family>`` (accept lengths by drafter family;
        the kind's own entry where the family has none). The noise is the calibration's measured one,
        else ``noise`` (the box's declared spread), else the prior's. The model's error is the fitted
        one, else (too few points to tell it from the noise: one PCIe point) the residual scatter,
        and never less than ``structure`` (what the fixed structure's uncertainty does to this figure)."""
        base = (kind or "").split(":", 1)[0]
        model = dict(self.model_by_kind)
        measured = dict(self.noise_by_kind)
        table = priors()["noise"]
        one = measured.get(kind or "") or measured.get(base) or noise or float(table.get(base, table["tok_s"]))
        err = model.get(kind or "", model.get(base, self.residual(base)))
        err = max(err, structure)
        return math.sqrt(err ** 2 + one ** 2 / max(1, int(repeats)))

    def __getitem__(self, name: str) -> float:
        return self.values[name]

    def with_values(self, changes: Mapping[str, float], tag: str = "") -> Calibration:
        """A copy with some constants replaced (fitting and sensitivity analysis)."""
        values = {**self.values, **changes}
        return Calibration(values=values, source=self.source, box=self.box, path=self.path,
                           calibrated=self.calibrated, names=self.names, covariance=self.covariance,
                           residual_sd=self.residual_sd, points=self.points,
                           key=(tag or "custom", tuple(sorted(values.items()))), kind=self.kind,
                           residual_by_kind=self.residual_by_kind, figures=self.figures,
                           noise_by_kind=self.noise_by_kind, model_by_kind=self.model_by_kind,
                           box_state=self.box_state)

    def for_workload(self, workload: str | None) -> dict[str, float]:
        """Its constants as a prediction for ``workload`` reads them (see :func:`for_workload`)."""
        return for_workload(self.values, workload)


# The box's public figures a calibration's efficiencies are relative to (hardware.perf keys).
FIGURES = ("mem_bw_tbs", "fp8_tflops", "matmul_tflops", "link_bw_gbs", "link_latency_us", "probe")


def figures_of(hardware: Mapping[str, Any]) -> dict[str, Any]:
    """The figures of :data:`FIGURES` this hardware declares (None and missing left out)."""
    perf = hardware.get("perf") or {}
    return {k: perf[k] for k in FIGURES if perf.get(k) is not None}


def check_figures(hardware: Mapping[str, Any]) -> None:
    """A CPU box has no spec sheet: without measured figures the twin would run on a GPU's
    defaults (8 TB/s, 2,000 TFLOPS) and every constant fitted to it would absorb the difference."""
    if kind_of(hardware) != "cpu":
        return
    perf = hardware.get("perf") or {}
    missing = [k for k in ("mem_bw_tbs", "matmul_tflops") if perf.get(k) is None]
    if missing and not (missing == ["matmul_tflops"] and perf.get("fp8_tflops") is not None):
        raise CalibrationError(f"hardware.perf.{missing[0]}", "a CPU box needs its measured figures "
                               "(python -m sweep.sim.probe --threads N, with the engine's threads)")


def prior_values(kind: str | bool = "nvlink") -> dict[str, float]:
    """Every constant at its prior centre, plus the fixed ones."""
    values = {name: float(prior(name, kind)["value"]) for name in fitted_names()}
    values.update({k: float(v) for k, v in priors()["fixed"].items()})
    values.update({k: float(v) for k, v in (priors().get("fixed_" + _kind(kind)) or {}).items()})
    return values


def uncalibrated(hardware: Mapping[str, Any] | None = None) -> Calibration:
    kind = kind_of(hardware or {})
    return Calibration(values=prior_values(kind), source=UNCALIBRATED,
                       box=box_name(hardware or {}), key=("priors", kind), kind=kind)


def box_name(hardware: Mapping[str, Any]) -> str:
    """The physical box a hardware profile runs on (its layouts share constants)."""
    perf = hardware.get("perf") or {}
    if perf.get("box"):
        return str(perf["box"])
    return re.sub(r"_(tp|ep|dp)\d+$", "", str(hardware.get("name") or "unknown"))


# Servers whose calibration is the box's own (the simulator twins SGLang); any other engine
# runs on a box with its own overheads, so its constants are the "<box>-<engine>" box's.
BOX_ENGINES = ("sglang", "sim", "")


def engine_of(server: Mapping[str, Any] | None) -> str:
    """The engine whose step overheads the twin runs with: ``server.engine`` (the simulator standing
    in for another engine: vllm, trtllm), else the server itself; SGLang for the simulator."""
    name = str((server or {}).get("engine") or (server or {}).get("name") or "")
    return "sglang" if name in BOX_ENGINES else name


def engine_hardware(hardware: Mapping[str, Any], server: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``hardware`` as the twin sees it under this engine: llama.cpp on the CPU box is box
    ``cpu-llamacpp`` (its own calibration file), SGLang on B300 stays ``b300``; the engine is
    noted (``perf.engine``) for a GPU box with no calibration of its own (``gpu-<engine>.yaml``)."""
    engine = engine_of(server)
    perf = {**(hardware.get("perf") or {}), "engine": engine}
    if engine == "sglang" or perf.get("box"):
        return {**hardware, "perf": perf}
    return {**hardware, "perf": {**perf, "box": f"{box_name(hardware)}-{engine}"}}


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
    engine = str(perf.get("engine") or "sglang")
    if engine != "sglang" and box.endswith(f"-{engine}"):
        name = ""  # the profile's own file is another engine's (SGLang's) constants
    for folder in (user_dir(), SHIPPED_DIR):
        candidate = folder / f"{box}.yaml"
        if candidate.is_file():
            return candidate
        candidate = folder / f"{name}.yaml"
        if name and candidate.is_file():
            return candidate
    if kind_of(hardware) == "cpu":
        return None
    for folder in (user_dir(), SHIPPED_DIR):  # a GPU box nobody measured: the engine's constants
        candidate = folder / f"{GPU_ENGINE_PREFIX}{engine}.yaml"
        if candidate.is_file():
            return candidate
    return None


# A GPU box with no calibration of its own runs on its engine's constants, fitted on public figures
# of many boxes and models (sweep/sim/calibrations/gpu-<engine>.yaml: benchmarks/public_figures.py).
GPU_ENGINE_PREFIX = "gpu-"


def load(path: Path, hardware: Mapping[str, Any] | None = None) -> Calibration:
    """A calibration file over the priors (missing constants stay at their prior)."""
    from sweep.compose.input_files import read_calibration

    try:  # the file's shape is read where the config check reads it (one reader of the format)
        doc = read_calibration(KEY, Path(path))
    except ConfigError as err:
        raise CalibrationError(err.key, err.message) from None
    kind = str(doc.get("kind") or "") or (kind_of(hardware) if hardware else
                                           ("nvlink" if doc.get("nvlink", True) else "pcie"))
    values = prior_values(kind)
    workload_names = fitted_names("workload")
    for name, value in doc["constants"].items():
        known = name in values or (WL in name and base_name(name) in workload_names)
        if not known or not isinstance(value, (int, float)) or isinstance(value, bool):
            raise CalibrationError(KEY, f"{path}: constants.{name} is not a known number "
                                   f"(known: {', '.join(fitted_names())}; <name>{WL}<workload> for "
                                   f"{', '.join(workload_names)})")
        if not _in_domain(name, float(value), kind):
            raise CalibrationError(KEY, f"{path}: constants.{name} = {value!r} is outside what the constant "
                                   f"can be ({_domain(name, kind)})")
        values[name] = float(value)
    unc = doc.get("uncertainty") or {}
    cov = tuple(tuple(float(x) for x in row) for row in unc.get("covariance") or ())
    box = str(doc.get("box") or box_name(hardware or {}))
    return Calibration(values=values, source=f"calibrated: {box} ({path})", box=box, path=str(path),
                       calibrated=True, names=tuple(unc.get("names") or ()), covariance=cov,
                       residual_sd=float(unc.get("residual_sd_log") or 0.0),
                       points=len(doc.get("points") or ()), key=("file", str(path)), kind=kind,
                       residual_by_kind=tuple(sorted((str(k), float(v)) for k, v in
                                                     (unc.get("residual_sd_log_by_kind") or {}).items())),
                       figures=tuple(sorted((str(k), v) for k, v in (doc.get("figures") or {}).items()
                                            if k in FIGURES)),
                       noise_by_kind=_by_kind(unc.get("noise_sd_log_by_kind")),
                       model_by_kind=_by_kind(unc.get("model_sd_log_by_kind")),
                       box_state=_box_state(path, doc.get("box_state")))


def _box_state(path: Path, block: Any) -> dict[str, Any]:
    """A calibration's ``box_state`` block (calfile.box_state): numbers finite and >= 0, shares in
    [0, 1]; anything else is a calibration that cannot be used (one line naming it)."""
    if block is None:
        return {}
    if not isinstance(block, Mapping):
        raise CalibrationError(KEY, f"{path}: box_state is not a mapping")
    out: dict[str, Any] = {}
    for name, value in block.items():
        values = value if isinstance(value, list) else [value]
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 \
                    or (str(name).endswith("_share") and v > 1):
                raise CalibrationError(KEY, f"{path}: box_state.{name} = {value!r} is not a "
                                       f"{'share in [0, 1]' if str(name).endswith('_share') else 'number >= 0'}")
        out[str(name)] = value
    return out


def _by_kind(table: Any) -> tuple[tuple[str, float], ...]:
    return tuple(sorted((str(k), float(v)) for k, v in (table or {}).items()
                        if isinstance(v, (int, float)) and not isinstance(v, bool)))


@lru_cache(maxsize=64)
def _cached(name: str, box: str, explicit: str, kind: str, user: str, engine: str = "") -> Calibration:
    hardware: dict[str, Any] = {"name": name, "perf": {"box": box, "calibration": explicit or None,
                                                       "nvlink": kind == "nvlink", "engine": engine or None}}
    if kind == "cpu":
        hardware.update({"arch": "cpu", "num_gpus": 0})
    path = find(hardware)
    return load(path, hardware) if path else uncalibrated(hardware)


def for_hardware(hardware: Mapping[str, Any]) -> Calibration:
    """The calibration the simulator uses for this hardware (cached per process)."""
    perf = hardware.get("perf") or {}
    explicit = perf.get("calibration")
    explicit_s = "none" if explicit is False else str(explicit or "")
    return _cached(str(hardware.get("name") or ""), box_name(hardware), explicit_s,
                   kind_of(hardware), str(user_dir()), str(perf.get("engine") or ""))


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
