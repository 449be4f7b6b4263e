"""Predicted vs measured: what the twin said about a config, next to what the trial measured.

When the Optuna sweeper pre-screens the space on the twin
(``hydra.sweeper.prescreen``), each job it runs gets
``++optuna.prescreen.{calibration,rank}``: which twin ranked it and where.
The trial then predicts its own cells with that twin (``sweep.sim.predict``,
no server, milliseconds) and records them beside the measured ones in
``result.json``'s ``prediction`` block; MLflow gets ``predicted_objective`` and
``prediction_error`` (sweep/record/_run_content.py). This is how the twin's
honest error on the configs a search actually ran is seen.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from sweep.compose.config import TrialConfig
from sweep.record.result import Prediction, TrialResult
from sweep.score.objective import objective_value
from sweep.score.predicted import predicted_objective

log = logging.getLogger(__name__)
DEFAULT_TWIN = "default"  # the box's own calibration (sweep/sim/calibrations/)


def requested(cfg: TrialConfig) -> Mapping[str, Any] | None:
    """``optuna.prescreen`` as the sweeper passed it, or None."""
    optuna = cfg.raw.get("optuna")
    node = optuna.get("prescreen") if isinstance(optuna, Mapping) else None
    return node if isinstance(node, Mapping) else None


def _sim_speedup(cfg: TrialConfig) -> float:
    """How much faster than the box the simulator ran (``server.sim.time_scale`` < 1: faster)."""
    if not cfg.server.simulated:
        return 1.0
    sim = cfg.raw.get("server", {}).get("sim") or {}
    scale = float(sim.get("time_scale") or 1.0)
    return 1.0 / scale if scale > 0 else 1.0


def record(cfg: TrialConfig, doc: TrialResult) -> None:
    """Fill ``doc.prediction`` when the sweeper asked for it; never fails the trial."""
    node = requested(cfg)
    if node is None:
        return
    try:
        from sweep.sim.predict import predict

        twin = node.get("calibration")
        calibration = None if twin in (None, "", DEFAULT_TWIN) else str(twin)
        pred = predict(cfg.raw, calibration=calibration)
        cells = pred["cells"]
        scale = _sim_speedup(cfg)
        if scale != 1.0:  # the sim runs time_scale x real time: compare like with like
            cells = [{**c, "output_tok_s": c["output_tok_s"] * scale,
                      "per_stream_tok_s": c["per_stream_tok_s"] * scale} for c in cells]
        predicted = predicted_objective(cells, cfg.objective)
        measured = objective_value(doc, cfg.objective) if doc.ok else None
        by_cell = {(c.context, c.concurrency): c.output_tok_s for c in doc.cells}
        rank = node.get("rank")
        doc.prediction = Prediction(
            calibration=str(pred["calibration"]), rank=int(rank) if rank is not None else None,
            objective=predicted, measured=measured,
            error=(measured / predicted - 1.0) if measured is not None and predicted else None,
            cells=[{"context": c["context"], "concurrency": c["concurrency"],
                    "predicted_output_tok_s": round(float(c["output_tok_s"]), 3),
                    "measured_output_tok_s": by_cell.get((c["context"], c["concurrency"]))}
                   for c in cells])
    except Exception as exc:  # noqa: BLE001 - a prediction is a note, never a failure
        log.warning("prediction not recorded: %s", exc)
