"""Run the autoregressive baseline first when none exists (baseline.auto_run).

The baseline is the same composition with ``spec=none``, run as its own
trial in ``<job dir>/baseline/`` so it leaves its own result.json (and MLflow
run) that later trials find through ``results.search_dirs``. The trial hands
in how to run a trial (``run``), so this module does not import the trial.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from sweep.compose.config import TrialConfig
from sweep.launch import Launch
from sweep.trial.context import TrialContext


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


def ensure_baseline(cfg: TrialConfig, ctx: TrialContext, run: Callable[[TrialConfig, Launch, TrialContext], Any]
                    ) -> Path | None:
    """Run ``spec=none`` with this trial's other overrides unless a baseline exists; its result path."""
    from sweep.compose import cmdline
    from sweep.compose.config import from_omegaconf
    from sweep.compose.render import render
    from sweep.score import speedup

    if speedup.find(cfg.raw, cfg.simulated, search_roots(cfg, ctx)):
        return None
    keep = [o for o in ctx.overrides
            if not o.lstrip("+~").startswith(("spec", "baseline.auto_run", "hydra"))]
    bcfg = from_omegaconf(cmdline.compose([*keep, "spec=none", "baseline.auto_run=false"]))
    job_dir = ctx.job_dir / "baseline"
    run(bcfg, render(bcfg), ctx.elsewhere(job_dir))
    return job_dir / "result.json"
