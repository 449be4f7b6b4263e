"""The built-in sandbox, for hosts without a usable bubblewrap.

Run as ``python -I -S -B _sandbox_boot.py <json>`` by :mod:`sweep.bench.sandbox`
(a script, not imported: it runs in the child, before the solution, and
needs nothing but the stdlib). Why a bootstrap that ``exec``s and not a
``preexec_fn``: the controller is threaded, and forking Python code there
is unsafe.

It rebuilds what bwrap does, with plain syscalls through ctypes, as root:
new mount, PID, network, IPC and UTS namespaces; a fork so the solution is
PID 1 of its namespace (when it exits, the kernel kills everything it
started); a fresh read-only tmpfs root holding only the allow-list binds,
a new /proc, a few device nodes and the size-limited scratch tmpfs;
pivot_root; rlimits; the capability bounding set emptied; the run's
unique uid/gid with no supplementary groups (which clears every other
capability); ``no_new_privs``; every fd but 0-2 closed; the minimal
environment. Not as root it tries the same inside an unprivileged user
namespace, and else keeps only the rlimits and its own session.

What was actually done goes to the status fd as one JSON object, so the
result never claims a layer this host refused.
"""

import ctypes
import json
import os
import resource
import signal
import sys

NEWNS, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET = (0x20000, 0x4000000, 0x8000000, 0x10000000,
                                                  0x20000000, 0x40000000)
RDONLY, NOSUID, NODEV, NOEXEC, REMOUNT, BIND, REC, PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18
DETACH = 2
PR_SET_PDEATHSIG, PR_SET_SECCOMP, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 22, 24, 38
SECCOMP_MODE_FILTER = 2

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(src, dst, fstype, flags, data=None):
    enc = (lambda s: s.encode() if isinstance(s, str) else s)
    check(libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)), f"mount {dst}")


def prctl(opt, arg):
    check(libc.prctl(opt, arg, 0, 0, 0), f"prctl {opt}")


def bind_ro(src, dst):
    """Bind ``src`` at ``dst`` read-only, keeping its nosuid/nodev/noexec bits."""
    if os.path.isdir(src):
        os.makedirs(dst, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), mode=0o755, exist_ok=True)
        open(dst, "a").close()
    mount(src, dst, None, BIND)
    keep = os.statvfs(src).f_flag & (NOSUID | NODEV | NOEXEC)
    mount(None, dst, None, REMOUNT | BIND | RDONLY | NOSUID | keep)


def place_script(cfg, root):
    """Copy the program in (a file, not argv: an answer may exceed 128 KiB)."""
    with open(cfg["code_path"], "rb") as src, open(root + cfg["script"], "wb") as dst:
        dst.write(src.read())
    os.chmod(root + cfg["script"], 0o444)


def build_root(cfg, status):
    """The allow-list root at cfg["root"], then pivot into it; / ends read-only."""
    new = cfg["root"]
    mount(None, "/", None, REC | PRIVATE)
    mount("tmpfs", new, "tmpfs", NOSUID | NODEV, "mode=0755,size=1m")
    for path in cfg["ro_binds"]:
        bind_ro(path, new + path)
    for link, target in cfg["symlinks"]:
        os.symlink(target, new + link)
    for dev in cfg["devices"]:
        os.makedirs(new + "/dev", mode=0o755, exist_ok=True)
        open(new + dev, "a").close()
        mount(dev, new + dev, None, BIND)
        mount(None, new + dev, None, REMOUNT | BIND | NOSUID | NOEXEC)
    os.makedirs(new + "/proc", mode=0o555)
    mount("proc", new + "/proc", "proc", NOSUID | NODEV | NOEXEC)  # this PID namespace's
    work = cfg["scratch"]
    os.makedirs(new + work, mode=0o755)
    mount("tmpfs", new + work, "tmpfs", NOSUID | NODEV, f"mode=1777,size={cfg['scratch_mb']}m")
    place_script(cfg, new)
    os.chdir(new)
    check(libc.pivot_root(b".", b"."), "pivot_root")
    check(libc.umount2(b".", DETACH), "umount old root")
    os.chdir("/")
    mount(None, "/", None, REMOUNT | RDONLY | NOSUID | NODEV)
    status["fs_readonly"] = status["mount_namespace"] = True


