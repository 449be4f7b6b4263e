"""Resume a grid: a job whose result is already complete is not run again.

Why: a ``-m`` grid stopped by Ctrl-C (or a dead box) used to start from
scratch when rerun, restarting servers for configs it had measured. Hydra's
basic sweeper gives each job the same directory on a rerun with the same
``hydra.sweep.dir`` (``<sweep_dir>/<job number>``), so the job finds its own
earlier ``result.json`` there. It is reused when it is a copy of the same config
(:func:`sweep.score.configs.config_id`: what runs and what is measured -- a port
picked again on the rerun changes nothing) measured with the same workload
settings (more requests per cell asked now: it runs again).

* ``ok``: reused;
* ``failed`` for a reason that repeats (``resume.deterministic_failures``,
  e.g. ``cuda_graph``): reused, unless ``resume.rerun_failed=true``;
* ``failed`` otherwise: run again;
* ``interrupted``, ``running`` (its controller died), ``pruned``: run again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sweep.compose.settings import Results
from sweep.record.result import TrialResult


@dataclass(frozen=True, slots=True)
class Reuse:
    doc: TrialResult
    why: str


def earlier(path: Path, fresh: TrialResult, settings: Results) -> Reuse | None:
    """The earlier result at ``path`` if it stands for this job, else None (run it)."""
    try:
        old = TrialResult.load(path)
    except (OSError, ValueError):
        return None
    from sweep.score.configs import config_id

    if (old.trial.config_id or config_id(old)) != (fresh.trial.config_id or config_id(fresh)):
        return None
    if old.config_section("workload") != fresh.config_section("workload"):
        return None
    if old.status == "ok":
        return Reuse(old, "complete (ok)")
    if old.status == "failed" and not settings.rerun_failed:
        reason = old.failure.reason if old.failure is not None else None
        if reason in settings.deterministic_failures:
            return Reuse(old, f"failed with {reason}, which repeats (resume.rerun_failed=true runs it again)")
    return None
