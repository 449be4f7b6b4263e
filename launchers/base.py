"""The launcher contract: make "a server with this fingerprint is up" true.

A launcher owns at most one server at a time. ``ensure`` reuses the running
server when its fingerprint matches the requested launch, otherwise stops
it and starts the new one, waits for readiness and returns a
:class:`ServerHandle`; when the server dies or never becomes ready it
raises :class:`LaunchFailure` with a classified reason and the log tail.
``log_mark``/``log_since`` give the server log for one trial's window only.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweep import secrets
from sweep.launch import LAUNCH_REASONS
from sweep.errors import EXIT_FAILED, SweepError

if TYPE_CHECKING:
    from sweep.launch import Endpoint, Launch, LauncherSettings

# Reasons a launch fails: the common ones and each backend's own (ssh_*, SLURM's job states),
# declared once in sweep.launch.
REASONS = LAUNCH_REASONS


class LaunchFailure(SweepError):
    """The server could not be made ready; ``reason`` is one of REASONS.

    A trial records it as a failed trial; one that reaches a command's boundary
    (``python -m sweep.doctor``) is one line, exit 1.
    """

    exit_code = EXIT_FAILED

    def __init__(self, reason: str, message: str, log_tail: str = "") -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.log_tail = log_tail

    def one_line(self) -> str:
        return " ".join(f"error: the server did not start ({self.reason}): {self.message}".split())


@dataclass
class ServerHandle:
    base_url: str
    fingerprint: str
    reused: bool
    startup_s: float
    log_path: Path | None = None
    pid: int | None = None
    info: dict[str, Any] = field(default_factory=dict)  # /get_server_info, version


class ServerLauncher(abc.ABC):
    """One server lifecycle backend (local process group, SSH...)."""

    def __init__(self, settings: LauncherSettings) -> None:
        self.settings = settings
        self._secrets: set[str] = set()  # this launcher's launch secrets, masked by _redact

    def _redact(self, text: str) -> str:
        """``text`` with the launches' secrets (and every other known one) masked."""
        return secrets.mask_text(text, self._secrets)

    @abc.abstractmethod
    def ensure(self, launch: Launch, server: Endpoint, trial_dir: Path) -> ServerHandle:
        """Reuse or (re)start the server for ``launch``; raise LaunchFailure."""

    def pick_port(self, host: str, preferred: int) -> int:
        """The port a server for ``host:preferred`` should listen on when the user did not fix
        one (``server.port`` not given). Only a launcher that can see its ports picks another;
        this one keeps ``preferred``."""
        return preferred

    @abc.abstractmethod
    def log_mark(self) -> Any:
        """An opaque position in the server log (start of a trial window)."""

    @abc.abstractmethod
    def log_since(self, mark: Any) -> str:
        """Server log text written since ``mark`` (secrets redacted)."""

    @abc.abstractmethod
    def alive(self) -> bool:
        """Whether the server this launcher started is still running."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop the server (SIGTERM, grace, SIGKILL of the group); idempotent."""
