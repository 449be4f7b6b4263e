"""The Hydra app: one job = one trial (or, with dry_run=true, its launch)."""

from __future__ import annotations

import sys
from typing import Any

import hydra
from omegaconf import DictConfig

import sweep.compose.resolvers  # noqa: F401  (registers ${sweep.*} before composition)
from sweep import secrets
from sweep.errors import EXIT_CONFIG, ConfigError
from sweep.launch import Launch


def print_dry_run(launch: Launch, simulated: bool, secret_flags: tuple[str, ...] = ()) -> None:
    """The launch, human-readable, ending with the one-line shell command (secrets masked)."""
    from rich.console import Console

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    console.print("[bold]dry run[/bold]: nothing started" + (" (simulated server)" if simulated else ""))
    console.print("  argv: " + " ".join(secrets.mask_argv(launch.argv, secret_flags, launch.secrets)))
    for k, v in sorted(secrets.mask_env(launch.env, launch.secrets).items()):
        console.print(f"  env:  {k}={v}")
    sys.stderr.flush()
    print(f"fingerprint: {launch.fingerprint}")
    print(launch.shell_line())
    sys.stdout.flush()


@hydra.main(config_path="pkg://sweep.conf", config_name="config", version_base="1.3")
def task(cfg: DictConfig) -> Any:
    from sweep.compose.config import from_omegaconf
    from sweep.compose.render import render

    secrets.install_log_masking()
    try:
        trial_cfg = from_omegaconf(cfg)
    except ConfigError as err:
        from hydra.core.hydra_config import HydraConfig

        mode = HydraConfig.get().mode
        if mode is not None and mode.name == "RUN":
            print(secrets.mask_text(err.one_line()), file=sys.stderr)
            raise SystemExit(EXIT_CONFIG) from None
        raise
    launch = render(trial_cfg)
    if trial_cfg.dry_run:
        secrets.configure(trial_cfg.secret_names)
        secrets.remember(launch.secrets)
        print_dry_run(launch, trial_cfg.simulated, trial_cfg.server.secret_flags)
        return None
    from sweep.trial.run import run_trial

    return run_trial(trial_cfg, launch, cfg)