def drop(cfg, status, cap_last):
    """Limits, then root -> the run's uid; the order matters (see each line)."""
    for name, value in cfg["rlimits"].items():  # NPROC before setuid: it counts the new uid
        resource.setrlimit(getattr(resource, "RLIMIT_" + name), (value, value))
    status["rlimits"] = True
    try:                                       # needs CAP_SETPCAP (root, or in our user namespace)
        for cap in range(cap_last + 1):
            prctl(PR_CAPBSET_DROP, cap)
    except OSError:
        if cfg["strict"]:
            raise
    if os.geteuid() == 0:
        uid = cfg["uid"]
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)            # root -> non-root clears all capabilities
        status["uid"] = uid
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    status["no_new_privs"] = True
    if cfg["seccomp"]:                         # after no_new_privs: unprivileged seccomp needs it
        load_seccomp(bytes.fromhex(cfg["seccomp"]))
        status["seccomp"] = True
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)    # setuid cleared it


class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def load_seccomp(prog):
    """Install the classic-BPF filter from :mod:`sweep.bench._sandbox_seccomp`."""
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = Fprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0), "seccomp")


def enter_userns():
    """Not root: an unprivileged user namespace mapping only our own ids."""
    uid, gid = os.getuid(), os.getgid()
    check(libc.unshare(NEWUSER), "unshare user")
    for name, text in (("uid_map", f"{uid} {uid} 1"), ("setgroups", "deny"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)


def child(cfg, status, fd, cap_last):
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if status["pid_namespace"]:
            status["pidns"] = os.readlink("/proc/self/ns/pid")   # before the new /proc hides the host's
            build_root(cfg, status)
        else:                                  # no namespaces: the host's scratch dir it is
            place_script(cfg, "")
        drop(cfg, status, cap_last)
    except OSError as exc:
        status["error"] = str(exc)
    os.write(fd, json.dumps(status).encode())
    if "error" in status and cfg["strict"]:
        os._exit(125)
    os.closerange(3, 65536)
    os.chdir(cfg["scratch"])
    os.execve(cfg["python"], [cfg["python"], "-I", "-S", "-B", cfg["script"]], cfg["env"])


def main():
    cfg = json.loads(sys.argv[1])
    fd = cfg["status_fd"]
    status: dict = {"pid_namespace": False, "net_namespace": False, "mount_namespace": False,
              "fs_readonly": False, "uid": None, "no_new_privs": False, "rlimits": False}
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)    # the controller's thread dies: so do we
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    with open("/proc/sys/kernel/cap_last_cap") as fh:
        cap_last = int(fh.read())
    try:
        if os.geteuid() != 0:
            enter_userns()
        check(libc.unshare(NEWNS | NEWPID | NEWNET | NEWIPC | NEWUTS), "unshare")
        status["pid_namespace"] = status["net_namespace"] = True
    except OSError as exc:
        status["namespaces_error"] = str(exc)
    pid = os.fork()
    if pid == 0:
        child(cfg, status, fd, cap_last)
    if status["pid_namespace"]:                 # the child adds its "pidns": the controller can end it for sure
        os.write(fd, json.dumps({"init_pid": pid}).encode())
    os.close(fd)
    signal.signal(signal.SIGTERM, lambda *_: os.kill(pid, signal.SIGKILL))
    _, wstatus = os.waitpid(pid, 0)
    if os.WIFSIGNALED(wstatus):                 # re-raise it, so the caller sees the same signal
        sig = os.WTERMSIG(wstatus)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(wstatus))


if __name__ == "__main__":
    main()
