"""Where ``python -m sweep.engines`` keeps engines and weights, and the CPU key of a build.

Why a cache keyed this way: llama.cpp's server is built from source with
``GGML_NATIVE`` (``-march=native``), so a binary is only good for the CPU
features it was compiled for, and a build costs ~18 CPU-minutes. The cache
directory is ``$SPECSWEEP_ENGINES_DIR`` or ``$XDG_CACHE_HOME/specsweep/engines``
(``~/.cache/specsweep/engines``); each build lives under
``<engine>/<version>-<cpu target>/`` where the target is the machine name plus
a short hash of the CPU feature flags. Another machine of the same kind reuses
the build; a different CPU builds its own instead of dying of SIGILL.
"""

from __future__ import annotations

import hashlib
import os
import platform
from functools import lru_cache
from pathlib import Path

ENV_DIR = "SPECSWEEP_ENGINES_DIR"


def engines_dir() -> Path:
    """The cache root (not created here)."""
    explicit = os.environ.get(ENV_DIR)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "specsweep" / "engines"


@lru_cache(maxsize=1)
def cpu_target() -> str:
    """``x86_64-1a2b3c4d``: machine name and a hash of the CPU feature flags.

    The flags come from ``/proc/cpuinfo`` (Linux); elsewhere the processor
    string stands in. Same flags -> same key -> a native build is reusable.
    """
    machine = platform.machine() or "unknown"
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("flags", "Features"):
                flags = " ".join(sorted(value.split()))
                break
    except OSError:
        pass
    flags = flags or platform.processor() or machine
    return f"{machine}-{hashlib.sha256(flags.encode()).hexdigest()[:8]}"


def optional_status(install_dir: str | Path) -> dict[str, str] | None:
    """``{name: "ok" | why not}`` of the optional packages the install at ``install_dir`` tried
    (its ``install.json``); None when nothing is installed there.

    Read here, as a file, so the config check can refuse a spec whose
    dependency did not build (``spec.requires``) without importing the installer.
    """
    import json

    try:
        doc = json.loads((Path(install_dir) / "install.json").read_text())
    except (OSError, ValueError):
        return None
    found = doc.get("optional") if isinstance(doc, dict) else None
    if not isinstance(found, dict):
        return {}
    return {str(k): str(v.get("status") if isinstance(v, dict) else v) for k, v in found.items()}
