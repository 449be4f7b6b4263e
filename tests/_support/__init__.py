"""Helpers every test suite shares, written once.

* :func:`free_port` -- an ephemeral loopback port nobody listens on right now;
* :func:`services.postgres_cluster` -- a throwaway PostgreSQL cluster (initdb + pg_ctl);
* :func:`services.mlflow_server` -- ``mlflow server`` on a free loopback port;
* :data:`ROOT` and :func:`subprocess_env` -- the repository root and the
  environment a ``python -m sweep`` subprocess needs (Hydra finds
  ``hydra_plugins/`` through ``PYTHONPATH``);
* :func:`launcher_settings` -- typed launcher settings: the shipped
  ``conf/launcher/<name>.yaml`` with some keys overridden.

``tests/`` is on ``sys.path`` (its conftest.py is the rootdir's), so any test
module imports ``from _support import free_port``.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """An ephemeral port that was free a moment ago (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def subprocess_env(**extra: str) -> dict[str, str]:
    """This environment plus PYTHONPATH=repo root and unbuffered output."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def launcher_settings(group: str, **over: Any) -> Any:
    """``conf/launcher/<group>.yaml`` with ``over`` applied, checked and typed like a trial's."""
    import yaml

    from sweep.compose.settings import launcher_settings as build

    node = yaml.safe_load((ROOT / "conf" / "launcher" / f"{group}.yaml").read_text())
    return build({**node, **over})
