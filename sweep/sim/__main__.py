"""``python -m sweep.sim ARGS``: the SGLang stand-in (see sweep/sim/server.py)."""

from __future__ import annotations

from sweep.sim.server import main

if __name__ == "__main__":
    main()
