"""A Ctrl-C that lands while a server is spawned is acted on, not lost.

The cause, reproduced without timing luck: ``spawn`` passes a ``preexec_fn``,
so CPython runs the ``os.register_at_fork`` hooks around the fork, and an
exception a signal handler raises inside one is printed as "Exception
ignored" and dropped. A hook of this test sends SIGINT to the process from
inside the fork hooks, exactly where the real Ctrl-C of
``tests/parallel/test_pool_journal.py`` sometimes landed. Real processes, a
real signal; nothing mocked.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from launchers._local_process import signals_deferred, spawn

_armed = False


def _interrupt_inside_the_fork_hook() -> None:
    global _armed
    if _armed:
        _armed = False
        os.kill(os.getpid(), signal.SIGINT)
        sum(range(1000))  # Python code runs: the SIGINT handler runs here, inside the hook


os.register_at_fork(before=_interrupt_inside_the_fork_hook)
TRUE = [sys.executable, "-c", "pass"]


def _spawn() -> subprocess.Popen[bytes]:
    global _armed
    _armed = True
    return spawn(TRUE, env=dict(os.environ), stdout=subprocess.DEVNULL, pdeathsig=True)


def test_python_drops_a_ctrl_c_raised_in_a_fork_hook(recwarn: pytest.WarningsRecorder) -> None:
    """The cause: without the deferral the spawn returns as if nothing happened."""
    proc = _spawn()  # no KeyboardInterrupt escapes
    assert proc.wait(timeout=30) == 0


def test_a_ctrl_c_during_a_spawn_is_raised_once_it_is_done() -> None:
    with pytest.raises(KeyboardInterrupt):
        with signals_deferred():
            proc = _spawn()
            spawned = True  # the bookkeeping after the spawn runs before the interrupt
    assert spawned and proc.wait(timeout=30) == 0
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored


def test_sigterm_keeps_its_own_handler_and_nothing_noted_means_nothing_raised() -> None:
    seen: list[int] = []
    old = signal.signal(signal.SIGTERM, lambda signum, _frame: seen.append(signum))
    try:
        with signals_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            sum(range(1000))
            assert seen == []  # held
        assert seen == [signal.SIGTERM]  # then given to the handler that was there
        with signals_deferred():
            proc = spawn(TRUE, env=dict(os.environ), stdout=subprocess.DEVNULL, pdeathsig=True)
        assert proc.wait(timeout=30) == 0 and seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, old)
