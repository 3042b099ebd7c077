"""The SQLite store: a connection per thread, write transactions, and the files it keeps."""

import json
import os
import secrets
import sqlite3
import stat
import tempfile
import threading
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path

import sqlite_utils

from ..errors import Busy, Conflict, ServiceError, StorageFull, Unavailable
from .base import READ_ONLY, Store

UNREACHABLE = "The database file cannot be read or written."
# the domain error of each primary result code; others (a syntax error) stay internal (500)
ERRORS = {
    sqlite3.SQLITE_CONSTRAINT: Conflict,
    sqlite3.SQLITE_BUSY: Busy,
    sqlite3.SQLITE_LOCKED: Busy,
    sqlite3.SQLITE_FULL: StorageFull,
    sqlite3.SQLITE_READONLY: lambda: Unavailable(READ_ONLY),
    sqlite3.SQLITE_CANTOPEN: lambda: Unavailable(UNREACHABLE),
    sqlite3.SQLITE_IOERR: lambda: Unavailable(UNREACHABLE),
}


class _Held:
    """Closes a thread's connection when the thread's locals go (a sqlite3 connection is in a
    reference cycle: freed unclosed, it keeps its file descriptors until a collection)."""

    def __init__(self, db):
        self.db = db

    def __del__(self):
        self.db.close()


class ThreadConnections:
    """A connection per thread, from `connect`; each closes when its thread ends, and all at
    close() (as the old thread-locals go; a later use opens another)."""

    def __init__(self, connect):
        self.connect, self.local = connect, threading.local()

    def get(self):
        held = getattr(self.local, "held", None)
        if held is None:
            held = self.local.held = _Held(self.connect())
        return held.db

    def close(self) -> None:
        self.local = threading.local()


def connect(path: str, timeout: float, mode: str = "rw") -> sqlite3.Connection:
    """An autocommit connection any thread may close; mode=rw: a vanished file is an error."""
    uri = Path(os.path.abspath(path)).as_uri() + f"?mode={mode}"
    return sqlite3.connect(
        uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False
    )


class SQLiteStore(Store):
    """The store in one SQLite file: a connection per thread; writers wait for BEGIN IMMEDIATE."""

    DIALECT = {
        "identity": "INTEGER PRIMARY KEY AUTOINCREMENT",  # AUTOINCREMENT: ids are never reused
        "reference": "INTEGER",
        "counter": "INTEGER",
        "real": "REAL",
        "without_rowid": " WITHOUT ROWID",
        "v3_orders": "",
    }
    DRIVER_ERROR = sqlite3.Error
    UNAVAILABLE = "unreadable"
    WRITE, READ = "BEGIN IMMEDIATE", "BEGIN"  # a snapshot: a deferred transaction, under WAL

    def __init__(self, path: str, *, busy_timeout: float = 5.0):
        self.path, self.busy_timeout = str(path), busy_timeout
        self._threads = ThreadConnections(self._connect)
        # writers take turns here rather than in SQLite's busy handler, with its long sleeps
        self._writer = threading.Lock()

    @staticmethod
    def translate(error: sqlite3.Error) -> ServiceError:
        return ERRORS.get((getattr(error, "sqlite_errorcode", None) or 0) & 0xFF, ServiceError)()

    @staticmethod
    def _in_ids(column: str, ids: list[int]) -> tuple[str, str]:
        return f"{column} IN (SELECT value FROM json_each(?))", json.dumps(ids)

    def _db(self) -> sqlite_utils.Database:
        with self._translated():
            return self._threads.get()

    def _connection(self):
        return nullcontext(self._db().conn)

    def _insert(self, sql: str, params=()) -> int:
        # not RETURNING: its row comes back before the commit, stalling other writers (see docs/)
        with self._translated():
            return self._db().conn.execute(sql, params).lastrowid

    def _connect(self) -> sqlite_utils.Database:
        conn = connect(self.path, self.busy_timeout)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA synchronous = FULL")  # WAL + FULL survives power loss too
        return sqlite_utils.Database(conn)

    def _in_transaction(self) -> bool:
        held = getattr(self._threads.local, "held", None)
        return held is not None and held.db.conn.in_transaction

    def _writable(self) -> None:
        # open connections could still write to a file now read-only or gone
        if not self._in_transaction() and not os.access(self.path, os.W_OK):
            raise Unavailable(READ_ONLY if os.path.exists(self.path) else UNREACHABLE)

    @contextmanager
    def _transaction(self, begin: str):
        if self._in_transaction():  # nested: part of the outer one
            yield
            return
        writing = begin == self.WRITE
        if writing and not self._writer.acquire(timeout=self.busy_timeout):
            raise Busy()
        db = None
        try:
            with self._translated():
                if writing:
                    self._writable()
                db = self._db()
                db.execute(begin)
            yield
            with self._translated():
                db.execute("COMMIT")
        finally:
            if db is not None:
                db.rollback()  # when the block or the COMMIT failed (else nothing to undo)
            if writing:
                self._writer.release()

    def close(self) -> None:
        self._threads.close()

    def upgrade_schema(self) -> int:
        """Create or upgrade the schema (and the file, never its directory); the version."""
        # the owner's alone (it holds password and key hashes), as SQLite's -wal and -shm
        with suppress(FileExistsError):
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        self._threads.get().enable_wal()  # the driver's own error names what is wrong
        return super().upgrade_schema()

    def check(self) -> str:
        """'ok', or what is wrong with the database: 'missing', 'read-only' or 'unreadable'."""
        if not os.path.exists(self.path):
            return "missing"
        directory = os.path.dirname(os.path.abspath(self.path))
        # access() reports a read-only file system even to root, who may write anything else
        if not (os.access(self.path, os.W_OK) and os.access(directory, os.W_OK)):
            return "read-only"
        return super().check()

    def stored_secret(self) -> str:
        """The signing secret in secret.key beside the database, made once (0600), never through
        a symlink; a file other users could read or change is a ValueError naming it."""
        path = os.path.join(os.path.dirname(os.path.abspath(self.path)), "secret.key")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            # written aside, then linked into place: a second process starting at the same
            # moment either links first or reads the whole secret, never an empty file
            fd, draft = tempfile.mkstemp(".tmp", "secret.key.", os.path.dirname(path))  # 0600
            with os.fdopen(fd, "w", encoding="ascii") as file:
                file.write(secrets.token_urlsafe(48) + "\n")
            try:
                with suppress(FileExistsError):
                    os.link(draft, path, follow_symlinks=False)
            finally:
                os.unlink(draft)
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as error:
            why = f"{path} cannot be opened ({error.strerror}); it must be a file"
            raise ValueError(why) from None
        with os.fdopen(fd, encoding="ascii") as file:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ValueError(f"{path} is not a regular file")
            if info.st_uid not in (os.geteuid(), 0) or info.st_mode & 0o077:
                raise ValueError(
                    f"{path} can be read or changed by other users (mode "
                    f"{stat.filemode(info.st_mode)}, owner uid {info.st_uid}); make it the service "
                    f"user's alone (chmod 600) or remove it to make a new one"
                )
            return file.read().strip()
