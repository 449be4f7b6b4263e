"""Run the autoregressive baseline first when none exists (baseline.auto_run).

The baseline is the same composition with ``spec=none``, run as its own
trial in ``<job dir>/baseline/`` so it leaves its own result.json (and MLflow
run) that later trials find through ``results.search_dirs``. The trial hands
in how to run a trial (``run``), so this module does not import the trial.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

from sweep.compose.config import TrialConfig
from sweep.launch import Launch
from sweep.trial.context import TrialContext
from sweep.trial.port import Ports


def search_roots(cfg: TrialConfig, ctx: TrialContext) -> list[Path]:
    """Where earlier results (baselines) are looked up: results.search_dirs, this sweep's dir
    (a grid's own spec=none job vouches for its later jobs even when hydra.sweep.dir is outside
    search_dirs, as the sweep's report pairs them) and this job."""
    roots = [Path(r) if Path(r).is_absolute() else ctx.original_cwd / r for r in cfg.results.search_dirs]
    sweep_dir = ctx.sweep_dir
    if sweep_dir is not None and not any(sweep_dir.resolve().is_relative_to(r.resolve()) for r in roots):
        roots.append(sweep_dir)
    roots.append(ctx.job_dir)
    return roots


def wanted(cfg: TrialConfig, ctx: TrialContext) -> bool:
    """Whether this trial runs the baseline first (``baseline.auto_run``).

    ``auto`` (the default): for a real engine, whose report would otherwise have no
    speedup, unless the grid this job belongs to has a ``spec=none`` job of its own
    (that job is the baseline); never for the simulator, whose runs cost real time
    but no GPU (run ``spec=none`` or ``baseline.auto_run=true`` there by choice).
    """
    if cfg.spec.algorithm == "none":
        return False
    setting = cfg.results.baseline_auto_run
    if setting != "auto":
        return bool(setting)
    return not cfg.simulated and not _grid_has_baseline(ctx.sweep_dir)


def _grid_has_baseline(sweep_dir: Path | None) -> bool:
    """A job of this grid (its multirun.yaml's overrides, expanded) runs ``spec=none``."""
    if sweep_dir is None or not (sweep_dir / "multirun.yaml").is_file():
        return False
    import yaml

    from sweep.compose.cmdline import expand

    try:
        doc = yaml.safe_load((sweep_dir / "multirun.yaml").read_text()) or {}
        task = list(((doc.get("hydra") or {}).get("overrides") or {}).get("task") or [])
        jobs = expand(task, multirun=True)
    except Exception:  # noqa: BLE001 - unreadable: the baseline lookup decides (runs it if none)
        return False
    return any(o.replace(" ", "") in ("spec=none", "+spec=none") for job in jobs for o in job)


def ensure_baseline(cfg: TrialConfig, ctx: TrialContext,
                    run: Callable[[TrialConfig, Launch, TrialContext, Ports | None], Any]) -> Path | None:
    """Run ``spec=none`` with this trial's other overrides unless a baseline exists; its result path."""
    from sweep.compose import cmdline
    from sweep.compose.config import from_omegaconf
    from sweep.score import speedup
    from sweep.trial.port import place

    if speedup.find(cfg.raw, cfg.simulated, search_roots(cfg, ctx)):
        return None
    keep = [o for o in ctx.overrides
            if not o.lstrip("+~").startswith(("spec", "baseline.auto_run", "hydra"))]
    own = [*keep, "spec=none", "baseline.auto_run=false"]
    node = cmdline.compose(own)
    bcfg, launch, ports = place(node, from_omegaconf(node), keep)  # its port, as the trial's own
    job_dir = ctx.job_dir / "baseline"
    # its own overrides: what its run name and its rerun command are made of
    run(bcfg, launch, dataclasses.replace(ctx.elsewhere(job_dir), overrides=tuple(own)), ports)
    return job_dir / "result.json"
