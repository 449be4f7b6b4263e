"""SGLang-format log lines on stderr.

The launcher, the trial-window log reader and users' own ``grep 'accept
len'`` habits read the server log, so the sim writes what SGLang writes:
``[YYYY-mm-dd HH:MM:SS TP0] message`` from the scheduler and
``[YYYY-mm-dd HH:MM:SS] message`` from the HTTP server, including the
startup sequence and the tracebacks of its known failures.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Mapping

from sweep.secrets import MASK


def stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


def log(msg: str, *, rank: str | None = None) -> None:
    """One SGLang log line (``rank`` like "TP0" for scheduler lines)."""
    prefix = f"[{stamp()} {rank}]" if rank else f"[{stamp()}]"
    sys.stderr.write(f"{prefix} {msg}\n")
    sys.stderr.flush()


def scheduler(msg: str) -> None:
    log(msg, rank="TP0")


def raw(text: str) -> None:
    """Unprefixed text (tracebacks)."""
    sys.stderr.write(text if text.endswith("\n") else text + "\n")
    sys.stderr.flush()


def server_args_line(ns: Any) -> str:
    """``server_args=ServerArgs(...)`` as SGLang prints it first (api key masked)."""
    items = []
    for k, v in sorted(vars(ns).items()):
        if k.startswith("sim_"):
            continue
        if k == "api_key" and v:
            v = MASK
        items.append(f"{k}={v!r}")
    return "server_args=ServerArgs(" + ", ".join(items) + ")"


def weights_loaded(model: Mapping[str, Any], tp: int, mem_gb: float, weights_gb: float) -> str:
    per_gpu = weights_gb / max(1, tp)
    arch = (model.get("arch") or {})
    cls = "KimiK25ForConditionalGeneration" if arch.get("vision_tower") else "DeepseekV3ForCausalLM"
    return (f"Load weight end. type={cls}, dtype=torch.bfloat16, "
            f"avail mem={max(0.0, mem_gb - per_gpu):.2f} GB, mem usage={per_gpu:.2f} GB.")
