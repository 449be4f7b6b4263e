"""Server lifecycle backends: local process group, SSH (systemd or process).

``get_launcher(cfg)`` returns the process-wide launcher for a config (jobs of
one multirun share it and reuse its server); ``stop_all()`` stops every
server this process started (also run at exit and on SIGTERM/SIGHUP, see
:mod:`launchers.registry`). Importing this package stays cheap: backends are
imported when first used. The box checks of ``python -m sweep.doctor`` are
:func:`launchers.doctor.diagnose`. ``reap_with_me()`` is the environment that
ties the servers of a child process (a host pool's worker) to this process too
(:mod:`launchers._reaper`).
"""

from __future__ import annotations

from launchers._reaper import reap_with_me
from launchers.base import REASONS, LaunchFailure, ServerHandle, ServerLauncher
from launchers.registry import get_launcher, install_signal_handlers, stop_all

__all__ = [
    "REASONS", "LaunchFailure", "ServerHandle", "ServerLauncher",
    "get_launcher", "install_signal_handlers", "reap_with_me", "stop_all",
]
