"""Find the autoregressive baseline a trial's speedup is measured against.

A baseline is an earlier ``ok`` result with ``spec.algorithm == none`` on
the same box and layout, the same model and the same workload matrix (so
tok/s at concurrency 1 compares like with like) and the same simulated-ness
(a simulated baseline never vouches for a real box, nor the reverse).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from sweep import result as resultfile

_HW_KEYS = ("name", "tp", "ep", "dp")
_WL_KEYS = ("contexts", "concurrency", "max_tokens")


def _key(cfg: Mapping[str, Any], simulated: bool) -> tuple[Any, ...]:
    hw, wl, model = cfg.get("hardware", {}), cfg.get("workload", {}), cfg.get("model", {})
    return (
        tuple(hw.get(k) for k in _HW_KEYS),
        model.get("name"),
        tuple(tuple(wl.get(k)) if isinstance(wl.get(k), list) else wl.get(k) for k in _WL_KEYS),
        bool(simulated),
    )


def find(config: Mapping[str, Any], simulated: bool, roots: list[Path],
         exclude: Path | None = None) -> tuple[Path, dict[str, Any]] | None:
    """The newest matching baseline result under ``roots``, or None."""
    want = _key(config, simulated)
    best: tuple[str, Path, dict[str, Any]] | None = None
    for path, doc in resultfile.iter_results(*roots):
        if exclude is not None and path.resolve() == exclude.resolve():
            continue
        cfg = doc.get("config") or {}
        if doc.get("status") != "ok" or (cfg.get("spec") or {}).get("algorithm") != "none":
            continue
        if _key(cfg, doc.get("simulated", False)) != want:
            continue
        if (doc.get("metrics") or {}).get("tok_s_c1") is None:
            continue
        stamp = (doc.get("trial") or {}).get("finished") or ""
        if best is None or stamp > best[0]:
            best = (stamp, path, doc)
    return None if best is None else (best[1], best[2])
