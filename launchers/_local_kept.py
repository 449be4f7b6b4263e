"""Servers kept by an earlier run: the local launcher's side of :mod:`launchers._state`.

A server started with ``keep_server=true`` outlives its controller; the next
run (a new process) finds it through its state file. :class:`KeptServers`
(mixed into :class:`launchers.local.LocalLauncher`) records every server the
launcher spawns, adopts a kept one (same fingerprint, healthy) or stops it
(launch changed, unhealthy), and says what holds a busy port. The rules for
trusting a state file are in :mod:`launchers._state`.
"""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launchers import _state
from launchers.base import ServerHandle
from launchers.classify import hint
from launchers.readiness import check_health
from sweep.result import now_iso

if TYPE_CHECKING:
    from sweep.config import Server
    from sweep.render import Launch

# Records keep the logger name they had before this module was split out of launchers.local.
logger = logging.getLogger("launchers.local")


class KeptServers:
    """State-file handling of :class:`launchers.local.LocalLauncher`, which provides the rest.

    Caller holds the launcher's lock (``ensure`` / ``_start``).
    """

    # attributes and methods of LocalLauncher used here
    settings: Any
    _proc: subprocess.Popen[bytes] | _state.AdoptedProcess | None
    _state_path: Path | None
    _port_note: str
    _launch: Launch | None
    _server: Server | None
    _log_path: Path | None
    _info: dict[str, Any]
    _mark: str | None

    if TYPE_CHECKING:
        def stop(self) -> None: ...
        def _arm_reaper(self, mark: str | None, pgid: int | None, log_path: Path | None) -> None: ...
        def _note(self, what: str) -> None: ...
        def _health_paths(self, server: Server) -> tuple[str, ...]: ...
        def _handle(self, *, reused: bool, startup_s: float) -> ServerHandle: ...
        def _fetch_info(self, server: Server, launch: Launch) -> dict[str, Any]: ...

    def _state_file(self, server: Server) -> Path:
        return _state.state_path(_state.state_dir(self.settings), server.host, server.port)

    def _adopt_kept(self, launch: Launch, server: Server) -> ServerHandle | None:
        """Adopt (same fingerprint, healthy) or stop the server an earlier run kept on this port.

        Returns the handle of the adopted server, or None when the caller must
        start one. A stale state file is removed; its pid is never signalled.
        ``self._port_note`` says what was found, for a ``port_in_use`` message.
        """
        self._port_note = ""
        path = self._state_file(server)
        try:
            kept = _state.read_state(path)
        except ValueError as exc:
            path.unlink(missing_ok=True)
            self._port_note = f"an unreadable state file was removed: {exc}"
            logger.warning("%s", self._port_note)
            return None
        if kept is None:
            return None
        if not kept.is_running():
            _state.remove_state(path, kept.pid)
            self._port_note = (f"a stale state file {path} was found and removed: pid {kept.pid} "
                               "is gone or is now another process")
            logger.info("%s", self._port_note)
            return None
        if kept.owner_alive() and not kept.owned_by_me():
            self._port_note = (f"it is the specsweep server pid {kept.pid} that the still-running "
                               f"specsweep process {kept.owner_pid} uses (state file {path})")
            return None
        # Ours, and nobody else's any more: take it over.
        self._proc = _state.AdoptedProcess(kept)
        self._launch, self._server = launch, server
        self._log_path = Path(kept.log_path)
        self._state_path = path
        self._mark, self._info = kept.mark, {}
        # Ours now: if this run dies before it hands the server over again, the server goes
        # (and stopping it below also sweeps what escaped its group).
        self._arm_reaper(kept.mark, kept.pgid, self._log_path)
        why = ""
        if kept.fingerprint != launch.fingerprint or kept.base_url != server.base_url:
            why = (f"its launch changed (fingerprint {kept.fingerprint} -> {launch.fingerprint})"
                   if kept.fingerprint != launch.fingerprint
                   else f"its URL changed ({kept.base_url} -> {server.base_url})")
        elif not check_health(server.base_url, health_paths=self._health_paths(server),
                              api_key=server.api_key):
            why = "it failed its health check"
        if why:
            logger.info("kept server pid %s on %s:%s: %s; stopping it", kept.pid, server.host,
                     server.port, why)
            self._note(f"kept server: {why}: stopping it")
            self.stop()
            return None
        keep = bool(self.settings.get("keep_server", False))
        try:
            me, my_ticks = _state.own_identity()
            kept.owner_pid, kept.owner_start_ticks, kept.keep_server = me, my_ticks, keep
            _state.write_state(path, kept)
        except OSError as exc:  # the server is usable; only the hand-over record failed
            logger.warning("could not update %s: %s", path, exc)
        self._info = self._fetch_info(server, launch)
        self._note(f"adopted by specsweep pid {os.getpid()}: kept server pid {kept.pid} "
                   f"(started {kept.started}) reused, fingerprint={launch.fingerprint}")
        logger.info("reusing the server kept by an earlier run: pid %s at %s (started %s; "
                 "stop it with: %s)", kept.pid, server.base_url, kept.started, kept.stop_command())
        return self._handle(reused=True, startup_s=0.0)

    def _record_state(self, proc: subprocess.Popen[bytes], launch: Launch, server: Server,
                      log_path: Path, keep: bool, mark: str) -> None:
        """Describe the server we just spawned (best effort: a read-only home must not fail a trial)."""
        path = self._state_file(server)
        me, my_ticks = _state.own_identity()
        state = _state.ServerState(
            host=server.host, port=server.port, base_url=server.base_url, pid=proc.pid,
            pgid=proc.pid, start_ticks=_state.start_ticks(proc.pid), boot_id=_state.boot_id(),
            fingerprint=launch.fingerprint, log_path=str(log_path.resolve()),
            command=launch.shell_line(redact=True), started=now_iso(), keep_server=keep,
            owner_pid=me, owner_start_ticks=my_ticks, mark=mark)
        try:
            _state.write_state(path, state)
        except OSError as exc:
            logger.warning("could not record the server in %s (%s): a kept server will not be "
                        "reused by the next run", path, exc)
            return
        self._state_path = path

    def _port_in_use_message(self, server: Server) -> str:
        where = f"{server.host}:{server.port}"
        if self._port_note:
            found = self._port_note
        else:
            directory = _state.state_dir(self.settings)
            others = [f"{p.name} names pid {st.pid} ({st.host}); stop it with: {st.stop_command()}"
                      for p, st in _state.states_on_port(directory, server.port) if st.is_running()]
            found = ("; ".join(others) if others
                     else f"no specsweep state file for it in {directory}")
        return (f"{where} is already in use by a process this launcher did not start ({found}); "
                + hint("port_in_use"))
