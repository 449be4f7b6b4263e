"""The same command again resumes its unfinished sweep; ``--fresh`` starts over.

Why: Ctrl-C in ``python -m sweep -m spec.budget=4,6,8 workload=smoke``, then the
same command, made a new ``multirun/<date>/<time>`` and ran the finished trials
again: resuming needed ``hydra.sweep.dir=...``, and nothing said so.

How: a multirun started by ``python -m sweep`` leaves ``.specsweep-command.json``
in its sweep dir -- a key of its command line (the overrides and flags as Hydra
gets them, the config dir and name among them), how many trials it has, when it
started and, once it ends normally, when it finished. When a multirun's command
line gives no ``hydra.sweep.dir``, the newest sweep dir under the default one's
root (``multirun/``) with the same key that did not finish, and that no sweep
holds now (:mod:`sweep.io.dirlock`), is used again: a grid's finished jobs are
skipped there (:mod:`sweep.trial.resume`), a search's study continues in its
storage (``n_trials`` counts the whole study). A command whose sweep finished
runs again in a new sweep dir -- rerunning a finished command is measuring
again, as Hydra always did (to grow a finished search instead: its own dir and a
larger ``hydra.sweeper.n_trials``, as the sweeper prints).

The interrupt line says what happens next (:func:`interrupted`).
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from sweep.errors import ConfigError, Interrupted

MARKER = ".specsweep-command.json"
FRESH_FLAG = "--fresh"
DIR_KEY = "hydra.sweep.dir"
FINISHED = ("ok", "failed", "pruned")  # a trial with one of these ended; interrupted/running did not
MAX_DEPTH = 4  # <root>/<date>/<time>/: markers are looked for this deep under the root
MARKER_BYTES = 1024 * 1024  # a marker is ~500 bytes; read back by sweep/io/readback.py (regular files only)


@dataclass(frozen=True, slots=True)
class Command:
    key: str    # the command line's hash
    shown: str  # the command line, secrets masked (in the marker, for a person)


_command: Command | None = None       # the multirun this process runs (python -m sweep)
_sweep_dir: Path | None = None        # ... and its sweep dir, once Hydra made it


def take_fresh_flag(argv: Sequence[str]) -> tuple[list[str], bool]:
    """``argv`` without ``--fresh``, and whether it was there."""
    return [a for a in argv if a != FRESH_FLAG], FRESH_FLAG in argv


def key_of(argv: Sequence[str]) -> str:
    return hashlib.sha256(json.dumps(list(argv)).encode()).hexdigest()[:20]


def _given_dir(overrides: Sequence[str]) -> str | None:
    for line in overrides:
        key, eq, value = line.partition("=")
        if eq and key.lstrip("+~") == DIR_KEY:
            return value
    return None


def _say(line: str) -> None:
    from sweep import secrets

    print(secrets.mask_text(line), file=sys.stderr, flush=True)


def choose(argv: Sequence[str], fresh: bool) -> list[str]:
    """The command line to run: with ``hydra.sweep.dir=<its unfinished sweep>`` when there is one.

    Called by ``python -m sweep`` after the command line was checked. A single
    run, ``--cfg`` and the help flags are left alone; so is a multirun that names
    its sweep dir (Hydra reuses it, and its jobs resume there) -- unless
    ``--fresh`` asks to start over in it, which is refused (pick another dir).
    """
    global _command
    from sweep.compose import cmdline

    args = cmdline.parse_args(argv)
    if not args.multirun or args.cfg or any(getattr(args, f, None) for f in ("help", "hydra_help", "info")):
        return list(argv)
    given = _given_dir(args.overrides)
    if given is not None:
        if fresh:
            raise ConfigError(FRESH_FLAG, f"starts over in a new sweep dir, but hydra.sweep.dir={given} is "
                              "given (its finished jobs would be skipped): give another dir, or drop --fresh")
        _command = Command(key_of(argv), " ".join(argv))
        return list(argv)
    _command = Command(key_of(argv), " ".join(argv))
    root = _default_root(args.overrides)
    if root is None:
        return list(argv)
    marks = _markers(root, _command.key)
    unfinished = [(p, m) for p, m in marks if not m.get("finished") and not _held(p)]
    if fresh:
        if unfinished:
            _say(f"--fresh: starting over in a new sweep dir (the unfinished one stays: {unfinished[0][0]})")
        return list(argv)
    if unfinished:
        path, mark = unfinished[0]
        done, total = done_of(path, mark)
        _say(f"resuming {path}: {_of(done, total)} trials done (this command was interrupted there); "
             f"add {FRESH_FLAG} to start over")
        return [*argv, f"{DIR_KEY}={path}"]
    finished = [p for p, m in marks if m.get("finished")]
    if finished:
        _say(f"this command finished before in {finished[0]}; measuring again in a new sweep dir "
             f"(the earlier results stay there)")
    return list(argv)


def _default_root(overrides: Sequence[str]) -> Path | None:
    """The fixed part of the run's default sweep dir (``multirun/`` of ``multirun/${now:...}/...``)."""
    from omegaconf import OmegaConf

    from sweep.compose import cmdline

    head = cmdline.compose(cmdline.fixed_overrides(overrides), hydra_config=True)
    pattern = str(OmegaConf.to_container(head.hydra.sweep, resolve=False).get("dir") or "")  # type: ignore[union-attr]
    if "${" not in pattern:
        return None  # one fixed dir: Hydra runs there every time (and its jobs resume)
    prefix = pattern.split("${", 1)[0]
    root = Path(prefix if prefix.endswith("/") else str(Path(prefix).parent) or ".")
    return root if str(root) not in ("", ".", "/") else None


