"""``launcher=ssh``: make "a server with this fingerprint is up" true on a remote box.

Same guarantees as the local launcher, over Fabric/SSH:

* **reuse** when the box already runs a server of ours with the same
  fingerprint (``process``: the fingerprint file next to the pid file;
  ``systemd``: the unit file's content) and it answers its health check;
* **pre-flight** (:mod:`launchers._ssh_preflight`) before the first start on
  a box: a wrong box is a ``preflight`` failure before anything restarts;
* **readiness from the controller** over HTTP -- directly, or through an SSH
  port forward when ``launcher.port_forward=true``, when the server listens
  only on the box's loopback, behind a gateway, or when the port turns out
  unreachable (listening on the box, refused from here);
* **crash detection**: the remote side is watched while waiting; a dead
  server is reported with its log tail and the reason
  :func:`launchers.classify.classify` finds in it;
* **SSH failures** are failed trials with their own reason
  (``ssh_unreachable``, ``ssh_auth``, ``ssh_host_key``, ``ssh_dropped``);
* **clean stop**: Ctrl-C while starting stops what we started; ``stop()``
  (called by ``launchers.stop_all`` at the end, unless ``keep_server``) stops
  the remote server and never raises -- if the box cannot be reached it says
  what still runs and how to stop it;
* **a killed controller** (process mode): a watchdog on the box, tied to this
  controller's SSH session, stops the server once the session has been gone
  for ``launcher.remote_lease_s`` (:mod:`launchers._ssh_watchdog`, which also
  says what it cannot cover).

Secrets (API key, SSH password/passphrase) are masked in every message, log
and handle this module produces (:mod:`sweep.secrets`). What the box must
offer for the pre-flight comes with the launch (``launch.box``).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launchers._ssh_conn import Remote
from launchers._ssh_preflight import Check, failures, rpath, run_checks
from launchers._ssh_tunnel import LocalForward
from launchers._ssh_unit import check_launch
from launchers._ssh_util import loopback, tcp_open
from launchers._ssh_watchdog import Guarded
from launchers.base import LaunchFailure, ServerHandle, ServerLauncher
from launchers.classify import classify, hint, tail
from launchers.readiness import check_health, fetch_info, health_paths, wait_ready

if TYPE_CHECKING:
    from sweep.launch import Endpoint, Launch, LauncherSettings, SSHSettings

log = logging.getLogger(__name__)
WATCH_INTERVAL_S = 1.0


class SSHLauncher(Guarded, ServerLauncher):
    """Owns at most one server on one box (a process group or a systemd unit)."""

    def __init__(self, settings: LauncherSettings) -> None:
        super().__init__(settings)
        self._lock = threading.RLock()
        self._remote: Remote | None = None
        self._backend: Any = None
        self._workdir: str | None = None
        self._launch: Launch | None = None
        self._server: Endpoint | None = None
        self._owned = False  # a server we started or adopted is (believed) running
        self._forward: LocalForward | None = None
        self._direct_ok: bool | None = None
        self._preflight_ok: set[tuple[Any, ...]] = set()
        self._trial_log: Path | None = None
        self._startup_text = ""
        self._info: dict[str, Any] = {}
        self._switch = False
        self._watch_error: LaunchFailure | None = None
        self._watchdog: Any = None  # process mode: _ssh_watchdog.Watchdog while we own a server

    @property
    def ssh(self) -> SSHSettings:
        assert self.settings.ssh is not None, "launcher=ssh settings without their ssh part"
        return self.settings.ssh

    # ------------------------------------------------------------------ connection

    def _connect(self) -> Remote:
        if self._remote is None:
            self._remote = Remote(self.ssh)
        self._remote.open()
        if self._workdir is None:
            wd = self.ssh.workdir
            res = self._remote.run(f"mkdir -p {rpath(wd)} && cd {rpath(wd)} && pwd -P",
                                   what="creating the work dir")
            lines = res.out.strip().splitlines()
            if not res.ok or not lines:
                raise LaunchFailure("preflight", f"cannot create launcher.workdir={wd} on "
                                    f"{self._remote.target.host}: {res.err.strip()[:200]}")
            self._workdir = lines[-1]
        if self._backend is None:
            if self.ssh.mode == "systemd":
                from launchers._ssh_systemd import SystemdBackend

                self._backend = SystemdBackend(self._remote, self._workdir, self.settings, self.ssh)
            else:
                from launchers._ssh_process import ProcessBackend

                self._backend = ProcessBackend(self._remote, self._workdir)
        return self._remote

    def _http_host(self) -> str:
        assert self._remote is not None
        host = self._remote.target.host
        conn = getattr(self._remote, "_conn", None)
        return getattr(conn, "host", None) or host  # ~/.ssh/config HostName applied by Fabric

    def _tunnel_needed(self, server: Endpoint) -> bool:
        if self.ssh.port_forward or self._direct_ok is False:
            return True
        assert self._remote is not None
        if self._remote.target.gateway:
            return True
        return loopback(server.host) and not loopback(self._http_host())

    def _base_url(self, server: Endpoint) -> str:
        if not self._tunnel_needed(server):
            host = self._http_host()
            return f"http://{'127.0.0.1' if loopback(host) else host}:{server.port}"
        remote_host = "127.0.0.1" if server.host in ("0.0.0.0", "::", "") else server.host
        fwd = self._forward
        if fwd is None or not fwd.active or fwd.remote != (remote_host, server.port):
            if fwd is not None:
                fwd.close()
            assert self._remote is not None
            self._forward = fwd = LocalForward(self._remote.transport, remote_host, server.port)
        return f"http://127.0.0.1:{fwd.port}"

    def _remote_listening(self, port: int) -> bool:
        assert self._remote is not None
        res = self._remote.run(f"ss -Hltn 2>/dev/null | awk '{{print $4}}' | grep -Eq '[:.]{port}$'",
                               what="probing the server port")
        return res.ok

    # ------------------------------------------------------------------ contract

    def ensure(self, launch: Launch, server: Endpoint, trial_dir: Path) -> ServerHandle:
        with self._lock:
            self._secrets |= set(launch.secrets)
            self._trial_log = Path(trial_dir) / "server.log"
            self._startup_text = ""
            try:
                return self._ensure(launch, server, Path(trial_dir))
            except LaunchFailure as f:
                raise LaunchFailure(f.reason, self._redact(f.message), self._redact(f.log_tail)) from None

    def _ensure(self, launch: Launch, server: Endpoint, trial_dir: Path) -> ServerHandle:
        self._connect()
        backend = self._backend
        check_launch(launch, systemd=self._backend.name == "systemd")
        paths = health_paths(server.health_path)
        running, same = backend.probe(launch)
        if running and same:
            url = self._base_url(server)
            healthy = check_health(url, health_paths=paths, api_key=server.api_key)
            if not healthy and not self._tunnel_needed(server) and self._remote_listening(server.port):
                self._direct_ok = False
                url = self._base_url(server)
                healthy = check_health(url, health_paths=paths, api_key=server.api_key)
            if healthy:
                self._launch, self._server, self._owned = launch, server, True
                self._info = self._info or fetch_info(url, server.api_key, self._secrets, server.info_paths)
                self._write_trial_log(f"specsweep: reused {backend.describe()}\n")
                self._guard()
                return self._handle(url, reused=True, startup_s=0.0)
        self._preflight(launch, server, port_owned=running)
        grace = self.settings.stop_grace_s
        t0 = time.monotonic()
        self._launch, self._server, self._info = launch, server, {}
        try:
            backend.start(launch, stop_grace_s=grace)
            self._owned = True
            self._guard()
            url = self._wait(server, paths)
        except LaunchFailure as failure:
            raise self._failure(failure, launch) from None
        except BaseException:
            self._stop_quietly()
            raise
        startup_s = time.monotonic() - t0
        self._info = fetch_info(url, server.api_key, self._secrets, server.info_paths)
        self._startup_text = self._redact(self._safe_log(backend.start_mark))
        self._write_trial_log("")
        return self._handle(url, reused=False, startup_s=startup_s)

    def log_mark(self) -> Any:
        with self._lock:
            if self._backend is None:
                return None
            self._connect()
            return self._backend.log_mark()

    def log_since(self, mark: Any) -> str:
        with self._lock:
            if self._backend is None:
                return ""
            self._connect()
            text = self._redact(self._backend.log_since(mark))
            self._write_trial_log(text)
            return text

    def alive(self) -> bool:
        with self._lock:
            if self._backend is None or not self._owned:
                return False
            self._connect()
            self._guard()  # after a reconnect: take the server over before the old lease ends
            return bool(self._backend.alive())

    def stop(self) -> None:
        """Stop the remote server we started; never raises (a warning says what is left)."""
        with self._lock:
            try:
                if self._owned and self._backend is not None:
                    self._connect()
                    self._backend.stop(self.settings.stop_grace_s)
                    self._unguard()
                self._owned = False
            except (LaunchFailure, OSError) as exc:
                what = self._backend.describe() if self._backend is not None else "the server"
                log.warning("could not stop %s on %s: %s -- it may still be running",
                            what, self.ssh.host, self._redact(str(exc)))
            finally:
                self._close()

    # ------------------------------------------------------------------ internals

    def _close(self) -> None:
        if self._forward is not None:
            self._forward.close()
            self._forward = None
        if self._remote is not None:
            self._remote.close()

    def _stop_quietly(self) -> None:
        try:
            if self._backend is not None:
                self._backend.stop(self.settings.stop_grace_s)
                self._unguard()
            self._owned = False
        except BaseException as exc:  # noqa: BLE001 - already failing; say what is left
            log.warning("could not stop the server on %s: %s", self.ssh.host, self._redact(str(exc)))

    def _preflight(self, launch: Launch, server: Endpoint, *, port_owned: bool) -> None:
        if not self.ssh.preflight:
            return
        key = (launch.argv[0], server.port, launch.box)
        if key in self._preflight_ok:
            return
        checks = self.checks(launch, server.port, port_owned=port_owned)
        bad = failures(checks)
        if bad:
            raise LaunchFailure("preflight", f"{self._remote.target.host if self._remote else '?'}: "
                                + "; ".join(f"{c.name}: {c.detail}" for c in bad)
                                + " (full table: python -m sweep.doctor with the same overrides)")
        self._preflight_ok.add(key)

    def checks(self, launch: Launch, port: int, *, port_owned: bool) -> list[Check]:
        """The pre-flight rows for this box (connects; starts nothing)."""
        remote = self._connect()
        return run_checks(lambda script: remote.run(script, what="running pre-flight checks"),
                          launch, port=port, port_owned=port_owned, mode=self.ssh.mode,
                          workdir=self.ssh.workdir, min_free_gb=self.ssh.min_free_gb, ssh=self.ssh)

    def probe(self, launch: Launch) -> tuple[bool, bool]:
        """(a server of ours runs on the box, it is this launch) -- for the doctor."""
        self._connect()
        return self._backend.probe(launch)

    def connection(self) -> tuple[str, str]:
        """(where: user@host:port, the server's SSH version) of the open connection."""
        remote = self._connect()
        return remote.target.label, str(getattr(remote.transport, "remote_version", "") or "")

    def _wait(self, server: Endpoint, paths: tuple[str, ...]) -> str:
        """Poll readiness; switch to a tunnel if the port proves unreachable directly."""
        deadline = time.monotonic() + self.settings.ready_timeout_s
        while True:
            url = self._base_url(server)
            self._switch, self._watch_error = False, None
            probing = not self._tunnel_needed(server) and self._direct_ok is None
            try:
                wait_ready(url, health_paths=paths, timeout_s=max(1.0, deadline - time.monotonic()),
                           poll_s=self.settings.poll_interval_s,
                           poll_max_s=self.settings.poll_max_s,
                           alive=self._watcher(server, probing), api_key=server.api_key)
                return url
            except LaunchFailure as f:
                if f.reason == "crashed" and self._watch_error is not None:
                    raise self._watch_error from None
                if f.reason == "crashed" and self._switch:
                    log.info("port %s not reachable directly: using an SSH port forward", server.port)
                    continue
                raise

    def _watcher(self, server: Endpoint, probing: bool) -> Any:
        state = {"last": 0.0, "alive": True}

        def alive() -> bool:
            now = time.monotonic()
            if now - state["last"] < WATCH_INTERVAL_S:
                return bool(state["alive"])
            state["last"] = now
            try:
                ok = bool(self._backend.alive())
                if ok and probing and self._direct_ok is None:
                    if tcp_open(self._http_host(), server.port):
                        self._direct_ok = True
                    elif self._remote_listening(server.port):
                        self._direct_ok, self._switch, ok = False, True, False
            except LaunchFailure as f:
                self._watch_error, ok = f, False
            state["alive"] = ok
            return ok

        return alive

    def _failure(self, failure: LaunchFailure, launch: Launch) -> LaunchFailure:
        """Mine this start's log, stop what is left, build the user-facing failure."""
        if failure.reason.startswith("ssh_"):
            return failure  # the box is out of reach; stop() tries again (and says what is left)
        backend = self._backend
        text = self._redact(self._safe_log(backend.start_mark))
        if failure.reason == "timeout":
            found = classify(text, exited=False)
            reason, what = ("timeout" if found == "unknown" else found), failure.message
        elif failure.reason == "crashed" and failure.log_tail and not text:
            reason, what, text = "crashed", failure.message, failure.log_tail
        else:
            reason = classify(text, exited=True)
            try:
                detail = backend.exit_detail()
            except LaunchFailure:
                detail = "exited"
            what = f"the server stopped before it was ready ({detail})"
        self._stop_quietly()
        self._startup_text = text
        self._write_trial_log("")
        host = self._remote.target.host if self._remote else "?"
        return LaunchFailure(reason, f"{what} on {host} ({backend.describe()}); {hint(reason)}",
                             tail(text, self.settings.log_tail_lines))

    def _safe_log(self, mark: Any) -> str:
        try:
            return self._backend.log_since(mark)
        except LaunchFailure as f:
            return f"(server log unavailable: {f.message})"

    def _write_trial_log(self, window: str) -> None:
        """Keep a local copy next to result.json: this start's log + the last window read."""
        if self._trial_log is None:
            return
        try:
            self._trial_log.parent.mkdir(parents=True, exist_ok=True)
            self._trial_log.write_text(self._startup_text + window, encoding="utf-8")
        except OSError:
            pass

    def _handle(self, url: str, *, reused: bool, startup_s: float) -> ServerHandle:
        assert self._launch is not None
        info = dict(self._info)
        fwd = self._forward
        info["remote"] = {"host": self.ssh.host, "mode": self._backend.name,
                          "where": self._backend.describe(),
                          "tunnel": fwd is not None and url == f"http://127.0.0.1:{fwd.port}"}
        return ServerHandle(base_url=url, fingerprint=self._launch.fingerprint, reused=reused,
                            startup_s=startup_s, log_path=self._trial_log,
                            pid=getattr(self._backend, "pgid", None), info=info)
