"""The Hydra app: one job = one trial (or, with dry_run=true, its launch), and the exit status.

Exit status of ``python -m sweep`` (scripts and CI rely on it):

* 0: the trial ran and is ``ok`` (or ``pruned``); a dry run; ``--cfg``;
* 1: a single run whose trial ``failed`` (``bench_errors``, ``crashed``,
  ``cuda_graph`` ...), or a multirun / search in which *every* trial failed
  (a multirun finishes every job first: some failed configs are what a sweep
  is for); a full disk (one line, see :mod:`sweep.io.atomic`);
* 2: bad input (one line naming the key), before anything started;
* 130: Ctrl-C (the trial is recorded ``interrupted``).

The codes are :mod:`sweep.errors`' ``EXIT_*``; errors are raised here and
reported once, by ``python -m sweep``'s boundary (``sweep/__main__.py``).
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

import sweep.compose.resolvers  # noqa: F401  (registers ${sweep.*} before composition)
from sweep import secrets
from sweep.io.atomic import DiskFull
from sweep.errors import EXIT_FAILED, StopRun
from sweep.launch import Launch

# (multirun?, trial status) of every trial this process ran
_outcomes: list[tuple[bool, str]] = []
_sweep_dirs: list[Path] = []  # multiruns this process ran (their trials may run in pool workers)
_started = datetime.now(timezone.utc).replace(microsecond=0)


def note_sweep_dir(sweep_dir: Path) -> None:
    """The Hydra callback: a multirun of this process ended (its trials may have run elsewhere)."""
    _sweep_dirs.append(Path(sweep_dir))


def _statuses_on_disk() -> list[str]:
    """Status of every trial of this process's multiruns, from their result files."""
    from sweep.record.result import iter_results

    out = []
    for sweep_dir in _sweep_dirs:
        # an unreadable result file counts as a failed trial (a truncated write, a full disk)
        for _, doc in iter_results(sweep_dir, on_error=lambda _p, _e: out.append("failed")):
            try:
                started = datetime.fromisoformat(str(doc.trial.started))
            except ValueError:
                continue
            if started >= _started:
                out.append(str(doc.status))
    return out


def exit_status() -> int:
    """0, or 1 when the single trial failed / every trial of the multirun failed (module docstring)."""
    single = [status for multi, status in _outcomes if not multi]
    if single:
        return EXIT_FAILED if single[-1] == "failed" else 0
    if not _sweep_dirs:  # no multirun ended here (a dry run, or a pool worker: its controller judges)
        return 0
    statuses = [status for multi, status in _outcomes if multi] or _statuses_on_disk()
    return EXIT_FAILED if statuses and all(s == "failed" for s in statuses) else 0


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

    secrets.install_log_masking()
    trial_cfg = from_omegaconf(cfg)  # a ConfigError: one line at the boundary (checked up front anyway)
    from hydra.core.hydra_config import HydraConfig

    from sweep.trial.port import place

    # the port its server listens on: server.port when given, else the next free one from it
    trial_cfg, launch, ports = place(cfg, trial_cfg, list(HydraConfig.get().overrides.task))
    if trial_cfg.dry_run:
        secrets.configure(trial_cfg.secret_names)
        secrets.remember(launch.secrets)
        print_dry_run(launch, trial_cfg.simulated, trial_cfg.server.secret_flags)
        return None
    from sweep.trial.run import run_trial

    mode = HydraConfig.get().mode
    try:
        ret = run_trial(trial_cfg, launch, cfg, ports=ports)
    except DiskFull as exc:  # the servers were stopped; the whole run ends (not one job of a grid)
        raise StopRun() from exc
    multirun = mode is not None and mode.name == "MULTIRUN"
    _outcomes.append((multirun, str(ret.get("status"))))
    if not multirun and ret.get("result_path"):
        _say_outputs(Path(str(ret["result_path"])), trial_cfg.mlflow.enabled)
    return ret


def _say_outputs(result_path: Path, mlflow: bool) -> None:
    """A single run ends with its report, its plots and its MLflow run (a multirun: the callback)."""
    import logging

    from sweep.record.result import TrialResult
    from sweep.record.tracking import run_line
    from sweep.report import outputs

    try:
        report = outputs.single_report(result_path)
        doc = TrialResult.load(result_path)
        line = run_line(doc) if mlflow else None
        outputs.say(outputs.where_lines(report, outputs.plot_files(result_path.parent / outputs.PLOTS_DIR),
                                        line))
    except Exception as exc:  # noqa: BLE001 - a report bug never fails the run
        logging.getLogger(__name__).warning("could not write the report: %s", exc)
