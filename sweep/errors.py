"""One error family, its exit codes, and the one boundary every command runs inside.

Library code raises; only a command's boundary prints and picks the exit
status (the pattern of Optuna's ``optuna/exceptions.py`` + ``optuna/cli.py``).
Every error a user can cause or meet derives from :class:`SweepError`, which
carries its ``exit_code`` and prints as :meth:`SweepError.one_line`:

* :class:`ConfigError` -- a key or value of the config, a command-line
  argument or a path given as input (compose/, the commands' argument
  checks; exit 2, nothing has started);
* :class:`StorageError` -- a store that cannot be used: the Optuna study
  storage, an MLflow store a command reads, a sweep dir another sweep holds
  (the sweeper's storage, ``record/runs.py``, the sweep-dir lock; exit 2
  before work started);
* :class:`InstallError` -- an install step of ``python -m sweep.engines``
  failed (exit 1; the engines' own subclasses derive from it);
* :class:`Interrupted` -- Ctrl-C or SIGTERM after the work was recorded
  (exit 130);
* subclasses living beside what raises them: ``atomic.DiskFull`` (a write
  found no room, exit 1), ``launchers.base.LaunchFailure`` (a server did not
  become ready: a failed trial), ``bench.transport.TransportError`` (one
  request did not complete: a failed request), ``sim.constants.CalibrationError``.

The boundary (:func:`boundary`, or :func:`command` as a decorator of a
``main(argv) -> int``) wraps each ``python -m`` entry point once. Whatever
reaches it becomes one line on stderr, secrets masked -- a SweepError by its
own line and code, an ``OSError`` naming its path (exit 2 before the work
started, 1 after; no room is always the disk-full line), anything else as an
internal error -- and a traceback only with ``--debug``, ``SPECSWEEP_DEBUG=1``
or ``HYDRA_FULL_ERROR=1``. How to use it in a new command: docs/ARCHITECTURE.md
("Errors").
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import sys
import traceback
from typing import Any, Callable, Iterator, TypeVar

EXIT_OK = 0
EXIT_FAILED = 1        # a failed trial (or every trial of a sweep), a fault after the work started
EXIT_INPUT = 2         # bad input: one line naming the key or path, nothing started
EXIT_CONFIG = EXIT_INPUT  # the older name
EXIT_INTERRUPTED = 130  # Ctrl-C / SIGTERM (what a shell reports for SIGINT)

DEBUG_ENV = "SPECSWEEP_DEBUG"          # 1: tracebacks at the boundary (inherited by pool workers)
OWN_FULL_ERROR_ENV = "SPECSWEEP_OWNS_HYDRA_FULL_ERROR"  # HYDRA_FULL_ERROR was set by us, not the user
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _flat(text: str) -> str:
    return " ".join(str(text).split()) if "\n" in str(text) or "\r" in str(text) else str(text)


class SweepError(Exception):
    """The base: an error the user reads as one line; ``exit_code`` is the command's exit status."""

    exit_code: int = EXIT_INPUT

    def one_line(self) -> str:
        return _flat(f"error: {self}")


class ConfigError(SweepError, ValueError):
    """A wrong key or value (config, command line, an input path); raised before anything starts.

    ``key`` is the full config key (``spec.budget``), or the argument or path
    at fault; the line says what is allowed.
    """

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message

    def one_line(self) -> str:
        return _flat(f"error: {self.key}: {self.message}")


class ConfigErrors(ConfigError):
    """Several mistakes found in one input (two typos in one command line): one line each.

    Reporting only the first made a user fix, rerun and meet the next; each
    line is a :class:`ConfigError` of its own. ``key`` and ``message`` are the
    first's, so a caller that reads one still gets a true one.
    """

    def __init__(self, errors: list[ConfigError]) -> None:
        super().__init__(errors[0].key, errors[0].message)
        self.errors = list(errors)

    def one_line(self) -> str:
        return "\n".join(e.one_line() for e in self.errors)


class StorageError(SweepError):
    """A store that cannot be used (Optuna storage, an MLflow store read back, a sweep dir in use).

    ``where`` names the key or path; before any work this is bad input (exit 2),
    after work started pass ``exit_code=EXIT_FAILED`` (results are kept).
    """

    def __init__(self, where: str, message: str, *, exit_code: int = EXIT_INPUT) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message
        self.exit_code = exit_code


class InstallError(SweepError):
    """An install step failed (``python -m sweep.engines``); the message says which and where its log is."""

    exit_code = EXIT_FAILED


class Failed(SweepError):
    """The work ran and failed as a whole (every worker of a pool died ...): exit 1, results kept."""

    exit_code = EXIT_FAILED


class Interrupted(SweepError):
    """Stopped by Ctrl-C or a signal, after what ran was recorded."""

    exit_code = EXIT_INTERRUPTED

    def one_line(self) -> str:
        return _flat(f"interrupted: {self}" if str(self) else "interrupted")


class StopRun(BaseException):
    """Carries a SweepError (its ``__cause__``) through code that catches ``Exception``.

    A Hydra job that hits a full disk must end the whole run now, not become one
    failed job of a grid that goes on writing: raise ``StopRun() from err``; the
    boundary reports ``err``.
    """


# ---------------------------------------------------------------------------- the boundary


def debug_requested(argv: list[str] | None = None) -> bool:
    """Tracebacks wanted: ``--debug``, ``SPECSWEEP_DEBUG=1`` or a HYDRA_FULL_ERROR=1 the user set."""
    if argv is not None and "--debug" in argv:
        return True
    if os.environ.get(DEBUG_ENV) == "1":
        return True
    return os.environ.get("HYDRA_FULL_ERROR") == "1" and os.environ.get(OWN_FULL_ERROR_ENV) != "1"


