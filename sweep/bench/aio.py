"""Run a benchmark coroutine from synchronous code, whether or not a loop is already running.

Why: the trial is synchronous, but it may itself be called from a running
event loop (a notebook, an async caller, Hydra launchers that use asyncio);
``asyncio.run`` refuses to nest there, so the coroutine then runs in a
worker thread with its own loop and its result or exception comes back to
the caller's thread.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable


def run_sync(make_coro: Callable[[], Any]) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make_coro())
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(make_coro())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    th = threading.Thread(target=target, name="specsweep-bench")
    th.start()
    th.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
