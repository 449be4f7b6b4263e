"""Helpers for the launcher tests: free ports, typed configs, the toy server."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

from _support import free_port  # noqa: F401 - the launcher tests import it from here
from _support import launcher_settings

from sweep.compose.config import Server, TrialConfig
from sweep.launch import Launch, LauncherSettings

TOY = str(Path(__file__).with_name("toy_server.py"))


def settings(**over: Any) -> LauncherSettings:
    base = {"name": "local", "ready_timeout_s": 10.0, "poll_interval_s": 0.05, "poll_max_s": 0.5,
            "stop_grace_s": 3.0, "keep_server": False, "log_tail_lines": 20}
    base.update(over)
    return launcher_settings("local", **base)


def make_server(port: int, *, api_key: str | None = None, health_path: str = "/health_generate",
                name: str = "toy") -> Server:
    return Server(name=name, flavor="sglang", simulated=True, executable=(sys.executable,),
                  host="127.0.0.1", port=port, disable_cuda_graph=False, skip_server_warmup=False,
                  enable_metrics=False, health_path=health_path, api_key=api_key, extra_args=(),
                  extra_env={}, secret_flags=("--api-key",), args={}, env={})


def toy_launch(port: int, *extra: str, env: dict[str, str] | None = None,
               secrets: frozenset[str] = frozenset()) -> Launch:
    return Launch(executable=(sys.executable, TOY), args=("--port", str(port), *extra),
                  env=env or {}, secrets=secrets)


def script_launch(code: str, *args: str) -> Launch:
    """A server that is just a Python snippet (prints a crash and exits, ...)."""
    return Launch(executable=(sys.executable, "-c", code), args=tuple(args), env={})


def pid_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (gone, or a zombie nobody reaps)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rfind(b")") + 2:].split()[0] in (b"Z", b"X")
    except OSError:
        return True


def wait_until(pred: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def compose(*overrides: str) -> tuple[TrialConfig, Launch]:
    """The typed config and rendered launch for ``python -m sweep <overrides>`` (MLflow off)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    from sweep.compose.config import from_omegaconf
    from sweep.compose.render import render

    with initialize_config_module("sweep.conf", version_base="1.3"):
        cfg = hydra_compose("config", overrides=["mlflow.enabled=false", *overrides])
    trial = from_omegaconf(cfg)
    return trial, render(trial)
