"""The self-check behind ``coding.sandbox``: ask the sandbox what it enforces.

Why: a result must never claim more isolation than the host granted (the
old sandbox said ``fs_readonly: true`` while model code remounted ``/``).
So each claim is checked from *inside*, by this probe run through the same
code path as every solution, and the controller compares the answers with
its own view (its namespaces, its environment, its files). A layer counts
only when the probe saw it hold.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

# Runs in the sandbox as the "solution"; prints one JSON object.
PROBE = r'''
import ctypes, json, os, resource, socket
cfg = __CFG__
st = {}
for line in open("/proc/self/status"):
    k, _, v = line.partition(":")
    st[k] = v.strip()
r = {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
     "caps": {k: int(st.get(k, "0"), 16) for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")},
     "no_new_privs": st.get("NoNewPrivs") == "1",
     "ns": {n: os.readlink("/proc/self/ns/" + n) for n in ("pid", "net", "mnt", "user")},
     "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
     "interfaces": [n for _, n in socket.if_nameindex()],
     "env": sorted(os.environ), "fds": sorted(os.listdir("/proc/self/fd")),
     "rlimits": {n: resource.getrlimit(getattr(resource, "RLIMIT_" + n))[0]
                 for n in ("AS", "NPROC", "CPU", "FSIZE", "NOFILE")}}
writes = {}
r["cwd"] = os.getcwd()
for d in cfg["write_probe"] + [os.path.dirname(r["cwd"]), r["cwd"]]:
    p = os.path.join(d, ".specsweep-probe-%d" % os.getpid())
    try:
        os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(p)
        writes[d] = "written"
    except OSError as e:
        writes[d] = e.strerror
r["writes"] = writes
r["visible"] = [p for p in cfg["hidden"] if os.path.lexists(p)]
libc = ctypes.CDLL(None, use_errno=True)
r["nested_userns"] = libc.unshare(0x10000000) == 0
print(json.dumps(r))
'''

WRITE_PROBE = ("/", "/usr", "/etc", "/tmp", "/var/tmp", "/dev", "/dev/shm", "/root", "/proc/sys")


def script(hidden: list[str]) -> str:
    """The probe program with its inputs baked in (solutions take no argv)."""
    cfg = {"write_probe": list(WRITE_PROBE), "hidden": hidden}
    return PROBE.replace("__CFG__", repr(cfg))


def hidden_paths(binds: tuple[str, ...] = ()) -> list[str]:
    """Places with secrets or state that the sandbox must not see at all.

    A place that holds a bound path (``/home`` when the interpreter lives in
    ``/home/u/.pyenv``) exists inside as an empty parent: not checked.
    """
    home = os.path.expanduser("~")
    out = [os.path.join(home, ".ssh"), "/home", "/run", "/sys", "/var", "/srv", "/mnt",
           os.getcwd(), "/etc/shadow", "/etc/ssh"]
    tmp = os.path.realpath(tempfile.gettempdir())   # it and its parents hold the scratch path
    return sorted({p for p in out if os.path.lexists(p) and not _contains(p, tmp)
                   and not any(_contains(p, b) for b in binds)})


def _contains(parent: str, path: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def verify(report: dict[str, Any], *, mechanism: str, uid: int | None, memory_kind: str,
           memory_mb: int, nproc: int, env_keys: set[str]) -> dict[str, Any]:
    """``coding.sandbox``: each claim true only if the probe saw it hold."""
    ours = {n: os.readlink(f"/proc/self/ns/{n}") for n in ("pid", "net")}
    caps = report.get("caps", {})
    writes = report.get("writes", {})
    work = report.get("cwd")
    outside = {d: v for d, v in writes.items() if d != work}
    lim = report.get("rlimits", {})
    mem_ok = memory_kind == "cgroup_v2" or lim.get("AS") == memory_mb * 1024 * 1024
    return {
        "mechanism": mechanism,
        "uid": report.get("uid"),
        "unprivileged": report.get("uid") not in (0, None) and report.get("euid") != 0,
        "own_uid": uid is not None and report.get("uid") == uid,
        "capabilities": "none" if caps and not any(caps.values()) else "some",
        "no_new_privs": bool(report.get("no_new_privs")),
        "pid_namespace": report.get("ns", {}).get("pid") not in (None, ours["pid"])
                         and 0 < len(report.get("pids") or []) <= 4,   # only its own few
        "net_namespace": report.get("ns", {}).get("net") not in (None, ours["net"]),
        "interfaces": report.get("interfaces"),
        "fs_readonly": bool(outside) and "written" not in outside.values()
                       and writes.get(work) == "written",
        "host_paths_hidden": report.get("visible") == [],
        "env_cleared": set(report.get("env", ["?"])) <= env_keys | {"PWD"},
        "nested_userns_blocked": report.get("nested_userns") is False,
        "memory_limit": {"kind": memory_kind if mem_ok else "none", "mb": memory_mb if mem_ok else None},
        "nproc_limit": nproc if lim.get("NPROC") == nproc or memory_kind == "cgroup_v2" else None,
        "cpu_s": lim.get("CPU"), "fsize_bytes": lim.get("FSIZE"),
    }


def parse(stdout: str) -> dict[str, Any]:
    for line in reversed(stdout.splitlines()):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    return {}
