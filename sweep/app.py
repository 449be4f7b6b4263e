"""The Hydra app: one job = one trial (or, with dry_run=true, its launch)."""

from __future__ import annotations

import sys
from typing import Any

import hydra
from omegaconf import DictConfig

import sweep.resolvers  # noqa: F401  (registers ${sweep.*} before composition)
from sweep.errors import EXIT_CONFIG, ConfigError


def print_dry_run(launch: Any, simulated: bool) -> None:
    """The launch, human-readable, ending with the one-line shell command."""
    from rich.console import Console

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    console.print("[bold]dry run[/bold]: nothing started" + (" (simulated server)" if simulated else ""))
    console.print("  argv: " + " ".join(launch.redact(a) for a in launch.argv))
    for k, v in sorted(launch.env.items()):
        console.print(f"  env:  {k}={launch.redact(v)}")
    sys.stderr.flush()
    print(f"fingerprint: {launch.fingerprint}")
    print(launch.shell_line())
    sys.stdout.flush()


@hydra.main(config_path="pkg://sweep.conf", config_name="config", version_base="1.3")
def task(cfg: DictConfig) -> Any:
    from sweep.config import from_omegaconf
    from sweep.render import render

    try:
        trial_cfg = from_omegaconf(cfg)
    except ConfigError as err:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.get().mode.name == "RUN":
            print(err.one_line(), file=sys.stderr)
            raise SystemExit(EXIT_CONFIG) from None
        raise
    launch = render(trial_cfg)
    if trial_cfg.dry_run:
        print_dry_run(launch, trial_cfg.simulated)
        return None
    from sweep.trial import run_trial

    return run_trial(trial_cfg, launch, cfg)