def _markers(root: Path, key: str) -> list[tuple[Path, dict[str, Any]]]:
    """Sweep dirs under ``root`` whose marker has ``key``, newest first."""
    out: list[tuple[Path, dict[str, Any]]] = []
    if not root.is_dir():
        return out
    from sweep.io import readback

    for depth in range(1, MAX_DEPTH + 1):
        for path in root.glob("/".join(["*"] * depth) + "/" + MARKER):
            try:  # the one reader: a FIFO or a device named like the marker hung the sweep here
                mark = readback.read_json(path, limit=MARKER_BYTES)
            except readback.BadFile as exc:
                _say(exc.line())
                continue
            if isinstance(mark, dict) and mark.get("key") == key:
                out.append((path.parent, mark))
    return sorted(out, key=lambda pm: str(pm[1].get("started") or ""), reverse=True)


def _held(sweep_dir: Path) -> bool:
    """A sweep runs there now (its lock is taken)."""
    from sweep.io import dirlock
    from sweep.errors import StorageError

    try:
        dirlock.acquire(sweep_dir).release()
    except StorageError:
        return True
    return False


def done_of(sweep_dir: Path, mark: dict[str, Any] | None = None) -> tuple[int, int | None]:
    """(trials of this sweep that ended, how many it has) -- from its job dirs' result files."""
    from sweep.record.result import TrialResult

    done = 0
    for path in Path(sweep_dir).glob("*/result.json"):  # the jobs', not their baseline/ runs
        try:
            done += TrialResult.load(path).status in FINISHED
        except (OSError, ValueError):
            continue
    if mark is None:
        mark = _read(Path(sweep_dir))
    total = mark.get("total") if mark else None
    return done, int(total) if isinstance(total, int) else None


def _of(done: int, total: int | None) -> str:
    return f"{done} of {total}" if total is not None else str(done)


def _read(sweep_dir: Path) -> dict[str, Any]:
    from sweep.io import readback

    try:
        mark = readback.read_json(sweep_dir / MARKER, limit=MARKER_BYTES)
    except readback.BadFile:
        return {}
    return mark if isinstance(mark, dict) else {}


def started(sweep_dir: Path, total: int | None) -> None:
    """The multirun began in ``sweep_dir`` (Hydra's callback): its marker, unfinished."""
    global _sweep_dir
    _sweep_dir = Path(sweep_dir)
    if _command is None:
        return  # not started by python -m sweep (a test calling Hydra): nothing to resume by
    from sweep import secrets
    from sweep.io.atomic import now_iso, write_atomic

    old = _read(_sweep_dir)
    same = old.get("key") == _command.key
    write_atomic(_sweep_dir / MARKER, {
        "key": _command.key, "command": secrets.mask_text("python -m sweep " + _command.shown),
        "total": total, "started": old.get("started") if same and old.get("started") else now_iso(),
        "resumed": [*(old.get("resumed") or []), now_iso()] if same else [],
        "finished": None})


def finished(sweep_dir: Path) -> None:
    """The multirun ended normally (every job ran, or the study reached n_trials)."""
    mark = _read(Path(sweep_dir))
    if not mark:
        return
    from sweep.io.atomic import now_iso, write_atomic

    write_atomic(Path(sweep_dir) / MARKER, {**mark, "finished": now_iso()})


def interrupted(exc: BaseException) -> Interrupted:
    """The interrupt's one line: what ran, and that the same command resumes it."""
    if _sweep_dir is None:
        return exc if isinstance(exc, Interrupted) else Interrupted(str(exc))
    done, total = done_of(_sweep_dir)
    return Interrupted(f"{_of(done, total)} trials done; run the same command again to resume (results in "
                       f"{_shown(_sweep_dir)}); add {FRESH_FLAG} to start over")


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
