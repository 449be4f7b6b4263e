"""Create a fresh local sqlite tracking store quickly.

MLflow builds a new ``mlflow.db`` by running its ~100 schema migrations, and
sqlite syncs the file to disk on every commit: about a thousand fsyncs,
which cost ~1 s on a local SSD and 10-20 s on a network or cloud volume --
wall time at the end of the first trial in a new directory.

``prepare(uri)`` runs the very same migrations (MLflow's own
``_initialize_tables``) on a temporary file next to the target with syncing
off, checks the schema is at MLflow's head, syncs once and links the file
into place (``os.link`` fails if the target appeared meanwhile, so a
parallel job's store is never replaced). Anything unexpected (another MLflow
version's internals, a read-only directory, ...) leaves the target untouched
and MLflow creates the store itself as before.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger("sweep.record.tracking")


def sqlite_path(uri: str) -> Path | None:
    """The file of a ``sqlite:///<absolute path>`` URI (None for anything else)."""
    if not uri.startswith("sqlite:///"):
        return None
    path, _, query = uri[len("sqlite:///"):].partition("?")
    if not path or path == ":memory:" or query or not os.path.isabs(path):
        return None
    return Path(path)


def prepare(uri: str) -> bool:
    """Create the store of ``uri`` if it is a local sqlite file that does not
    exist yet; True when this call created it. Never raises."""
    path = sqlite_path(uri)
    if path is None or path.exists():
        return False
    tmp = path.with_name(f".{path.name}.init-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove(tmp)  # left by a killed process with the same pid
        _build(tmp)
        try:
            os.link(tmp, path)
        except FileExistsError:  # a parallel job was faster: use its store
            return False
        _fsync_dir(path.parent)
        return True
    except Exception as exc:  # noqa: BLE001 - MLflow creates the store itself then
        log.debug("fast creation of %s failed, MLflow will create it: %s", path, exc)
        return False
    finally:
        _remove(tmp)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:  # missing, or its directory is not one
        pass


def _build(tmp: Path) -> None:
    """MLflow's schema at its head revision in ``tmp``, synced to disk once."""
    import sqlalchemy
    from mlflow.store.db import utils

    engine = utils.create_sqlalchemy_engine(f"sqlite:///{tmp}")

    @sqlalchemy.event.listens_for(engine, "connect")
    def _no_sync(dbapi_conn, _record) -> None:  # per connection, not stored in the file
        dbapi_conn.execute("PRAGMA synchronous=OFF")
        dbapi_conn.execute("PRAGMA journal_mode=MEMORY")

    try:
        utils._initialize_tables(engine)
        utils._verify_schema(engine)  # raises unless at MLflow's head revision
    finally:
        engine.dispose()
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
