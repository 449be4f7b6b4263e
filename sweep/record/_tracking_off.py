"""Tracking off for the rest of a sweep once MLflow did not answer in time.

Why: a tracking server that accepts connections and never answers held every
trial for ~95 s (MLflow's request timeout times its retries); a 2-trial sweep
took 407 s. MLflow is a view of the result files, so after the first timeout
(``mlflow.timeout_s``) it is switched off, with one warning, for the rest of
the sweep: in this process (the jobs of a multirun, an in-process search) and
in every other process of the sweep through ``<sweep dir>/mlflow_off.json``
(the workers of a host pool read it before each trial). Results stay on
disk; ``python -m sweep.sync`` uploads them later (it ignores the switch).
A new run of the sweep (a resumed search) starts with tracking on again.
"""

from __future__ import annotations

import logging
from pathlib import Path
from sweep import secrets
from sweep.io.atomic import now_iso, write_atomic

log = logging.getLogger("sweep.record.tracking")

MARKER = "mlflow_off.json"
_off: str | None = None  # why tracking is off in this process (None: it is on)


def _marker(sweep_dir: str | Path | None) -> Path | None:
    return Path(sweep_dir) / MARKER if sweep_dir else None


def reason(sweep_dir: str | Path | None = None) -> str | None:
    """Why tracking is off for this process / this sweep, or None."""
    global _off
    if _off is not None:
        return _off
    marker = _marker(sweep_dir)
    if marker is not None and marker.is_file():
        try:
            import json

            _off = str(json.loads(marker.read_text()).get("reason") or "MLflow timed out earlier in this sweep")
        except (OSError, ValueError):
            _off = "MLflow timed out earlier in this sweep"
        log.info("MLflow tracking is off for this sweep (%s, %s)", _off, marker)
    return _off


def switch_off(sweep_dir: str | Path | None, why: str, sync_hint: str | Path) -> None:
    """Tracking off from now on (this process, and the sweep's other processes); warns once."""
    global _off
    first = _off is None
    _off = secrets.mask_text(why)
    marker = _marker(sweep_dir)
    if marker is not None:
        try:
            write_atomic(marker, {"reason": _off, "since": now_iso()})
        except OSError as exc:
            log.debug("could not write %s: %s", marker, exc)
    if first:
        log.warning("%s: MLflow tracking is off for the rest of this sweep; results stay on disk "
                    "(`python -m sweep.sync %s` uploads them later)", _off, sync_hint)


def clear(sweep_dir: str | Path | None) -> None:
    """A new run of the sweep: tracking on again (in this process and for the sweep)."""
    global _off
    _off = None
    marker = _marker(sweep_dir)
    if marker is not None:
        marker.unlink(missing_ok=True)


def is_timeout(exc: BaseException | None) -> bool:
    """A timeout anywhere in the exception's chain (ours, socket, urllib3, requests, MLflow's text)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if getattr(exc, "timed_out", False) or isinstance(exc, TimeoutError):
            return True
        name = type(exc).__name__
        if "Timeout" in name or "timed out" in str(exc).lower():
            return True
        exc = exc.__cause__ or exc.__context__
    return False
