"""``launcher.mode=systemd``: the server as a systemd unit, as the boxes are run today.

Two ways to own the unit:

* **our own unit** (default, ``launcher.unit=sglang-sweep.service``): the
  whole file is written to ``launcher.unit_dir`` (default
  ``/etc/systemd/system``) and left there (it is not enabled);
* **a drop-in** for an existing unit (``launcher.dropin=true``, e.g.
  ``launcher.unit=sglang-k26-ddtree.service``): ``<unit>.d/50-specsweep.conf``
  replaces its ExecStart/Environment and sets ``Restart=no`` during the sweep;
  it is removed (and the daemon reloaded) when the launcher stops, so the
  unit runs its own command again afterwards.

Reuse compares the file on the box with the one we would write (its header
carries the launch fingerprint): equal content and an active unit means the
same server. Restart is ``daemon-reload`` + ``restart``; readiness is polled
over HTTP by the launcher; logs are ``journalctl -u UNIT --since <mark>`` for
the trial window only. ``launcher.sudo=true`` prefixes ``sudo -n`` for a
non-root SSH user (passwordless sudo for systemctl/journalctl and the unit dir).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from typing import TYPE_CHECKING, Any

from launchers._ssh_unit import env_file, render_unit
from launchers.base import LaunchFailure

if TYPE_CHECKING:
    from launchers._ssh_conn import Remote
    from sweep.launch import Launch, LauncherSettings, SSHSettings

ACTIVE = ("active", "activating", "reloading")
# systemd.unit(5): the name of a service unit (the config check, sweep/compose/bounds.py, says the same)
UNIT_NAME = re.compile(r"^[A-Za-z0-9:_\\][A-Za-z0-9:_.\\-]*(@[A-Za-z0-9:_.\\-]*)?\.service$")
DROPIN_NAME = "50-specsweep.conf"
MAX_LOG_BYTES = 32 * 1024 * 1024


class SystemdBackend:
    name = "systemd"

    def __init__(self, remote: Remote, workdir: str, settings: LauncherSettings,
                 ssh: SSHSettings) -> None:
        self.remote = remote
        self.workdir = workdir  # absolute, resolved on the box
        self.unit = ssh.unit_name
        self.unit_dir = ssh.unit_dir
        self.dropin = ssh.dropin
        self.sudo = "sudo -n " if ssh.sudo else ""
        self.stop_grace_s = settings.stop_grace_s
        self.path = (f"{self.unit_dir}/{self.unit}.d/{DROPIN_NAME}" if self.dropin
                     else f"{self.unit_dir}/{self.unit}")
        self.env_path = f"{self.workdir}/{self.unit}.secrets.env"
        _inside(self.unit, self.path, self.unit_dir, self.env_path, self.workdir)
        self.pgid: int | None = None
        self.start_mark: Any = None
        self._wrote_dropin = False

    def _ctl(self, *args: str) -> str:
        return self.sudo + "systemctl " + " ".join(shlex.quote(a) for a in args)

    def render(self, launch: "Launch") -> tuple[str, dict[str, str]]:
        return render_unit(launch, name=self.unit, workdir=self.workdir,
                           description=f"specsweep server (fingerprint {launch.fingerprint})",
                           stop_grace_s=self.stop_grace_s, env_file_path=self.env_path,
                           dropin=self.dropin)

    def _active_state(self) -> str:
        res = self.remote.run(self._ctl("is-active", self.unit), what="checking the unit")
        return (res.out.strip().splitlines() or ["unknown"])[-1]

    def probe(self, launch: "Launch") -> tuple[bool, bool]:
        content, _ = self.render(launch)
        cmd = (self._ctl("is-active", self.unit) + " 2>/dev/null; echo '::unit::'; "
               + f"cat {shlex.quote(self.path)} 2>/dev/null")
        res = self.remote.run(cmd, what="checking the unit")
        state, _, current = res.out.partition("::unit::\n")
        running = (state.strip().splitlines() or [""])[-1] in ACTIVE
        return running, running and current == content

    def alive(self) -> bool:
        return self._active_state() in ACTIVE

    def exit_detail(self) -> str:
        res = self.remote.run(self._ctl("show", "-p", "ExecMainStatus", "--value", self.unit),
                              what="checking the unit")
        code = res.out.strip()
        return f"unit {self.unit} exited with status {code}" if code else f"unit {self.unit} is down"

    def start(self, launch: "Launch", *, stop_grace_s: float) -> None:
        """Write the unit (and the secrets file), daemon-reload, restart: one round trip.

        Both files travel on stdin (secrets first, cut off with ``dd``), so no
        secret is ever part of a remote command line.
        """
        self.stop_grace_s = stop_grace_s
        content, secret_vars = self.render(launch)
        secrets_text = env_file(secret_vars) if secret_vars else ""
        q = shlex.quote
        target, tmp = q(self.path), q(self.path + ".tmp")
        write = f"umask 022 && mkdir -p {q(self.path.rsplit('/', 1)[0])} && cat > {tmp} && mv {tmp} {target}"
        steps = ["set -e", f"mkdir -p {q(self.workdir)}"]
        if secrets_text:
            env_tmp = q(self.env_path + ".tmp")
            steps.append(f"(umask 077 && dd bs=1 count={len(secrets_text.encode())} of={env_tmp} "
                         f"2>/dev/null && mv {env_tmp} {q(self.env_path)})")
        steps += [f"{self.sudo}sh -c {q(write)}", "echo \"mark $(date '+%Y-%m-%d %H:%M:%S')\"",
                  self._ctl("daemon-reload"), self._ctl("restart", self.unit)]
        self._wrote_dropin = self.dropin
        res = self.remote.check("\n".join(steps), stdin=secrets_text + content,
                                timeout=stop_grace_s + 120, what=f"writing {self.path} and "
                                f"restarting {self.unit}", redact=launch.redact)
        marks = [ln[5:] for ln in res.out.splitlines() if ln.startswith("mark ")]
        self.start_mark = marks[-1] if marks else None

    def stop(self, stop_grace_s: float) -> bool:
        """``systemctl stop`` (systemd signals the whole cgroup); drop our drop-in."""
        state = self._active_state()
        cmd = self._ctl("stop", self.unit)
        if self._wrote_dropin:
            cmd += (f"; {self.sudo}rm -f {shlex.quote(self.path)}; " + self._ctl("daemon-reload"))
        self.remote.run(cmd, timeout=stop_grace_s + 60, what=f"systemctl stop {self.unit}")
        self._wrote_dropin = False
        return state in ACTIVE

    # ---- logs

    def log_mark(self) -> str:
        res = self.remote.run("date '+%Y-%m-%d %H:%M:%S'", what="reading the box's clock")
        return res.out.strip()

    def log_since(self, mark: Any) -> str:
        since = str(mark or "")
        args = ["journalctl", "-u", self.unit, "--no-pager", "-q", "-o", "cat"]
        if since:
            args[3:3] = ["--since", since]
        cmd = self.sudo + " ".join(shlex.quote(a) for a in args) + f" | tail -c {MAX_LOG_BYTES}"
        return self.remote.run(cmd, timeout=120, what="reading the journal").out

    def describe(self) -> str:
        return f"unit {self.unit} ({self.path})"


def _inside(unit: str, path: str, unit_dir: str, env_path: str, workdir: str) -> None:
    """The unit file stays in launcher.unit_dir and its secrets file in launcher.workdir,
    whatever the settings say (checked up front too; this is the last line before a write)."""
    if len(unit) > 255 or not UNIT_NAME.match(unit):
        raise LaunchFailure("preflight", f"launcher.unit {unit!r} is not a systemd unit name")
    for file, folder in ((path, unit_dir), (env_path, workdir)):
        if not posixpath.normpath(file).startswith(posixpath.normpath(folder).rstrip("/") + "/"):
            raise LaunchFailure("preflight", f"{file} is not inside {folder}: refusing to write it")
