"""Files and directories named by config keys, checked before any server starts.

A path key is input like any other value: ``workload.dataset_path=/dev/zero``
used to be read until memory ran out inside a trial, an empty or non-JSON
dataset failed every request of a trial after the server had loaded, a
tokenizer or calibration file that is not one killed the simulator at
startup, and ``hydra.sweep.subdir=../../x`` wrote job dirs outside the sweep
dir. Here each kind of path (the ``kind`` of its rule in
:mod:`sweep.compose.keys`) has one check, run when the key is set:

* ``file`` -- a regular, readable, non-empty file (never opened before
  ``stat`` says it is one: a FIFO would block, ``/dev/zero`` never ends),
  whose content is what the key's ``fmt`` says: ``jsonl`` prompts,
  a ``tokenizer`` (loaded by the same ``tokenizers`` call the simulator
  makes), a ``calibration`` (the schema :mod:`sweep.sim.constants` reads, read
  here once: :func:`read_calibration`), ``text`` (any readable file);
* ``outdir`` -- a directory that exists or can be created and written
  (probed by creating and removing a temporary directory in its nearest
  existing parent: permissions, read-only mounts and pseudo filesystems alike);
* ``subpath`` -- a relative path that stays inside its parent (no ``..``,
  not absolute): Hydra's job subdirectory, its output subdir.

Content checks are cached per (path, size, mtime): a grid of 256 jobs reads a
dataset once.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import stat
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping

from sweep.errors import ConfigError

CALIBRATION_OFF = ("none", "off", "false", "uncalibrated")  # hardware.perf.calibration: no calibration
CALIBRATION_SCHEMA = 1
SNIFF_LINES = 1000          # a dataset needs a prompt among its first lines
MAX_TOKENIZER_BYTES = 512 * 1024 * 1024
MAX_CALIBRATION_BYTES = 16 * 1024 * 1024
MIN_FREE_BYTES = 1024 * 1024  # an output dir with less room than this cannot hold a trial's records


def _stat(key: str, text: str) -> tuple[Path, os.stat_result]:
    path = Path(text).expanduser()
    real = Path(os.path.realpath(path))
    if any(real == Path(p) or Path(p) in real.parents for p in ("/proc", "/sys")):
        # /proc and /sys files call themselves regular but their size and content are the kernel's
        raise ConfigError(key, f"{text!r} is on a pseudo filesystem (/proc, /sys): not an input file")
    try:
        st = path.stat()
    except FileNotFoundError:
        raise ConfigError(key, f"no such file: {text!r}") from None
    except OSError as exc:
        raise ConfigError(key, f"cannot read {text!r}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(key, f"must be a file, got the directory {text!r}")
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(key, f"must be a regular file, got a special file {text!r} "
                          "(a device, FIFO or socket is never read)")
    if st.st_size == 0:
        raise ConfigError(key, f"{text!r} is empty")
    if not os.access(path, os.R_OK):
        raise ConfigError(key, f"{text!r} is not readable")
    return path, st


def check_file(key: str, text: str, fmt: str) -> str:
    """``text`` names a regular file whose content is ``fmt``; returns ``text``."""
    if fmt == "calibration" and text.strip().lower() in CALIBRATION_OFF:
        return text
    path, st = _stat(key, text)
    _content(key, str(path.resolve()), fmt, st.st_size, st.st_mtime_ns)
    return text


@lru_cache(maxsize=256)
def _content(key: str, path: str, fmt: str, size: int, mtime_ns: int) -> None:
    CHECKS[fmt](key, Path(path), size)


def _jsonl(key: str, path: Path, size: int) -> None:
    found = bad = 0
    try:
        with path.open(encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if i >= SNIFF_LINES or found:
                    break
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError:
                    bad += 1
                    continue
                found += first_prompt(obj) is not None
    except UnicodeDecodeError:
        raise ConfigError(key, f"{str(path)!r} is not UTF-8 text (a JSONL file of prompts)") from None
    if not found:
        what = "no line is JSON" if bad else "no line holds a prompt"
        raise ConfigError(key, f"{str(path)!r} is not a JSONL file of prompts ({what}; each line a JSON "
                          "object with conversations, messages, prompt or text)")


def _tokenizer(key: str, path: Path, size: int) -> None:
    if size > MAX_TOKENIZER_BYTES:
        raise ConfigError(key, f"{str(path)!r}: {size:,} bytes is not a tokenizer.json")
    try:
        with path.open("rb") as fh:
            head = fh.read(64).lstrip()
    except OSError as exc:
        raise ConfigError(key, f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    if not head.startswith(b"{"):
        raise ConfigError(key, f"{str(path)!r} is not a Hugging Face tokenizer.json (not a JSON object)")
    try:
        from tokenizers import Tokenizer
    except ImportError:  # the simulator needs it too; it says so when it starts
        return
    try:
        Tokenizer.from_file(str(path))
    except Exception as exc:  # noqa: BLE001 - whatever the Rust loader says, it is not a tokenizer
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise ConfigError(key, f"{str(path)!r} is not a Hugging Face tokenizer.json ({first})") from None


def read_calibration(key: str, path: Path) -> dict[str, Any]:
    """A calibration file's document, its shape checked (the schema ``python -m sweep.calibrate`` writes).

    The one reader of the format: :func:`sweep.sim.constants.load` builds on it
    (and adds which constant names the model knows).
    """
    from sweep.io import readback
    from sweep.compose import yaml_guard

    try:  # a regular file of bounded size, read once (sweep/io/readback.py): never a FIFO or /dev/zero
        text = readback.read_text(path, limit=MAX_CALIBRATION_BYTES)
    except readback.BadFile as exc:
        raise ConfigError(key, f"{path}: {exc.why}") from None
    try:
        doc = yaml_guard.safe_load(text, f"{key}: {path}")
    except ConfigError as err:
        raise ConfigError(key, err.message if err.key == key else f"{err.key.partition(': ')[2]}: "
                          f"{err.message}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(key, f"cannot read {path}: {exc}".splitlines()[0]) from None
    except Exception as exc:  # noqa: BLE001 - a YAML error of any kind: not a calibration
        raise ConfigError(key, f"cannot read {path}: {exc}".splitlines()[0]) from None
    if not isinstance(doc, dict) or doc.get("schema") != CALIBRATION_SCHEMA \
            or not isinstance(doc.get("constants"), dict):
        raise ConfigError(key, f"{path} is not a calibration file (schema {CALIBRATION_SCHEMA} with a "
                          "'constants' mapping, as python -m sweep.calibrate writes)")
    for name, value in doc["constants"].items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(key, f"{path}: constants.{name} must be a finite number, got {value!r}")
    unc = doc.get("uncertainty") or {}
    if not isinstance(unc, Mapping):
        raise ConfigError(key, f"{path}: uncertainty must be a mapping")
    cov = unc.get("covariance") or []
    if not isinstance(cov, list) or not all(isinstance(r, list) and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in r) for r in cov):
        raise ConfigError(key, f"{path}: uncertainty.covariance must be a matrix of finite numbers")
    sd = unc.get("residual_sd_log") or 0.0
    if isinstance(sd, bool) or not isinstance(sd, (int, float)) or not math.isfinite(sd) or sd < 0:
        raise ConfigError(key, f"{path}: uncertainty.residual_sd_log must be a number >= 0, got {sd!r}")
    figures = doc.get("figures") or {}
    if not isinstance(figures, Mapping) or not all(
            isinstance(v, str) or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                                   and v > 0) for v in figures.values()):
        raise ConfigError(key, f"{path}: figures must map hardware.perf keys to positive numbers (or the probe's text)")
    return doc


def _calibration(key: str, path: Path, size: int) -> None:
    read_calibration(key, path)


def _text(key: str, path: Path, size: int) -> None:
    try:
        with path.open("rb") as fh:
            fh.read(1)
    except OSError as exc:
        raise ConfigError(key, f"cannot read {str(path)!r}: {exc.strerror or exc}") from None


CHECKS: dict[str, Callable[[str, Path, int], None]] = {
    "jsonl": _jsonl, "tokenizer": _tokenizer, "calibration": _calibration, "text": _text,
}


def first_prompt(obj: Any) -> str | None:
    """The first user turn of one JSONL row: ShareGPT ``conversations``, ``messages``, ``prompt`` or ``text``.

    The one definition of a dataset row (``sweep/bench/prompts.py`` reads
    datasets with it).
    """
    if isinstance(obj, str):
        return obj if obj.strip() else None
    if not isinstance(obj, dict):
        return None
    for key in ("conversations", "conversation", "messages"):
        turns = obj.get(key)
        if isinstance(turns, list):
            for turn in turns:
                if isinstance(turn, dict) and turn.get("from", turn.get("role")) in ("human", "user"):
                    value = turn.get("value", turn.get("content"))
                    if isinstance(value, str) and value.strip():
                        return value
    for key in ("prompt", "text"):
        if isinstance(obj.get(key), str) and obj[key].strip():
            return str(obj[key])
    return None


# ---------------------------------------------------------------------------- directories

_PSEUDO = ("/proc", "/sys", "/dev")


def check_outdir(key: str, text: str) -> str:
    """A directory that is there and writable, or can be made (nothing is left behind by the probe)."""
    path = Path(text).expanduser()
    absolute = Path(os.path.abspath(path))
    if any(absolute == Path(p) or Path(p) in absolute.parents for p in _PSEUDO):
        raise ConfigError(key, f"{text!r} is on a pseudo filesystem ({', '.join(_PSEUDO)}): no results there")
    probe = absolute
    while not probe.exists():
        if probe.is_symlink():  # a dangling link: mkdir would fail on it
            raise ConfigError(key, f"{text!r}: {probe} is a dangling symbolic link")
        if probe == probe.parent:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(key, f"{text!r} cannot be created: {probe} is not a directory")
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        free = None
    if free is not None and free < MIN_FREE_BYTES:
        raise ConfigError(key, f"{text!r}: disk full ({free:,} bytes free on the filesystem of {probe}; "
                          f"results need at least {MIN_FREE_BYTES // 1024 // 1024} MiB)")
    try:
        made = tempfile.mkdtemp(prefix=".specsweep-probe-", dir=probe)
    except OSError as exc:
        raise ConfigError(key, f"{text!r} cannot be written: {probe}: {exc.strerror or exc}") from None
    try:
        os.rmdir(made)
    except OSError:
        pass
    return text


def check_subpath(key: str, text: str) -> str:
    """A relative path that stays inside the directory it is joined to."""
    if text.startswith(("/", "~")) or "\\" in text:
        raise ConfigError(key, f"must be a relative path inside its directory, got {text!r}")
    if ".." in Path(text).parts:
        raise ConfigError(key, f"must not lead out of its directory ('..'), got {text!r}")
    return text
