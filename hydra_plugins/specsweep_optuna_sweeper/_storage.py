"""Where the study lives, and how trials of a dead process stop looking alive.

Default storage: ``sqlite:///<sweep_dir>/optuna.db``. SQLite commits each
state change in a transaction, so a killed sweeper leaves a consistent file;
it needs no server; ``optuna-dashboard sqlite:///...`` and plain ``sqlite3``
open it; and it is the same URL form as a user's ``sqlite:///study.db``.
Optuna's journal file (``journal:<path>``, or a path ending in ``.log`` /
``.journal``) is the alternative for NFS-shared directories where SQLite's
locking is unreliable. Any other string is an Optuna RDB URL
(``postgresql+psycopg://user@host/db``, ``mysql+pymysql://...``); ``memory``
keeps the study in the process only (benchmarks, experiments).

Stale trials: Optuna's own heartbeat only runs inside ``study.optimize``
(ask/tell loops get a warning and no heartbeat), and only for RDB storage. The
sweeper therefore records its own liveness in each RUNNING trial's system
attrs -- host, pid and a heartbeat timestamp refreshed by a thread while the
job runs -- and at startup fails RUNNING trials whose process is gone (same
host, pid dead) or whose heartbeat is older than ``stale_after`` seconds.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState

log = logging.getLogger(__name__)

OWNER_KEY = "specsweep:owner"          # {"host": ..., "pid": ...}
HEARTBEAT_KEY = "specsweep:heartbeat"  # epoch seconds, refreshed while the job runs
JOURNAL_SUFFIXES = (".log", ".journal", ".jsonl")


def default_url(sweep_dir: str | os.PathLike[str]) -> str:
    return "sqlite:///" + str(Path(sweep_dir).resolve() / "optuna.db")


def open_storage(url: str | None, sweep_dir: str | os.PathLike[str]) -> tuple[str | BaseStorage, str]:
    """(what create_study takes, the URL/path to print for resume and optuna-dashboard)."""
    url = url or default_url(sweep_dir)
    if url in ("memory", ":memory:"):  # experiments and benchmarks: nothing persists
        return optuna.storages.InMemoryStorage(), "memory (not persisted)"
    if url.startswith("journal:") or (("://" not in url) and url.endswith(JOURNAL_SUFFIXES)):
        path = url[len("journal:"):] if url.startswith("journal:") else url
        if path.startswith("//"):
            path = path[2:]
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        from optuna.storages.journal import JournalFileBackend, JournalStorage

        return JournalStorage(JournalFileBackend(path)), path
    if "://" not in url:
        raise ValueError(f"hydra.sweeper.storage: {url!r} is neither an Optuna RDB URL "
                         "(sqlite:///file.db, postgresql+psycopg://...) nor a journal file "
                         "(journal:<path> or a path ending in .log)")
    if url.startswith("sqlite:///"):
        db = url[len("sqlite:///"):]
        if db and db != ":memory:":
            Path(db).parent.mkdir(parents=True, exist_ok=True)
    return url, url


def mark_owner(storage: BaseStorage, trial_id: int) -> None:
    storage.set_trial_system_attr(trial_id, OWNER_KEY, {"host": socket.gethostname(),
                                                        "pid": os.getpid()})
    storage.set_trial_system_attr(trial_id, HEARTBEAT_KEY, time.time())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_reason(trial: FrozenTrial, stale_after: float, now: float | None = None) -> str | None:
    """Why a RUNNING trial is abandoned, or None while its owner may still be working on it."""
    now = time.time() if now is None else now
    attrs = trial.system_attrs
    owner = attrs.get(OWNER_KEY) or {}
    host, pid = owner.get("host"), owner.get("pid")
    if host == socket.gethostname() and isinstance(pid, int) and pid != os.getpid() \
            and not _pid_alive(pid):
        return f"its sweeper process {pid} is gone"
    beat = attrs.get(HEARTBEAT_KEY)
    if beat is None and trial.datetime_start is not None:
        beat = trial.datetime_start.timestamp()
    if isinstance(beat, (int, float)) and now - beat > stale_after:
        return f"no heartbeat for {now - beat:.0f} s (> stale_after {stale_after:.0f} s)"
    return None


def fail_stale_trials(study: optuna.Study, stale_after: float) -> list[FrozenTrial]:
    """Mark abandoned RUNNING trials FAIL (reason ``stale``); return them."""
    failed = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        why = stale_reason(t, stale_after)
        if why is None:
            log.warning("trial %d is RUNNING in another live sweeper; left alone", t.number)
            continue
        study._storage.set_trial_user_attr(t._trial_id, "failure_reason", "stale")
        study._storage.set_trial_user_attr(t._trial_id, "failure_message", why)
        study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
        log.info("trial %d was left RUNNING (%s): marked FAIL (stale)", t.number, why)
        failed.append(t)
    return failed


class Heartbeat:
    """Refreshes a RUNNING trial's heartbeat from a daemon thread while its job runs."""

    def __init__(self, storage: BaseStorage, trial_id: int, interval: float) -> None:
        self._storage = storage
        self._trial_id = trial_id
        self._interval = max(0.05, float(interval))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"optuna-heartbeat-{trial_id}",
                                        daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._storage.set_trial_system_attr(self._trial_id, HEARTBEAT_KEY, time.time())
            except Exception as exc:  # the trial may have been finished meanwhile
                log.debug("heartbeat of trial id %d stopped: %s", self._trial_id, exc)
                return

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
