"""OmegaConf resolvers the YAML uses (registered once, idempotently).

``${sweep.python:}`` is the running interpreter, so ``server=sim`` starts
the simulator with the same environment as the controller; ``${sweep.gt:a,b}``
lets YAML turn a number into a boolean flag (e.g. vLLM's
--enable-expert-parallel when hardware.ep > 1).
"""

from __future__ import annotations

import sys

from omegaconf import OmegaConf


def register() -> None:
    if not OmegaConf.has_resolver("sweep.python"):
        OmegaConf.register_new_resolver("sweep.python", lambda: sys.executable)
    if not OmegaConf.has_resolver("sweep.gt"):
        OmegaConf.register_new_resolver("sweep.gt", lambda a, b: float(a) > float(b))


register()
