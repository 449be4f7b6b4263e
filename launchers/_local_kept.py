"""Servers kept by an earlier run: the local launcher's side of :mod:`launchers._state`.

A server started with ``keep_server=true`` outlives its controller; the next
run (a new process) finds it through its state file. :class:`KeptServers` (a
part the :class:`launchers.local.LocalLauncher` owns, with state of its own:
the state file of the current server and what was found on a busy port)
records every server the launcher spawns, finds a kept one that may be taken
over, says whether it can be reused as it is (same fingerprint, healthy) and
what holds a busy port. The rules for trusting a state file are in
:mod:`launchers._state`.
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from launchers import _state
from launchers.classify import hint
from launchers.readiness import check_health, health_paths
from sweep.io.atomic import now_iso

if TYPE_CHECKING:
    from sweep.launch import Endpoint, Launch, LauncherSettings

# Records keep the logger name they had before this module was split out of launchers.local.
logger = logging.getLogger("launchers.local")


class KeptServers:
    """State files of one local launcher: record, find, hand over, forget."""

    def __init__(self, settings: LauncherSettings) -> None:
        self.settings = settings
        self.state_path: Path | None = None  # the state file of the server we run or adopted
        self.port_note = ""  # what the state dir said about a busy port (for port_in_use)

    def _state_file(self, server: Endpoint) -> Path:
        return _state.state_path(_state.state_dir(self.settings), server.host, server.port)

    def find(self, server: Endpoint) -> _state.ServerState | None:
        """The server an earlier run kept on this port, if it is ours to take over now.

        A stale state file is removed; its pid is never signalled. A server whose
        recorded owner still runs is left alone. ``port_note`` says what was found.
        """
        self.port_note = ""
        path = self._state_file(server)
        try:
            kept = _state.read_state(path)
        except ValueError as exc:
            path.unlink(missing_ok=True)
            self.port_note = f"an unreadable state file was removed: {exc}"
            logger.warning("%s", self.port_note)
            return None
        if kept is None:
            return None
        if not kept.is_running():
            _state.remove_state(path, kept.pid)
            self.port_note = (f"a stale state file {path} was found and removed: pid {kept.pid} "
                              "is gone or is now another process")
            logger.info("%s", self.port_note)
            return None
        if kept.owner_alive() and not kept.owned_by_me():
            self.port_note = (f"it is the specsweep server pid {kept.pid} that the still-running "
                              f"specsweep process {kept.owner_pid} uses (state file {path})")
            return None
        self.state_path = path  # ours, and nobody else's any more
        return kept

    @staticmethod
    def why_not_reused(kept: _state.ServerState, launch: Launch, server: Endpoint) -> str:
        """Why a kept server must be stopped instead of reused ("" when it can be reused)."""
        if kept.fingerprint != launch.fingerprint or kept.base_url != server.base_url:
            return (f"its launch changed (fingerprint {kept.fingerprint} -> {launch.fingerprint})"
                    if kept.fingerprint != launch.fingerprint
                    else f"its URL changed ({kept.base_url} -> {server.base_url})")
        if not check_health(server.base_url, health_paths=health_paths(server.health_path),
                            api_key=server.api_key):
            return "it failed its health check"
        return ""

    def hand_over(self, kept: _state.ServerState) -> None:
        """Record this process as the owner of an adopted server."""
        if self.state_path is None:
            return
        try:
            me, my_ticks = _state.own_identity()
            kept.owner_pid, kept.owner_start_ticks = me, my_ticks
            kept.keep_server = self.settings.keep_server
            _state.write_state(self.state_path, kept)
        except OSError as exc:  # the server is usable; only the hand-over record failed
            logger.warning("could not update %s: %s", self.state_path, exc)

    def record(self, proc: subprocess.Popen[bytes], launch: Launch, server: Endpoint,
               log_path: Path, mark: str) -> None:
        """Describe the server we just spawned (best effort: a read-only home must not fail a trial)."""
        path = self._state_file(server)
        me, my_ticks = _state.own_identity()
        state = _state.ServerState(
            host=server.host, port=server.port, base_url=server.base_url, pid=proc.pid,
            pgid=proc.pid, start_ticks=_state.start_ticks(proc.pid), boot_id=_state.boot_id(),
            fingerprint=launch.fingerprint, log_path=str(log_path.resolve()),
            command=launch.shell_line(redact=True), started=now_iso(),
            keep_server=self.settings.keep_server, owner_pid=me, owner_start_ticks=my_ticks,
            mark=mark)
        try:
            _state.write_state(path, state)
        except OSError as exc:
            logger.warning("could not record the server in %s (%s): a kept server will not be "
                        "reused by the next run", path, exc)
            return
        self.state_path = path

    def forget(self, pid: int) -> None:
        """The server ``pid`` is stopped: remove its state file (only if it still names it)."""
        _state.remove_state(self.state_path, pid)
        self.state_path = None

    def port_in_use_message(self, server: Endpoint) -> str:
        where = f"{server.host}:{server.port}"
        if self.port_note:
            found = self.port_note
        else:
            directory = _state.state_dir(self.settings)
            others = [f"{p.name} names pid {st.pid} ({st.host}); stop it with: {st.stop_command()}"
                      for p, st in _state.states_on_port(directory, server.port) if st.is_running()]
            found = ("; ".join(others) if others
                     else f"no specsweep state file for it in {directory}")
        return (f"{where} is already in use by a process this launcher did not start ({found}); "
                + hint("port_in_use"))
