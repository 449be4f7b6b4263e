"""One launcher per name per process, and the guarantee that none outlives us.

The jobs of a Hydra multirun run one after another in the same process, so
a process-wide launcher lets job N+1 reuse the server job N left ready
(matching fingerprint), and the multirun's end -- or this process's exit --
stops it. Termination paths, and what covers each:

* normal end, exception, ``sys.exit``: :func:`stop_all` via ``atexit``;
* Ctrl-C (SIGINT): Python raises KeyboardInterrupt; the trial's ``finally``
  and then atexit stop the server;
* SIGTERM / SIGHUP (``kill``, closed terminal, a batch system's timeout):
  by default they end Python *without* atexit. We install a handler that
  raises KeyboardInterrupt in the main thread instead, so they follow the
  exact path of Ctrl-C (result written as ``interrupted``, server stopped).
  It is installed once, from the main thread, only over the default
  disposition (an application's own handler is left alone);
* SIGKILL (or the OOM killer): nothing in-process can run; each local
  server's reaper process (launchers._reaper) stops it within
  ``launcher.reap_grace_s``, a process-mode SSH server's watchdog on the box
  within ``remote_lease_s`` + ``reap_grace_s`` (launchers._ssh_watchdog).
"""

from __future__ import annotations

import atexit
import signal
import threading
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from launchers.base import ServerLauncher
    from sweep.launch import LauncherSettings

_lock = threading.RLock()
_launchers: dict[str, ServerLauncher] = {}
_signals_installed = False

# Settings that name *which* machine a launcher drives; a change means a new
# launcher (the old one's server is stopped). Other settings (timeouts) are
# simply updated on the existing instance, which keeps its server.
IDENTITY_KEYS = ("host", "port", "user", "gateway", "mode", "unit", "workdir", "key_filename")


def _identity(cfg: LauncherSettings) -> tuple[Any, ...]:
    return (cfg.name, *(getattr(cfg.ssh, k) if cfg.ssh is not None else None for k in IDENTITY_KEYS))


def _create(cfg: LauncherSettings) -> ServerLauncher:
    """The launcher class the backend table names for ``cfg.name``, imported only now
    (Fabric for launcher=ssh); launcher=slurm's job starts its server with the local one."""
    from sweep.launch import BACKENDS, load

    entry = BACKENDS.get(cfg.name)
    if entry is None:
        raise ValueError(f"launcher.name: unknown launcher {cfg.name!r} "
                         f"(allowed: {', '.join(BACKENDS)})")
    launcher: ServerLauncher = load(entry.server)(cfg)
    return launcher


def get_launcher(cfg: LauncherSettings) -> ServerLauncher:
    """The process-wide launcher for ``cfg.name`` (created on first use)."""
    install_signal_handlers()
    with _lock:
        current = _launchers.get(cfg.name)
        if current is not None and _identity(current.settings) != _identity(cfg):
            current.stop()
            current = None
        if current is None:
            current = _create(cfg)
            _launchers[cfg.name] = current
        else:
            current.settings = cfg
        return current


def stop_all(*, force: bool = False) -> None:
    """Stop every server this process started.

    Launchers with ``keep_server: true`` are skipped unless ``force``; such a
    launcher logs, once, that its server stays up and how to stop it (the
    next run reuses it through its state file, see ``launchers._state``).
    Every launcher is tried even if one fails; the first error is re-raised.
    """
    with _lock:
        launchers = list(_launchers.values())
    error: BaseException | None = None
    for launcher in launchers:
        if not force and launcher.settings.keep_server:
            announce = getattr(launcher, "announce_kept", None)
            if announce is not None:
                try:
                    announce()
                except Exception:  # noqa: BLE001 - a notice never fails the run
                    pass
            continue
        try:
            launcher.stop()
        except BaseException as exc:  # noqa: BLE001 - keep stopping the others
            error = error or exc
    if error is not None:
        raise error


def _atexit_stop_all() -> None:
    try:
        stop_all()
    except BaseException:  # noqa: BLE001 - exit must not turn into a traceback storm
        pass


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"received {signal.Signals(signum).name}")


def install_signal_handlers() -> None:
    """Make SIGTERM/SIGHUP behave like Ctrl-C (once, main thread, default handlers only)."""
    global _signals_installed
    with _lock:
        if _signals_installed or threading.current_thread() is not threading.main_thread():
            return
        _signals_installed = True
        for name in ("SIGTERM", "SIGHUP"):
            sig = getattr(signal, name, None)
            if sig is not None and signal.getsignal(sig) == signal.SIG_DFL:
                signal.signal(sig, _raise_interrupt)


atexit.register(_atexit_stop_all)
