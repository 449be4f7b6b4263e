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
Several sweepers on one study (a host pool, or controllers on other machines)
run the same check before each new trial, so a dead worker's trial is failed
by whoever looks next.

On a server database (PostgreSQL, MySQL: an RDB URL other than SQLite) the
sweeper *also* records Optuna's own heartbeat (``RDBStorage.record_heartbeat``,
``heartbeat_interval`` / ``grace_period`` = ``stale_after``) and calls
``optuna.storages.fail_stale_trials`` in the same check, so Optuna's machinery
and any other Optuna client of the study (a ``study.optimize`` worker, a script
calling ``fail_stale_trials``) see our trials alive while their jobs run and dead
when their controller is. A trial Optuna failed that way -- by us or by another
client -- is FAIL without our ``failure_reason`` (a finished trial's attrs cannot be
written afterwards) but with our owner mark: :func:`failure_reason` reads it as
``stale``, so it is not counted and its config is queued again like any other.

The study lock (:func:`study_lock`) serializes "count the trials, then ask
for one" across every process working on a study: a PostgreSQL advisory lock
(session-level: released by the server when the holder's connection dies),
MySQL's ``GET_LOCK``, or ``flock`` on a file next to a journal / SQLite file (removed when released)
(released by the kernel when the holder dies). Without it two workers could
both see ``n_trials - 1`` counted trials and both ask.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import optuna
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState

from sweep.compose import storage_url
from sweep.errors import StorageError

log = logging.getLogger(__name__)

OWNER_KEY = "specsweep:owner"          # {"host": ..., "pid": ...}
HEARTBEAT_KEY = "specsweep:heartbeat"  # epoch seconds, refreshed while the job runs
JOURNAL_SUFFIXES = storage_url.JOURNAL_SUFFIXES
LOCK_RETRY_S = 60.0  # how long the study lock outlives an unreachable database


def default_url(sweep_dir: str | os.PathLike[str]) -> str:
    return "sqlite:///" + str(Path(sweep_dir).resolve() / storage_url.DEFAULT_SQLITE)


def failure_reason(t: FrozenTrial) -> str | None:
    """A trial's failure reason; ``stale`` for one of ours that Optuna's own
    ``fail_stale_trials`` failed (FAIL, our owner mark, no reason: a finished trial's
    attrs cannot be written afterwards, so the reason is derived, not stored)."""
    reason = t.user_attrs.get("failure_reason")
    if reason is None and t.state == TrialState.FAIL and OWNER_KEY in t.system_attrs:
        return "stale"
    return reason


def _stale_by_optuna(study: optuna.Study, trial: FrozenTrial) -> None:
    """The storage's ``heartbeat_stale_trial_callback``: Optuna's ``fail_stale_trials``
    failed it (no heartbeat for its grace period); :func:`failure_reason` says ``stale``."""
    log.info("trial %d: no heartbeat for its grace period (Optuna's fail_stale_trials): "
             "FAIL (stale)", trial.number)


def server_database(url: str) -> bool:
    """An RDB URL of a database server (Optuna's heartbeat is recorded there), not SQLite."""
    return "://" in url and not url.startswith(("sqlite:", "journal:"))


def open_storage(url: str | None, sweep_dir: str | os.PathLike[str], *,
                 heartbeat_interval: float | None = None,
                 grace_period: float | None = None) -> tuple[str | BaseStorage, str]:
    """(what create_study takes, the URL/path to print for resume and optuna-dashboard).

    Checked first (``sweep/compose/storage_url.py``): the URL's form, that its file's
    directory can be written, that a study file there is not damaged or cut short, that
    a database server answers -- a ConfigError/StorageError, one line, before any trial.
    ``heartbeat_interval``: on a server database, Optuna's own heartbeat is on too
    (module docstring), with ``grace_period`` (the sweeper's ``stale_after``).
    """
    url = url or default_url(sweep_dir)
    where = storage_url.parse(url)
    storage_url.check_location(where)
    storage_url.check_file(where)
    storage_url.check_reachable(where)
    if where.kind == "memory" and url in ("memory", ":memory:"):  # experiments and benchmarks
        return optuna.storages.InMemoryStorage(), "memory (not persisted)"
    if where.kind == "journal":
        assert where.path is not None
        where.path.parent.mkdir(parents=True, exist_ok=True)
        from optuna.storages.journal import JournalFileBackend, JournalStorage

        return JournalStorage(JournalFileBackend(str(where.path))), str(where.path)
    if where.kind == "sqlite" and where.path is not None:
        where.path.parent.mkdir(parents=True, exist_ok=True)
    if heartbeat_interval is not None and server_database(url):
        with warnings.catch_warnings():  # "heartbeat_interval is experimental"
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            storage = optuna.storages.RDBStorage(
                url, heartbeat_interval=max(1, int(round(heartbeat_interval))),
                grace_period=max(1, int(round(grace_period or 2 * heartbeat_interval))),
                heartbeat_stale_trial_callback=_stale_by_optuna)
        return storage, _shown(url)
    return url, _shown(url)


def _shown(url: str) -> str:
    """The URL as printed and written (best.yaml, optimization_results.yaml, the resume line):
    a password in it is the user's to give again, never a file's."""
    from sweep import secrets

    return secrets.mask_text(url, secrets.url_secrets(url))


def _optuna_heartbeat(storage: BaseStorage) -> bool:
    """Optuna's own heartbeat is on for this storage (an RDBStorage opened by open_storage,
    also through the study's cache wrapper)."""
    from optuna.storages._heartbeat import is_heartbeat_enabled

    return is_heartbeat_enabled(storage)


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


def _fail_stale(study: optuna.Study, t: FrozenTrial, why: str) -> bool:
    """FAIL one abandoned trial with reason ``stale``; False if it finished meanwhile."""
    try:
        study._storage.set_trial_user_attr(t._trial_id, "failure_reason", "stale")
        study._storage.set_trial_user_attr(t._trial_id, "failure_message", why)
        study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
    except optuna.exceptions.UpdateFinishedTrialError:
        return False
    log.info("trial %d was left RUNNING (%s): marked FAIL (stale)", t.number, why)
    return True


def fail_stale_trials(study: optuna.Study, stale_after: float, *,
                      quiet: bool = False) -> list[FrozenTrial]:
    """Mark abandoned RUNNING trials FAIL (reason ``stale``); return them.

    ``quiet``: the periodic check of a running loop; live trials of other
    workers are normal then and not worth a warning.
    """
    failed = []
    if _optuna_heartbeat(study._storage):
        before = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
        with warnings.catch_warnings():  # "fail_stale_trials is experimental"
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(study)
        failed += [t for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
                   if t.number in before]
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        why = stale_reason(t, stale_after)
        if why is None:
            if not quiet:
                log.warning("trial %d is RUNNING in another live sweeper; left alone", t.number)
            continue
        if _fail_stale(study, t, why):
            failed.append(t)
    return failed


def fail_trials_of(study: optuna.Study, pid: int, why: str) -> list[FrozenTrial]:
    """FAIL (``stale``) the RUNNING trials owned by process ``pid`` of this host.

    The pool controller calls it as soon as one of its workers died: it knows
    the worker is gone, no heartbeat timeout needed.
    """
    host = socket.gethostname()
    failed = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = t.system_attrs.get(OWNER_KEY) or {}
        if owner.get("host") == host and owner.get("pid") == pid and _fail_stale(study, t, why):
            failed.append(t)
    return failed


# -- the study lock -----------------------------------------------------------------------------
def _lock_key(study_name: str) -> int:
    """A signed 64-bit key (PostgreSQL advisory locks take a bigint)."""
    digest = hashlib.sha256(f"specsweep-study:{study_name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class StudyLock:
    """Serializes count-then-ask across processes; re-entrant within one process.

    ``with lock:`` blocks until this process holds the study. Threads of one
    process queue on a re-entrant thread lock first, so nested use (a requeue
    inside the locked section) and several loops in one process both work.
    The OS-level lock is polled (non-blocking tries), so Ctrl-C always gets
    through and a long wait is logged.
    """

    def __init__(self, what: str, try_acquire: Callable[[], bool], release: Callable[[], None],
                 close: Callable[[], None] = lambda: None) -> None:
        self.what = what
        self._try = try_acquire
        self._release = release
        self._close = close
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._held_once = False  # a database that never answered is refused at once, not retried

    def __enter__(self) -> "StudyLock":
        self._thread_lock.acquire()
        try:
            if self._depth == 0:
                self._acquire()
        except BaseException:
            self._thread_lock.release()
            raise
        self._depth += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        self._depth -= 1
        try:
            if self._depth == 0:
                self._release()
        finally:
            self._thread_lock.release()

    def _acquire(self) -> None:
        delay, t0, warned = 0.005, time.monotonic(), 0.0
        failing_since: float | None = None
        while True:
            try:
                if self._try():
                    self._held_once = True
                    return
                failing_since = None
            except Exception as exc:  # the database is unreachable: retry for a while
                if not self._held_once:  # never reached: bad input, not a dropped connection
                    raise StorageError(self.what, f"cannot take the study lock: "
                                       f"{str(exc).splitlines()[0][:200]}") from None
                now = time.monotonic()
                if failing_since is None:
                    failing_since = now
                    log.warning("study lock (%s): %s; retrying for up to %.0f s", self.what,
                                str(exc).splitlines()[0], LOCK_RETRY_S)
                elif now - failing_since > LOCK_RETRY_S:
                    raise
                time.sleep(1.0)
                continue
            waited = time.monotonic() - t0
            if waited - warned > 30:
                warned = waited
                log.warning("waiting %.0f s for the study lock (%s)", waited, self.what)
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

    def close(self) -> None:
        self._close()


def _file_lock(path: Path) -> StudyLock:
    """``flock`` on ``path``, which exists only while held (sweep/io/dirlock.py: removed on release)."""
    from sweep.io.dirlock import try_flock, unflock

    path.parent.mkdir(parents=True, exist_ok=True)
    state: dict[str, Any] = {"fd": None}

    def try_acquire() -> bool:
        state["fd"] = try_flock(path)
        return state["fd"] is not None

    def release() -> None:
        fd, state["fd"] = state["fd"], None
        if fd is not None:
            unflock(path, fd)

    return StudyLock(f"flock {path}", try_acquire, release)


def _sql_lock(url: str, study_name: str) -> StudyLock | None:
    """PostgreSQL advisory lock / MySQL GET_LOCK on a dedicated autocommit connection."""
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    backend = sqlalchemy.engine.make_url(url).get_backend_name()
    if backend == "postgresql":
        key: Any = _lock_key(study_name)
        take, give = "SELECT pg_try_advisory_lock(:k)", "SELECT pg_advisory_unlock(:k)"
    elif backend in ("mysql", "mariadb"):
        key = f"specsweep:{_lock_key(study_name):x}"
        take, give = "SELECT GET_LOCK(:k, 0)", "SELECT RELEASE_LOCK(:k)"
    else:
        return None
    engine = sqlalchemy.create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    state: dict[str, Any] = {"conn": None}

    def conn() -> Any:
        if state["conn"] is None or state["conn"].closed:
            state["conn"] = engine.connect()
        return state["conn"]

    def try_acquire() -> bool:
        try:
            return bool(conn().execute(sqlalchemy.text(take), {"k": key}).scalar())
        except sqlalchemy.exc.DBAPIError:
            # The lock connection died (server restart, idle timeout): a new one next try.
            close()
            raise

    def release() -> None:
        try:
            conn().execute(sqlalchemy.text(give), {"k": key})
        except sqlalchemy.exc.DBAPIError as exc:  # the session is gone, and its lock with it
            log.warning("study lock: releasing failed (%s); reconnecting", exc)
            close()

    def close() -> None:
        c, state["conn"] = state["conn"], None
        if c is not None:
            with contextlib.suppress(Exception):
                c.close()

    shown = url.split("@")[-1]
    return StudyLock(f"{backend} advisory lock {key} on {shown}", try_acquire, release, close)


def study_lock(url: str | None, sweep_dir: str | os.PathLike[str], study_name: str) -> StudyLock:
    """The lock that serializes trial creation in this study, for every storage form."""
    url = url or default_url(sweep_dir)
    if url in ("memory", ":memory:"):
        return StudyLock("in-process", lambda: True, lambda: None)
    if url.startswith("journal:") or (("://" not in url) and url.endswith(JOURNAL_SUFFIXES)):
        path = url[len("journal:"):] if url.startswith("journal:") else url
        if path.startswith("//"):
            path = path[2:]
        return _file_lock(Path(path + ".specsweep-lock"))
    if url.startswith("sqlite:///"):
        db = url[len("sqlite:///"):].partition("?")[0]
        if db and db != ":memory:":
            return _file_lock(Path(db + ".specsweep-lock"))
        return StudyLock("in-process", lambda: True, lambda: None)
    lock = _sql_lock(url, study_name)
    if lock is not None:
        return lock
    fallback = Path(sweep_dir) / ".study.specsweep-lock"
    log.warning("storage %s: no database lock for this dialect; trial creation is serialized "
                "only on this machine (%s)", url.split("://")[0], fallback)
    return _file_lock(fallback)


class Heartbeat:
    """Refreshes a RUNNING trial's heartbeat from a daemon thread while its job runs."""

    def __init__(self, storage: BaseStorage, trial_id: int, interval: float) -> None:
        self._storage = storage
        self._trial_id = trial_id
        self._interval = max(0.05, float(interval))
        self._optuna = _optuna_heartbeat(storage)  # Optuna's own, on a server database
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"optuna-heartbeat-{trial_id}",
                                        daemon=True)

    def _beat(self) -> None:
        self._storage.set_trial_system_attr(self._trial_id, HEARTBEAT_KEY, time.time())
        if self._optuna:
            self._storage.record_heartbeat(self._trial_id)  # type: ignore[attr-defined]

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._beat()
            except Exception as exc:  # the trial may have been finished meanwhile
                log.debug("heartbeat of trial id %d stopped: %s", self._trial_id, exc)
                return

    def __enter__(self) -> "Heartbeat":
        if self._optuna:
            try:
                self._storage.record_heartbeat(self._trial_id)  # type: ignore[attr-defined]
            except Exception as exc:  # noqa: BLE001 - the thread retries
                log.debug("first heartbeat of trial id %d: %s", self._trial_id, exc)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
