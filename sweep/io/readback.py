"""Files the project wrote and reads back are input: one bounded, validating reader for them.

Result files, recorded landscapes and calibrations come back from disk --
from another machine, another version, a half-finished write, a user's
editor or someone who wants the command to fail. Read naively, a FIFO named
``result.json`` hung ``python -m sweep.schedule``, a symlink to ``/dev/zero``
read until memory ran out, a 1 GiB file peaked at 2 GB, and one file whose
cell was a string ended the whole command as an internal error. Here:

* :func:`read_bytes` opens **regular files only** (a FIFO, a device, a socket
  or a symlink to one is refused from ``stat`` alone, before it is opened, so
  nothing blocks and nothing is read), of **bounded size** (:data:`MAX_BYTES`,
  checked on the open file and enforced by the read itself: a file that grows
  while it is read is still cut at the bound, never read whole);
* :func:`read_json` parses strictly: no ``NaN``/``Infinity`` (the project
  never writes them), no number past a float (``1e400``), bounded nesting;
* :class:`BadFile` is the one error: ``skipped <path>: <why>`` in one line.
  A command that reads many files names each bad one on stderr, goes on with
  the rest and exits :data:`EXIT_SKIPPED` (docs/ARCHITECTURE.md, "Reading files
  back"); one file the user named that is bad is bad input (exit 2);
* :func:`checked_name` is the one check for a name taken from a file's content
  that becomes part of a path written to (a box's calibration ``<box>.yaml``):
  one plain path component, so a write stays inside its output directory.

What each format must hold (types, ranges) is checked by its own reader on
top of this: :meth:`sweep.record.result.TrialResult.load`,
:func:`sweep.sim.landscape.load`, :func:`sweep.compose.input_files.read_calibration`,
with the helpers :func:`number` and :func:`count`.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any, Iterable, TextIO

from sweep.errors import EXIT_FAILED

MAX_BYTES = 64 * 1024 * 1024  # a result file is ~10-200 kB; a landscape ~1 MB; a calibration ~10 kB
MAX_DEPTH = 64                # JSON nesting: a result file is ~6 deep
EXIT_SKIPPED = EXIT_FAILED    # a command that skipped a bad file did its work on the rest: exit 1
_READ_CHUNK = 1024 * 1024


class BadFile(ValueError):
    """A file that cannot be used as what it claims to be; ``why`` says how, in one line."""

    def __init__(self, path: str | Path, why: str) -> None:
        why = " ".join(str(why).split())[:300]
        super().__init__(why)
        self.path = Path(path)
        self.why = why

    def line(self) -> str:
        return f"skipped {self.path}: {self.why}"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _size(n: int) -> str:
    return f"{n / 1024 / 1024:.0f} MiB" if n >= 1024 * 1024 else f"{n:,} bytes"


def read_bytes(path: str | Path, *, limit: int = MAX_BYTES, what: str = "a file of the project") -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; :class:`BadFile` otherwise
    (``what``: the kind of file the bound is for, named in the refusal).

    The file's type is judged by ``stat`` (following a symlink to its target)
    before it is opened, and again on the open descriptor (a file swapped for a
    FIFO in between is caught); it is opened non-blocking, and read at most
    ``limit + 1`` bytes (one buffer, no second copy)."""
    path = Path(path)
    st = _regular(path)
    if st.st_size > limit:
        raise BadFile(path, f"{_size(st.st_size)}, more than the {_size(limit)} {what} holds: not read")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise BadFile(path, f"cannot read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BadFile(path, f"{_kind(st.st_mode)}, not a regular file: not read")
        buf = bytearray()
        while len(buf) <= limit:
            piece = os.read(fd, min(_READ_CHUNK, limit + 1 - len(buf)))
            if not piece:
                break
            buf += piece
    except OSError as exc:
        raise BadFile(path, f"cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(buf) > limit:
        raise BadFile(path, f"grew past {_size(limit)} while it was read: not used")
    return bytes(buf)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is past any finite number")
    return value


def _depth(doc: Any) -> int:
    deepest, stack = 0, [(doc, 1)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, dict):
            deepest = max(deepest, d)
            stack.extend((v, d + 1) for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            deepest = max(deepest, d)
            stack.extend((v, d + 1) for v in node if isinstance(v, (dict, list)))
        if deepest > MAX_DEPTH:
            break
    return deepest


def parse_json(data: bytes | str, path: str | Path) -> Any:
    """Strict JSON (no NaN/Infinity, no number past a float, at most :data:`MAX_DEPTH` deep)."""
    try:
        doc = json.loads(data, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:
        raise BadFile(path, f"not JSON the project writes (nested more than {MAX_DEPTH} deep)") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadFile(path, f"not JSON ({str(exc).splitlines()[0][:160]})") from None
    if _depth(doc) > MAX_DEPTH:
        raise BadFile(path, f"not JSON the project writes (nested more than {MAX_DEPTH} deep)")
    return doc


def read_json(path: str | Path, *, limit: int = MAX_BYTES, what: str = "a file of the project") -> Any:
    """:func:`read_bytes` then :func:`parse_json`."""
    return parse_json(read_bytes(path, limit=limit, what=what), path)


def _regular(path: Path) -> os.stat_result:
    """The file's ``stat`` (a symlink followed), judged before anything opens it: a regular file, or
    :class:`BadFile` (a FIFO, a device, a directory, nothing there)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise BadFile(path, f"cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise BadFile(path, f"{_kind(st.st_mode)}, not a regular file: not read")
    return st


def read_head(path: str | Path, size: int = 4096) -> bytes:
    """The first ``size`` bytes of a regular file, whatever its length: enough to tell what a file
    claims to be (a landscape's schema) before it is judged whole -- so a file too big to read is
    still recognised, and named when it is refused, not passed over in silence. Special files are
    refused as :func:`read_bytes` refuses them (:class:`BadFile`), never opened."""
    path = Path(path)
    _regular(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise BadFile(path, f"cannot read ({exc.strerror or exc})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BadFile(path, "not a regular file: not read")
        return os.read(fd, size)
    except OSError as exc:
        raise BadFile(path, f"cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def read_text(path: str | Path, *, limit: int = MAX_BYTES) -> str:
    """A UTF-8 text file through :func:`read_bytes`."""
    data = read_bytes(path, limit=limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadFile(path, "not UTF-8 text") from None


# ------------------------------------------------------------------------------ values


class Invalid(ValueError):
    """A value of a file that is of the wrong type or out of range; ``where`` names it (``cells[2].context``)."""

    def __init__(self, where: str, detail: str) -> None:
        super().__init__(f"{where}: {detail}")
        self.where = where


def shown(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def number(where: str, value: Any, *, lo: float = 0.0, hi: float = 1e15, optional: bool = True) -> float | None:
    """A finite number in [lo, hi] (None when absent and ``optional``)."""
    if value is None:
        if optional:
            return None
        raise Invalid(where, "is missing")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Invalid(where, f"{shown(value)} is not a number")
    if not math.isfinite(value):
        raise Invalid(where, f"{shown(value)} is not a finite number")
    if value < lo or value > hi:
        raise Invalid(where, f"{shown(value)} is out of range [{lo:g}, {hi:g}]")
    return float(value)


def count(where: str, value: Any, *, lo: int = 0, hi: float = 1e15, optional: bool = True) -> int | None:
    """A whole number in [lo, hi] (None when absent and ``optional``)."""
    if value is None:
        if optional:
            return None
        raise Invalid(where, "is missing")
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer() and math.isfinite(value):
            value = int(value)
        else:
            raise Invalid(where, f"{shown(value)} is not a whole number")
    if value < lo or value > hi:
        raise Invalid(where, f"{value} is out of range [{lo}, {hi:.0f}]")
    return int(value)


def mapping(where: str, value: Any, *, optional: bool = True) -> dict[str, Any]:
    """An object (``{}`` when absent and ``optional``)."""
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise Invalid(where, f"{shown(value)} is not an object")
    return value


def items(where: str, value: Any, *, optional: bool = True) -> list[Any]:
    """A list (``[]`` when absent and ``optional``)."""
    if value is None and optional:
        return []
    if not isinstance(value, list):
        raise Invalid(where, f"{shown(value)} is not a list")
    return value


def text(where: str, value: Any, *, optional: bool = True, limit: int = 4096) -> str | None:
    """A string of at most ``limit`` characters (None when absent and ``optional``)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise Invalid(where, f"{shown(value)} is not a string")
    if len(value) > limit:
        raise Invalid(where, f"a string of {len(value):,} characters (more than {limit:,})")
    return value


# ------------------------------------------------------------------------------ names in paths

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")


def checked_name(name: Any, what: str) -> str:
    """A name from a file's content that becomes a path component written to: one plain component
    (letters, digits, ``.``, ``_``, ``+``, ``-``; not starting with ``.`` or ``-``), never ``..`` or
    a separator -- so ``<out>/<name>.yaml`` stays inside ``<out>``. :class:`Invalid` otherwise."""
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise Invalid(what, f"{shown(name)} is not a name a file may be written under "
                            "(letters, digits, '.', '_', '+', '-'; no '/' or '..')")
    return name


def inside(folder: str | Path, name: Any, suffix: str, what: str) -> Path:
    """``folder/<name><suffix>`` for a name read from a file, checked to stay inside ``folder``."""
    folder = Path(folder)
    path = folder / f"{checked_name(name, what)}{suffix}"
    base = os.path.realpath(folder)
    if os.path.commonpath([base, os.path.realpath(path)]) != base:
        raise Invalid(what, f"{shown(name)} would write outside {folder}")
    return path


# ------------------------------------------------------------------------------ commands


class Skipped:
    """The bad files a command met: each named in one line on stderr as it is met."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.files: list[BadFile] = []
        self.out = out

    def add(self, path: str | Path, exc: BaseException) -> None:
        from sweep import secrets

        # an error that says its own why without the path (a landscape's) is not given the path twice
        why = getattr(exc, "why", None)
        bad = exc if isinstance(exc, BadFile) else BadFile(path, str(why or exc) or type(exc).__name__)
        self.files.append(bad)
        print(secrets.mask_text(bad.line()), file=self.out or sys.stderr, flush=True)

    def __call__(self, path: Path, exc: Exception) -> None:  # an ``on_error`` for iter_results
        self.add(path, exc)

    def __bool__(self) -> bool:
        return bool(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def exit_code(self, code: int = 0) -> int:
        """``code``, or :data:`EXIT_SKIPPED` when a file was skipped and ``code`` is 0."""
        return EXIT_SKIPPED if self.files and code == 0 else code


def first_lines(bad: Iterable[BadFile]) -> list[str]:
    return [b.line() for b in bad]
