"""A real OpenSSH sshd on 127.0.0.1 for the ssh launcher tests.

Everything lives in a temp dir: host key, user keys (plain, encrypted, and
one that is not authorized), ``authorized_keys``, ``known_hosts`` files, the
config. The remote PATH starts with a ``bin`` dir holding clearly named
STAND-INs for ``systemctl``/``journalctl`` (tests/ssh/systemd_standin.py:
there is no systemd PID 1 here) and ``nvidia-smi`` (no GPU here; it prints
``gpus.csv`` when a test writes one).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from _support import free_port

SSHD = "/usr/sbin/sshd"
HERE = Path(__file__).resolve().parent
PASSPHRASE = "correct horse battery staple 7"



def _keygen(path: Path, passphrase: str = "") -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", "specsweep-test",
                    "-f", str(path)], check=True)


@dataclass
class Keys:
    root: Path
    host: Path
    user: Path
    user_encrypted: Path
    wrong: Path
    other_host: Path

    @classmethod
    def create(cls, root: Path) -> "Keys":
        root.mkdir(parents=True, exist_ok=True)
        keys = cls(root=root, host=root / "host_ed25519", user=root / "id_user",
                   user_encrypted=root / "id_encrypted", wrong=root / "id_wrong",
                   other_host=root / "other_host_ed25519")
        for key in (keys.host, keys.user, keys.wrong, keys.other_host):
            _keygen(key)
        _keygen(keys.user_encrypted, PASSPHRASE)
        (root / "authorized_keys").write_text(
            keys.user.with_suffix(".pub").read_text() + keys.user_encrypted.with_suffix(".pub").read_text())
        return keys

    def known_hosts(self, port: int, *, other: bool = False) -> Path:
        """A known_hosts file for 127.0.0.1:port (with a foreign key if ``other``)."""
        key = (self.other_host if other else self.host).with_suffix(".pub").read_text().split()
        path = self.root / f"known_hosts_{port}{'_other' if other else ''}"
        path.write_text(f"[127.0.0.1]:{port} {key[0]} {key[1]}\n")
        return path


def write_standins(bin_dir: Path, state_dir: Path, unit_dirs: list[Path]) -> Path:
    """systemctl/journalctl/nvidia-smi STAND-INs (tests only), run by this interpreter."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    cfg = bin_dir / "standin.json"
    cfg.write_text(json.dumps({"unit_dirs": [str(d) for d in unit_dirs], "state_dir": str(state_dir)}))
    for tool in ("systemctl", "journalctl"):
        script = bin_dir / tool
        script.write_text("#!/bin/sh\n# STAND-IN for " + tool + " (specsweep tests: no systemd PID 1 here)\n"
                          f"exec {sys.executable} {HERE / 'systemd_standin.py'} --config {cfg} {tool} \"$@\"\n")
        script.chmod(0o755)
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n# STAND-IN for nvidia-smi (specsweep tests: no GPU here)\n"
                   f"if [ -f {bin_dir}/gpus.csv ]; then cat {bin_dir}/gpus.csv; exit 0; fi\n"
                   "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'\n"
                   "exit 9\n")
    smi.chmod(0o755)
    return bin_dir


class Sshd:
    """One sshd -D on 127.0.0.1:<free port>; ``kill_all`` drops every session too."""

    def __init__(self, keys: Keys, root: Path, bin_dir: Path, port: int | None = None) -> None:
        self.keys, self.root, self.bin_dir = keys, root, bin_dir
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = root / f"sshd_{self.port}.log"

    def config(self) -> Path:
        cfg = self.root / f"sshd_config_{self.port}"
        path = f"{self.bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        cfg.write_text("\n".join([
            "ListenAddress 127.0.0.1", f"Port {self.port}", f"HostKey {self.keys.host}",
            f"PidFile {self.root}/sshd_{self.port}.pid",
            f"AuthorizedKeysFile {self.keys.root}/authorized_keys",
            "PermitRootLogin prohibit-password", "PubkeyAuthentication yes",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
            "StrictModes no", "AllowTcpForwarding yes", "X11Forwarding no", "PrintMotd no",
            f"SetEnv PATH={path}", "Subsystem sftp internal-sftp", "LogLevel VERBOSE", "",
        ]))
        return cfg

    def start(self) -> "Sshd":
        os.makedirs("/run/sshd", exist_ok=True)  # privilege separation dir
        cfg = self.config()
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(cfg)], stdin=subprocess.DEVNULL,
                                     stdout=open(self.log, "ab"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {self.log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("sshd did not listen within 10 s")

    def kill_all(self) -> None:
        """Kill the listener and every per-connection sshd: established sessions drop."""
        if self.proc is None:
            return
        children = [p for p in _children(self.proc.pid)]
        self.proc.kill()
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=5)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            self.kill_all()


def _children(ppid: int) -> list[int]:
    """All descendants that are sshd processes of this instance (per-connection monitors)."""
    found, frontier = [], [ppid]
    procs = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes()
                comm = stat[stat.find(b"(") + 1:stat.rfind(b")")]
                procs[int(entry)] = (int(stat[stat.rfind(b")") + 2:].split()[1]), comm)
            except (OSError, ValueError, IndexError):
                continue
    while frontier:
        parent = frontier.pop()
        for pid, (pp, comm) in procs.items():
            if pp == parent and comm.startswith(b"sshd"):
                found.append(pid)
                frontier.append(pid)
    return found
