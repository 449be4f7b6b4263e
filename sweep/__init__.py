"""specsweep: declarative sweeps of LLM serving configurations.

One trial = one composed Hydra config: compose -> validate -> render ->
launch/reuse -> benchmark -> record -> score. Public API: the typed config
(:mod:`sweep.config`), the renderer (:mod:`sweep.render`) and the task
function behind ``python -m sweep`` (:mod:`sweep.app`).
"""

from __future__ import annotations

__all__ = ["__version__"]
__version__ = "0.1.0"
