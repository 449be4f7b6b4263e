"""specsweep: declarative sweeps of LLM serving configurations.

One trial = one composed Hydra config: compose -> validate -> render ->
launch/reuse -> benchmark -> record -> score, one package per stage
(docs/ARCHITECTURE.md: the layers). Public API: the typed config
(:mod:`sweep.compose.config`), the renderer (:mod:`sweep.compose.render`),
the result file (:mod:`sweep.record.result`), the task function behind
``python -m sweep`` (:mod:`sweep.cli.app`).
"""

from __future__ import annotations

__all__ = ["__version__"]
__version__ = "0.1.0"
