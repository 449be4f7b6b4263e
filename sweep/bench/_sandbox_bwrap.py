"""The bubblewrap command line for one sandboxed run.

Why bwrap: it is the sandbox Flatpak and many CI systems trust, packaged by
every distribution (Debian: ``bubblewrap``), and it builds the namespaces,
the fresh root and the PID-1 reaper in C before anything of ours runs.

As root, bwrap runs privileged without a user namespace: root resolves the
bind sources (an interpreter under ``/root/.pyenv`` is not traversable by
anyone else, and bwrap opens sources by path), then, inside the new
namespaces, ``prlimit`` sets the rlimits and ``setpriv`` drops to the run's
unique uid, clears every capability set (bounding set included) and sets
``no_new_privs`` before the interpreter starts. So the solution is an
ordinary unprivileged uid in the host's eyes: no user namespace in which it
holds capabilities, RLIMIT_NPROC enforced (the kernel exempts real root,
even inside a user namespace mapped to it), and root-owned files are
"other" to it. Not as root, bwrap makes an unprivileged user namespace
(``--disable-userns`` forbids nested ones) and the uid stays the caller's.
"""

from __future__ import annotations

import os
import shutil

from sweep.bench._sandbox_layout import Layout, Limits, minimal_env


INSTALL = "sudo apt-get install bubblewrap; dnf install bubblewrap on Fedora"


def find() -> tuple[str | None, str]:
    """(bwrap path, "") when it can be tried here, else (None, why not)."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return None, f"bwrap not found (install it: {INSTALL})"
    helpers = ("prlimit", "setpriv") if os.geteuid() == 0 else ("prlimit",)
    missing = [h for h in helpers if not shutil.which(h)]
    if missing:
        return None, f"{', '.join(missing)} not found (package util-linux)"
    return bwrap, ""


def argv(bwrap: str, lay: Layout, limits: Limits, *, scratch: str, script: str, script_fd: int,
         uid: int, status_fd: int, seccomp_fd: int | None) -> list[str]:
    """bwrap ... -- [prlimit ... -- setpriv ... --] python -I -S -B script."""
    root = os.geteuid() == 0
    cmd = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
           "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--clearenv",
           "--json-status-fd", str(status_fd), "--hostname", "sandbox"]
    if root:  # setpriv needs these three, and drops them itself before exec
        cmd += ["--cap-drop", "ALL"] + [a for c in ("SETUID", "SETGID", "SETPCAP")
                                        for a in ("--cap-add", f"CAP_{c}")]
    else:
        cmd += ["--unshare-user", "--disable-userns"]
    made: set[str] = set()
    for path in lay.ro_binds:  # bwrap would copy a parent's mode: /root is 0700 on the host
        for parent in _parents(path):
            if parent not in made:
                made.add(parent)
                cmd += ["--perms", "0755", "--dir", parent]
        cmd += ["--ro-bind", path, path]
    for link, target in lay.symlinks:
        cmd += ["--symlink", target, link]
    cmd += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev",   # no /dev/shm to fill
            "--perms", "1777", "--size", str(limits.scratch_mb * 1024 * 1024), "--tmpfs", scratch,
            "--perms", "0444", "--ro-bind-data", str(script_fd), script,
            "--remount-ro", "/", "--chdir", scratch]
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    for key, value in minimal_env(scratch).items():
        cmd += ["--setenv", key, value]
    cmd.append("--")
    lim = limits.rlimits()
    cmd += ["prlimit"] + [f"--{k.lower()}={v}" for k, v in lim.items()] + ["--"]
    if root:
        cmd += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return cmd + [lay.python, "-I", "-S", "-B", script]



def _parents(path: str) -> list[str]:
    """"/a/b/c" -> ["/a", "/a/b"]."""
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[:i + 1]) for i in range(len(parts))]
