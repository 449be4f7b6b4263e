"""A tiny seccomp filter: no new user namespaces, no kernel keyrings.

Why: where the kernel lets unprivileged users create user namespaces (most
distributions do), model code could make one, be "root" in it and mount a
tmpfs of its own -- memory that no rlimit and no RSS watch sees, and a
much larger kernel surface. bwrap's ``--disable-userns`` exists only in
its user-namespace mode, which root does not use here, so both mechanisms
load this classic-BPF program instead (bwrap via ``--seccomp FD``, the
fallback through ``prctl``): ``unshare``/``clone`` with CLONE_NEWUSER fail
with EPERM, ``clone3`` (whose flags BPF cannot read) with ENOSYS so libc
falls back to ``clone``, x32 calls with ENOSYS, and a foreign syscall ABI
(``int 0x80`` on x86-64) kills the process. ``keyctl``, ``add_key`` and
``request_key`` fail with EPERM: keys reachable from the inherited session
keyring count as "possessed", whatever the uid, so a uid change alone does
not keep the controller's keys away (Docker's default profile blocks them
too). Everything else is allowed.
"""

from __future__ import annotations

import platform
import struct

CLONE_NEWUSER = 0x10000000
# machine -> (AUDIT_ARCH_*, __NR_unshare, __NR_clone, __NR_clone3, (__NR_add_key, request_key, keyctl))
ARCHES = {"x86_64": (0xC000003E, 272, 56, 435, (248, 249, 250)),
          "aarch64": (0xC00000B7, 97, 220, 435, (217, 218, 219))}

_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _KILL_PROCESS, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_EPERM, _ENOSYS = 1, 38
_X32_BIT = 0x40000000


def program(machine: str | None = None) -> bytes | None:
    """The filter as raw ``struct sock_filter`` array, or None on other CPUs."""
    arch = ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit, nr_unshare, nr_clone, nr_clone3, keys = arch
    ins = [
        (_LD_ABS, 0, 0, 4),                      # 0  A = seccomp_data.arch
        (_JEQ, 1, 0, audit),                     # 1  native ABI -> 3
        (_RET, 0, 0, _KILL_PROCESS),             # 2
        (_LD_ABS, 0, 0, 0),                      # 3  A = seccomp_data.nr
        (_JGE, 0, 1, _X32_BIT),                  # 4  x32 -> 5
        (_RET, 0, 0, _ERRNO | _ENOSYS),          # 5
        (_JEQ, 0, 1, nr_clone3),                 # 6  clone3 -> 7
        (_RET, 0, 0, _ERRNO | _ENOSYS),          # 7
        (_JEQ, 6, 0, keys[0]),                   # 8  add_key -> 15
        (_JEQ, 5, 0, keys[1]),                   # 9  request_key -> 15
        (_JEQ, 4, 0, keys[2]),                   # 10 keyctl -> 15
        (_JEQ, 1, 0, nr_unshare),                # 11 unshare -> 13
        (_JEQ, 0, 3, nr_clone),                  # 12 clone -> 13, else -> 16
        (_LD_ABS, 0, 0, 16),                     # 13 A = low 32 bits of args[0] (flags)
        (_JSET, 0, 1, CLONE_NEWUSER),            # 14 NEWUSER -> 15, else -> 16
        (_RET, 0, 0, _ERRNO | _EPERM),           # 15
        (_RET, 0, 0, _ALLOW),                    # 16
    ]
    return b"".join(struct.pack("<HBBI", *i) for i in ins)
