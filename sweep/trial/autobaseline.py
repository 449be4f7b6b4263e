"""Run the autoregressive baseline first when none exists (baseline.auto_run).

The baseline is the same composition with ``spec=none``, run as its own
trial in ``<job dir>/baseline/`` so it leaves its own result.json (and MLflow
run) that later trials find through ``results.search_dirs``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from sweep.config import TrialConfig


def ensure_baseline(cfg: TrialConfig, ctx: Mapping[str, Any]) -> Path | None:
    from sweep import baseline, preflight
    from sweep.config import from_omegaconf
    from sweep.render import render
    from sweep.trial import run_trial, search_roots

    if baseline.find(cfg.raw, cfg.simulated, search_roots(cfg, ctx)):
        return None
    keep = [o for o in ctx.get("overrides", [])
            if not o.lstrip("+~").startswith(("spec", "baseline.auto_run", "hydra"))]
    bcfg = from_omegaconf(preflight.compose([*keep, "spec=none", "baseline.auto_run=false"]))
    job_dir = Path(ctx["job_dir"]) / "baseline"
    bctx = dict(ctx, job_dir=job_dir)
    run_trial(bcfg, render(bcfg), ctx=bctx)
    return job_dir / "result.json"
