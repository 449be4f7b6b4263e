"""NVIDIA GPUs' state for the box state (:mod:`sweep.bench.boxstate`), read with ``nvidia-smi``.

Only where ``nvidia-smi`` exists, with a bounded timeout (a hung driver must not hold a trial):
per GPU the SM and memory clocks against their maxima, the temperature, the utilization and the
active clock-throttle reasons (decoded from the bit mask nvidia-smi prints); and the compute
processes on the GPUs that are not this run's own (another job holding a GPU). Parsed from
``--format=csv,noheader,nounits``; values nvidia-smi cannot give (``[N/A]``, ``[Not Supported]``)
are null. Processes are matched by pid: in a container nvidia-smi may show the host's pids, so a
run's own server can show up as "another process" there -- the line says which pid it saw.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any, Iterable

GPU_FIELDS = ("index", "uuid", "name", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem",
              "temperature.gpu", "utilization.gpu", "clocks_throttle_reasons.active")
APP_FIELDS = ("gpu_uuid", "pid", "process_name", "used_memory")
TIMEOUT_S = 5.0

# nvidia-smi's clocks_throttle_reasons bits (nvml.h nvmlClocksThrottleReason*)
THROTTLE_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
                 0x10: "sync_boost", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake",
                 0x100: "display_clocks"}


def available(smi: str | None = None) -> bool:
    return shutil.which(smi or "nvidia-smi") is not None


def _run(smi: str, query: str, fields: tuple[str, ...]) -> str | None:
    try:
        out = subprocess.run([smi, f"--{query}={','.join(fields)}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _value(text: str) -> str | None:
    text = text.strip()
    return None if not text or text.startswith("[") or text in ("N/A", "Not Supported") else text


def _number(text: str) -> float | None:
    v = _value(text)
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


def throttle_reasons(mask: str | None) -> list[str]:
    """``0x0000000000000044`` -> ['sw_power_cap', 'hw_thermal']."""
    try:
        bits = int(mask or "", 16)
    except ValueError:
        return []
    return [name for bit, name in THROTTLE_BITS.items() if bits & bit]


def parse_gpus(text: str) -> list[dict[str, Any]]:
    """``--query-gpu`` lines (:data:`GPU_FIELDS`) -> one dict per GPU."""
    out = []
    for line in text.splitlines():
        f = [x.strip() for x in line.split(",")]
        if len(f) != len(GPU_FIELDS):
            continue
        index = _number(f[0])
        out.append({"index": int(index) if index is not None else None, "uuid": _value(f[1]), "name": _value(f[2]),
                    "sm_mhz": _number(f[3]), "mem_mhz": _number(f[4]), "sm_mhz_max": _number(f[5]),
                    "mem_mhz_max": _number(f[6]), "temp_c": _number(f[7]), "util_pct": _number(f[8]),
                    "throttle": throttle_reasons(_value(f[9]))})
    return out


def parse_apps(text: str) -> list[dict[str, Any]]:
    """``--query-compute-apps`` lines (:data:`APP_FIELDS`) -> one dict per process on a GPU."""
    out = []
    for line in text.splitlines():
        f = [x.strip() for x in line.split(",")]
        if len(f) != len(APP_FIELDS):
            continue
        pid = _number(f[1])
        mem = _number(f[3])
        out.append({"uuid": _value(f[0]), "pid": int(pid) if pid is not None else None,
                    "name": (_value(f[2]) or "?").rsplit("/", 1)[-1][:32],
                    "memory_mib": int(mem) if mem is not None else None})
    return out


def state(gpus: list[dict[str, Any]], apps: list[dict[str, Any]], own: Iterable[int]) -> dict[str, Any]:
    """The GPU part of a box state: the GPUs, and the processes on them that are not ``own``."""
    mine = set(own)
    index = {g["uuid"]: g["index"] for g in gpus}
    others = [{"gpu": index.get(a["uuid"], a["uuid"]), "pid": a["pid"], "name": a["name"],
               "memory_mib": a["memory_mib"]} for a in apps if a["pid"] not in mine]
    return {"gpus": [{k: v for k, v in g.items() if k != "uuid"} for g in gpus], "gpu_others": others}


def read(own: Iterable[int], smi: str | None = None) -> dict[str, Any] | None:
    """The GPUs' state now (None: no nvidia-smi, or it did not answer within :data:`TIMEOUT_S`)."""
    exe = shutil.which(smi or "nvidia-smi")
    if exe is None:
        return None
    gpus = _run(exe, "query-gpu", GPU_FIELDS)
    if gpus is None:
        return None
    apps = _run(exe, "query-compute-apps", APP_FIELDS) or ""
    return state(parse_gpus(gpus), parse_apps(apps), own)