def take_debug_flag(argv: list[str]) -> list[str]:
    """``argv`` without ``--debug``; seeing it sets ``SPECSWEEP_DEBUG=1`` (child processes inherit it)."""
    if "--debug" in argv:
        os.environ[DEBUG_ENV] = "1"
    return [a for a in argv if a != "--debug"]


def _find(exc: BaseException) -> SweepError | None:
    """The SweepError that caused ``exc`` (Hydra wraps what a sweeper's constructor raises)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, SweepError):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


def cause(exc: BaseException) -> SweepError | None:
    """The SweepError behind ``exc`` (itself, or what a wrapper was raised from), else None."""
    return _find(exc)


def _mask(text: str) -> str:
    try:
        from sweep import secrets

        return secrets.mask_text(text)
    except Exception:  # noqa: BLE001 - masking must never hide the error itself
        return text


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def describe(exc: BaseException, *, started: bool = False, command: str = "") -> tuple[str, int]:
    """(the one line, the exit status) for anything that reached a boundary."""
    found = _find(exc)
    if found is not None:
        return found.one_line(), found.exit_code
    if isinstance(exc, OSError):
        where = exc.filename if exc.filename is not None else ""
        what = exc.strerror or _first_line(exc)
        if exc.errno in _NO_ROOM:
            target = f"cannot write {where} " if where else ""
            return (_flat(f"error: disk full: {target}({what}); the results written before are intact"),
                    EXIT_FAILED)
        line = f"error: {where}: {what}" if where else f"error: {what}"
        return _flat(line), EXIT_FAILED if started else EXIT_INPUT
    module = type(exc).__module__.split(".")[0]
    if module in ("hydra", "omegaconf", "yaml"):  # composition, overrides, YAML: input
        key = getattr(exc, "full_key", None)
        return _flat(f"error: {key}: {_first_line(exc)}" if key else f"error: {_first_line(exc)}"), EXIT_INPUT
    if isinstance(exc, RecursionError):
        return "error: input nested too deeply", EXIT_INPUT
    if isinstance(exc, MemoryError):
        return "error: out of memory (an input too large?)", EXIT_FAILED
    where = f" in {command}" if command else ""
    return (_flat(f"error: internal error{where} ({type(exc).__name__}: {_first_line(exc)}); "
                  "rerun with --debug for the traceback"), EXIT_FAILED)


def one_line_usage_errors(parser: Any, help_flag: str = "--help") -> Any:
    """``parser`` (an argparse parser) raising a ConfigError on a usage error instead of printing
    its usage block: an unknown option or a bad choice is one line naming the argument, like
    every other input error (``help_flag`` still prints the usage)."""
    import re

    def error(message: str) -> Any:
        m = re.match(r"argument ([^:]+): (.*)", message, flags=re.S)
        if m:
            key, detail = m.group(1).split("/")[0], m.group(2)
        elif message.startswith("unrecognized arguments: "):
            key, detail = message.split(": ", 1)[1].split(" ")[0], "is no argument this command takes"
        elif message.startswith("the following arguments are required: "):
            key, detail = message.split(": ", 1)[1].split(",")[0].strip(), "is required"
        else:
            key, detail = "arguments", message
        raise ConfigError(key, f"{detail} ({parser.prog} {help_flag})")

    parser.error = error
    return parser


class Boundary:
    """State of one command's boundary: its exit status, whether work has started."""

    def __init__(self, command: str, debug: bool) -> None:
        self.command = command
        self.debug = debug
        self.exit_code = EXIT_OK
        self.started = False

    def work_started(self) -> None:
        """From now on an OSError is a fault of the work (exit 1), not bad input (exit 2)."""
        self.started = True


@contextlib.contextmanager
def boundary(command: str, *, debug: bool | None = None, exit: bool = False) -> Iterator[Boundary]:
    """Run a command's body: any error becomes one line and ``.exit_code`` (``exit``: SystemExit).

    SystemExit passes through untouched (an inner boundary has spoken);
    KeyboardInterrupt is ``interrupted``, exit 130.
    """
    b = Boundary(command, debug_requested() if debug is None else debug)
    try:
        yield b
    except SystemExit:
        raise
    except KeyboardInterrupt as exc:
        if b.debug:
            traceback.print_exc()
        print(_mask(Interrupted(str(exc)).one_line()), file=sys.stderr, flush=True)
        b.exit_code = EXIT_INTERRUPTED
    except BaseException as exc:  # noqa: BLE001 - this is the one place that reports
        if b.debug:
            traceback.print_exc()
        line, b.exit_code = describe(exc, started=b.started, command=command)
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001 - a closed/full stdout must not hide the error
            pass
        print(_mask(line), file=sys.stderr, flush=True)
    if exit and b.exit_code:
        raise SystemExit(b.exit_code)


F = TypeVar("F", bound=Callable[..., Any])


def command(name: str) -> Callable[[F], F]:
    """Decorate a command's ``main(argv=None) -> int``: its errors end as one line and an exit status.

    ``--debug`` in ``argv`` (or ``sys.argv``) is taken out and turns tracebacks on.
    """
    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(argv: Any = None, *args: Any, **kwargs: Any) -> int:
            raw = list(sys.argv[1:] if argv is None else argv)
            debug = debug_requested(raw)
            cleaned = take_debug_flag(raw)
            if argv is None:
                sys.argv[1:] = cleaned
            with boundary(name, debug=debug) as b:
                code = fn(cleaned if argv is not None else None, *args, **kwargs)
                return int(code or 0)
            return b.exit_code
        return wrapper  # type: ignore[return-value]
    return deco
