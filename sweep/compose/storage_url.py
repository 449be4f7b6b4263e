"""``hydra.sweeper.storage``: where the Optuna study lives, checked before any trial.

Forms (docs/search.md): ``null`` (``sqlite:///<sweep dir>/optuna.db``),
``memory``, ``journal:<path>`` or a path ending in ``.log``/``.journal``/``.jsonl``
(Optuna's journal file), ``sqlite:///<path>``, or any other SQLAlchemy URL of
a database server (``postgresql+psycopg://user@host/db``).

What used to go wrong, and is one line naming the key here: a URL that is
none of these (Optuna's traceback); a file in a directory that cannot be
written; an unreachable database server (the study lock retried for 60 s,
then 119 lines); a study file that is damaged -- an SQLite file cut short, a
journal whose last line is half-written (Optuna silently drops it, and the
next append glues itself to the fragment), an emptied file (a silently new
study). :func:`parse` is syntax only; :func:`check_file` reads a study file
that exists; :func:`check_reachable` opens one TCP connection (seconds, not
a minute). The sweeper's storage (``hydra_plugins/.../_storage.py``) calls
them as it opens the study; ``python -m sweep`` calls them before Hydra runs.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from sweep.compose.input_files import check_outdir
from sweep.errors import ConfigError, StorageError

KEY = "hydra.sweeper.storage"
DEFAULT_SQLITE = "optuna.db"        # storage null: sqlite:///<sweep dir>/optuna.db
DEFAULT_JOURNAL = "optuna.journal"  # storage null with a host pool: journal:<sweep dir>/optuna.journal
JOURNAL_SUFFIXES = (".log", ".journal", ".jsonl")
DIALECTS = ("postgresql", "mysql", "mariadb", "oracle", "mssql")  # besides sqlite
DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306, "oracle": 1521, "mssql": 1433}
CONNECT_TIMEOUT_S = 3.0
SQLITE_HEADER = b"SQLite format 3\x00"


@dataclass(frozen=True)
class Storage:
    kind: str            # memory | journal | sqlite | server
    url: str
    path: Path | None = None     # journal / sqlite file
    host: str | None = None      # server
    port: int | None = None


def parse(url: str, key: str = KEY) -> Storage:
    """The storage ``url`` names (ConfigError naming ``key`` if it names none)."""
    if url in ("memory", ":memory:"):
        return Storage("memory", url)
    if url.startswith("journal:") or ("://" not in url and url.endswith(JOURNAL_SUFFIXES)):
        path = url[len("journal:"):] if url.startswith("journal:") else url
        if path.startswith("//"):
            path = path[2:]
        if not path.strip():
            raise ConfigError(key, "journal: needs a file path (journal:<path>)")
        return Storage("journal", url, path=Path(path).expanduser())
    if "://" not in url:
        raise ConfigError(key, f"{url!r} is neither an Optuna RDB URL (sqlite:///file.db, "
                          "postgresql+psycopg://...) nor a journal file (journal:<path> or a path ending in .log)")
    if url.startswith("sqlite://"):
        if not url.startswith("sqlite:///"):
            raise ConfigError(key, f"{url!r}: an SQLite URL is sqlite:///<path> (three slashes)")
        db = url[len("sqlite:///"):].partition("?")[0]
        if db in ("", ":memory:"):
            return Storage("memory", url)
        return Storage("sqlite", url, path=Path(db).expanduser())
    try:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError
    except ImportError:  # pragma: no cover - optuna depends on it
        return Storage("server", url)
    try:
        parsed = make_url(url)
        port = parsed.port
    except (ArgumentError, ValueError) as exc:
        raise ConfigError(key, f"not a database URL ({str(exc).splitlines()[0][:120]}); "
                          "e.g. postgresql+psycopg://user@host:5432/db") from None
    backend = parsed.get_backend_name()
    if backend not in DIALECTS:
        raise ConfigError(key, f"unknown database {backend!r}; allowed: sqlite, {', '.join(DIALECTS)}, "
                          "journal:<path>, memory")
    if port is not None and not 0 < port <= 65535:
        raise ConfigError(key, f"port {port} is not a TCP port (1-65535)")
    host = parsed.host
    if host is not None and any(c.isspace() for c in host):
        raise ConfigError(key, f"host {host!r} is not a host name")
    return Storage("server", url, host=host or None, port=port or DEFAULT_PORTS.get(backend))


def check_location(storage: Storage, key: str = KEY) -> None:
    """A study file's directory can be written, and the file, if there, is a file."""
    if storage.path is None:
        return
    path = storage.path
    if path.exists() or path.is_symlink():
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            raise ConfigError(key, f"{path}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(mode):
            raise ConfigError(key, f"{path} is not a regular file")
    check_outdir(key, str(path.parent))


def check_file(storage: Storage, where: str = KEY) -> None:
    """A study file that exists holds a readable study (StorageError naming the file otherwise)."""
    path = storage.path
    if path is None or not path.is_file():
        return
    size = path.stat().st_size
    move = f"move it aside to start a new study, or restore it to resume ({where})"
    if size == 0:
        raise StorageError(str(path), f"the study file is empty (truncated?): {move}")
    if storage.kind == "sqlite":
        _check_sqlite(path, size, move)
    elif storage.kind == "journal":
        _check_journal(path, move)


def _check_sqlite(path: Path, size: int, move: str) -> None:
    with path.open("rb") as fh:
        head = fh.read(100)
    if not head.startswith(SQLITE_HEADER) or len(head) < 100:
        raise StorageError(str(path), f"not an SQLite database (damaged or cut short): {move}")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    if page_size and pages and size < page_size * pages:
        raise StorageError(str(path), f"the SQLite file is cut short ({size:,} of {page_size * pages:,} bytes): "
                           f"{move}")
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            row = con.execute("PRAGMA quick_check").fetchone()
        finally:
            con.close()
    except sqlite3.Error as exc:
        if "locked" in str(exc):  # another sweeper writes it right now: it is alive, not damaged
            return
        raise StorageError(str(path), f"the SQLite file cannot be read ({exc}): {move}") from None
    if not row or row[0] != "ok":
        raise StorageError(str(path), f"the SQLite file is damaged (quick_check: {row[0] if row else '?'}): "
                           f"{move}")


def _growing(path: Path, size: int, wait_s: float = 1.0) -> bool:
    """Another process is appending right now (a pool's workers share the journal)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        time.sleep(0.1)
        if path.stat().st_size != size:
            return True
    return False


def _check_journal(path: Path, move: str) -> None:
    size = path.stat().st_size
    with path.open("rb") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.endswith(b"\n"):
                if _growing(path, size):
                    return  # a live writer's line in progress, not damage
                raise StorageError(str(path), f"the journal's last line ({number}) is cut short: {move}")
            if not line.strip():
                continue
            try:
                op = json.loads(line)
            except ValueError:
                raise StorageError(str(path), f"line {number} of the journal is not JSON (damaged): {move}") from None
            if not isinstance(op, dict) or "op_code" not in op:
                raise StorageError(str(path), f"line {number} is not an Optuna journal entry: {move}")


def defaults(sweep_dir: str | Path) -> list[Storage]:
    """The study files ``storage: null`` means in ``sweep_dir`` (one run's SQLite file, a pool's journal)."""
    folder = Path(sweep_dir).expanduser().resolve()
    return [Storage("sqlite", "sqlite:///" + str(folder / DEFAULT_SQLITE), path=folder / DEFAULT_SQLITE),
            Storage("journal", "journal:" + str(folder / DEFAULT_JOURNAL), path=folder / DEFAULT_JOURNAL)]


def check_reachable(storage: Storage, key: str = KEY, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """A database server accepts a TCP connection within ``timeout`` seconds."""
    if storage.kind != "server" or storage.host is None or storage.port is None:
        return
    try:
        with socket.create_connection((storage.host, storage.port), timeout=timeout):
            pass
    except OSError as exc:
        why = "timed out" if isinstance(exc, (socket.timeout, TimeoutError)) else (exc.strerror or str(exc))
        raise ConfigError(key, f"cannot connect to the database at {storage.host}:{storage.port} ({why})") from None
