"""The calibration file of one box: what ``python -m sweep.calibrate`` writes.

Deterministic text (no dates, no absolute paths; constants rounded to 4
significant digits), so the same result files give the same bytes and a
refit can be checked against the shipped file. Read back by
:func:`sweep.sim.constants.load`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import yaml

from sweep.sim import constants as K
from sweep.sim.fit import Fit
from sweep.sim.measured import Loaded, Point


def profiles_for(box: str, seen: set[str]) -> list[str]:
    """Hardware profiles of this box: the project's conf/hardware ones plus any in the data."""
    names = set(seen)
    try:
        import sweep.conf

        folder = Path(sweep.conf.__file__).parent / "hardware"
        for path in folder.glob("*.yaml"):
            doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            if K.box_name(doc) == box:
                names.add(str(doc.get("name") or path.stem))
    except (ImportError, OSError, yaml.YAMLError):
        pass
    return sorted(names)


def box_state(points: Sequence[Point]) -> dict[str, Any]:
    """The state of the box while the fitted points were measured (sweep/bench/boxstate.py): the
    median and range of their 1-minute load averages (a point: the median over its rounds), the
    share of points whose load exceeded the box's cores (tasks queued for a core: the only sign
    files recorded before the box state have), and where cells recorded it, the share measured on a
    busy box and the median other work in cores. ``python -m sweep.sim.predict`` compares it with
    the box it is asked about (sweep/sim/boxcheck.py). Empty when no point says anything."""
    import statistics

    tok = [p for p in points if p.kind == "output_tok_s"] or list(points)
    loads = [statistics.median(p.load_avg) for p in tok if p.load_avg]
    cpus = next((p.cpus for p in tok if p.cpus), None)
    recorded = [p for p in tok if p.busy is not None]
    others = [p.others_cpu for p in recorded if p.others_cpu is not None]
    out: dict[str, Any] = {}
    if not loads and not recorded:  # the cores alone say nothing about what else ran
        return {}
    if loads:
        out.update(load_avg_median=round(statistics.median(loads), 2),
                   load_avg_range=[round(min(loads), 2), round(max(loads), 2)])
    if cpus:
        out["cpus"] = int(cpus)
        if loads:
            out["overloaded_share"] = round(sum(v > cpus for v in loads) / len(loads), 3)
    if recorded:
        out["recorded"] = len(recorded)
        out["busy_share"] = round(sum(bool(p.busy) for p in recorded) / len(recorded), 3)
        if others:
            out["others_cpu_median"] = round(statistics.median(others), 2)
    return {"points": len(tok), **out} if out else {}


def document(box: str, result: Fit, loaded: Loaded) -> dict[str, Any]:
    cal = result.calibrations[box]
    points = [(p, v) for p, v in zip(loaded.points, result.predicted) if p.box == box]
    files = sorted({p.file for p, _ in points})
    sha = {path.name: digest for path, digest in loaded.files}
    idx = result.box_params(box)
    workloads = sorted({p.workload for p, _ in points if p.workload})
    seen = {json.dumps(K.figures_of(p.hardware), sort_keys=True) for p, _ in points}
    figures = json.loads(seen.pop()) if len(seen) == 1 else {}  # the figures every point ran with
    return {
        "schema": K.SCHEMA,
        "box": box,
        "profiles": profiles_for(box, {str(p.hardware.get("name")) for p, _ in points}),
        "nvlink": result.boxes[box] == "nvlink",
        "kind": result.boxes[box],
        "model": sorted({str(p.model.get("name") or "?") for p, _ in points}),
        "workloads": workloads,
        "inputs": [{"file": f, "sha256": sha.get(f, "")} for f in files],
        # what the efficiencies below are fractions of: a prediction with this file on a box whose
        # hardware.perf.figures is 'calibration' (a CPU box: measured, not a spec sheet) runs on these
        **({"figures": figures} if figures else {}),
        # what the box was doing while its points were measured: a twin fitted on a busy box answers
        # for a busy box (python -m sweep.sim.predict says when it is asked about another state)
        **({"box_state": state} if (state := box_state([p for p, _ in points])) else {}),
        "constants": {result.params[i].name: cal.values[result.params[i].name] for i in idx},
        "status": {result.params[i].name: result.status(i) for i in idx},
        "uncertainty": {
            "residual_sd_log": cal.residual_sd,
            **({"residual_sd_log_by_kind": dict(cal.residual_by_kind)} if cal.residual_by_kind else {}),
            # the residual split: one measurement's run-to-run noise, measured from the points' repeats
            # (kinds without repeats: not measured), and the model's error beyond the points' noise
            **({"noise_sd_log_by_kind": dict(cal.noise_by_kind)} if cal.noise_by_kind else {}),
            **({"model_sd_log_by_kind": dict(cal.model_by_kind)} if cal.model_by_kind else {}),
            "names": list(cal.names),
            "covariance": [list(row) for row in cal.covariance],
        },
        "points": [{"label": p.label, "measured": p.measured, "fitted": float(f"{v:.4g}"),
                    "error_pct": float(f"{100 * (v / p.measured - 1):.2f}"), "source": p.source}
                   for p, v in points],
    }


HEADER = """\
# Calibration of the specsweep simulator (the twin) for box {box!r}.
# Written by `python -m sweep.calibrate` from real result files (inputs below);
# refit rather than edit. Loaded by the simulator for the profiles listed
# (docs/simulator.md, "Calibration"). status: fitted = the data pin it down,
# weak = partly, prior = the data cannot see it (it stays at its prior).
"""


def render(box: str, result: Fit, loaded: Loaded) -> str:
    from sweep import secrets

    # its points' sources quote the files' own commands (a landscape's recording command line):
    # masked here, where the calibration leaves the process, whatever a file carried in
    doc = secrets.mask_tree(document(box, result, loaded))
    parts = [HEADER.format(box=box)]
    for key, value in doc.items():  # constants and status one per line; lists and matrices compact
        flow = None if isinstance(value, list) or key == "uncertainty" else False
        parts.append(yaml.safe_dump({key: value}, sort_keys=False, default_flow_style=flow,
                                    width=120, allow_unicode=False))
    return "".join(parts)


def write(folder: Path, box: str, result: Fit, loaded: Loaded) -> Path:
    """``<folder>/<box>.yaml``; the box's name came from result files, so it is checked to be one
    plain name that stays inside ``folder`` (:func:`sweep.io.readback.inside`)."""
    from sweep.io import readback
    from sweep.io.atomic import write_atomic_text
    from sweep.errors import ConfigError

    try:
        path = readback.inside(folder, box, ".yaml", "box")
    except readback.Invalid as exc:
        raise ConfigError("results", str(exc)) from None
    return write_atomic_text(path, render(box, result, loaded))
