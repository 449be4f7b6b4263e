"""Where a trial runs: its job dir, its sweep, its overrides (from Hydra, or given)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path


@dataclass(frozen=True, slots=True)
class TrialContext:
    job_dir: Path
    sweep_dir: Path | None = None  # a multirun's dir; None for a single run
    job_num: int = 0
    overrides: tuple[str, ...] = field(default_factory=tuple)
    original_cwd: Path = field(default_factory=Path.cwd)  # where the user launched from
    choices: tuple[tuple[str, str], ...] = field(default_factory=tuple)  # config groups composed (names)

    @property
    def sweep_id(self) -> str | None:
        """``<date>/<time>``: unique across days (the bare time repeats)."""
        return f"{self.sweep_dir.parent.name}/{self.sweep_dir.name}" if self.sweep_dir else None

    def elsewhere(self, job_dir: Path) -> TrialContext:
        return replace(self, job_dir=job_dir)


def hydra_context() -> TrialContext:
    """Job dir, sweep dir and job number from Hydra (or cwd outside Hydra)."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
    except (ImportError, ValueError):
        return TrialContext(job_dir=Path.cwd())
    multirun = hc.mode == RunMode.MULTIRUN
    sweep_dir = Path(hc.sweep.dir) if multirun else None
    if sweep_dir is not None and not sweep_dir.is_absolute():
        sweep_dir = Path(hc.runtime.cwd) / sweep_dir
    return TrialContext(
        job_dir=Path(hc.runtime.output_dir),
        sweep_dir=sweep_dir,
        job_num=int(getattr(hc.job, "num", 0) or 0) if multirun else 0,
        overrides=tuple(hc.overrides.task),
        original_cwd=Path(hc.runtime.cwd),
        choices=tuple((str(k), str(v)) for k, v in (hc.runtime.choices or {}).items()
                      if v is not None and "/" not in str(k)),
    )
