"""A pool worker as a process: its command line, and finding what it left running.

* :func:`worker_argv`: the controller's own command line (``python -m sweep``,
  its Hydra flags and overrides) plus the host's overrides, which win;
* :func:`processes_with_token`: every local process a worker started carries
  ``SPECSWEEP_POOL_TOKEN=<token>`` in its environment, so the controller can
  wait for a dead worker's servers to exit before it starts a new worker;
* PR_SET_PDEATHSIG ties each worker to the controller.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

TOKEN_ENV = "SPECSWEEP_POOL_TOKEN"  # marks a worker's local descendants (its servers)


# -- the worker command line --------------------------------------------------------------------
def base_command(command: Sequence[str] | None) -> list[str]:
    """How this process was started, without its arguments (``python -m sweep``)."""
    if command:
        return [str(c) for c in command]
    orig = list(getattr(sys, "orig_argv", []) or [])
    n_args = len(sys.argv) - 1
    if orig and len(orig) > n_args:
        prefix = orig[:len(orig) - n_args]
    else:
        prefix = [sys.executable, sys.argv[0]]
    prefix[0] = sys.executable
    return prefix


def _key(override: str) -> str | None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_override(override).key_or_group
    except Exception:  # noqa: BLE001 - an unparsable line is kept as it is
        return None


def worker_argv(base: Sequence[str], argv: Sequence[str], extra: Sequence[str]) -> list[str]:
    """``base`` + this process's Hydra flags and overrides + ``extra`` (which win: the
    controller's overrides of the same keys are dropped)."""
    from hydra._internal.utils import get_args_parser

    args = get_args_parser().parse_args(list(argv))
    out = list(base) + ["-m"]
    for flag, value in (("--config-path", args.config_path), ("--config-name", args.config_name),
                        ("--config-dir", args.config_dir)):
        if value is not None:
            out += [flag, str(value)]
    replaced = {_key(o) for o in extra} - {None}
    out += [o for o in args.overrides if _key(o) not in replaced]
    out += list(extra)
    return out


# -- process plumbing ---------------------------------------------------------------------------
_PR_SET_PDEATHSIG = 1
try:
    _prctl: Any = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") \
        else None
except (OSError, AttributeError):  # pragma: no cover - exotic libc
    _prctl = None


def _pdeathsig(parent: int) -> Callable[[], None] | None:
    """preexec_fn: the kernel sends SIGTERM to the worker when the controller dies."""
    if _prctl is None:
        return None

    def preexec() -> None:
        _prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def processes_with_token(token: str) -> list[int]:
    """Live (non-zombie) local processes whose environment carries ``token``."""
    needle = f"{TOKEN_ENV}={token}".encode()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X"):
            found.append(int(name))
    return found


def _signame(rc: int) -> str:
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join("    " + line for line in text.splitlines()[-lines:])
