"""The SQLite store: connections, transactions and what SQLite does its own way."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import weakref
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import sqlite_utils

from ..errors import Busy, Conflict, ServiceError, StorageFull, Unavailable
from .base import Store
from .beside import secret_beside
from .schema import MIGRATIONS, SCHEMA_VERSION

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SQLiteStore"]

READ_ONLY = "The database is read-only; nothing was written."
UNREACHABLE = "The database file cannot be read or written."
# the domain error for each primary result code; others (a syntax error) stay internal (500)
ERRORS = {
    sqlite3.SQLITE_CONSTRAINT: Conflict,
    sqlite3.SQLITE_BUSY: Busy,
    sqlite3.SQLITE_LOCKED: Busy,
    sqlite3.SQLITE_FULL: StorageFull,
    sqlite3.SQLITE_READONLY: lambda: Unavailable(READ_ONLY),
    sqlite3.SQLITE_CANTOPEN: lambda: Unavailable(UNREACHABLE),
    sqlite3.SQLITE_IOERR: lambda: Unavailable(UNREACHABLE),
}


@dataclass(eq=False)
class _Handle:
    """A connection and the identity (device, inode) of the file it was opened on."""

    db: sqlite_utils.Database
    file_id: tuple[int, int]


class SQLiteStore(Store):
    """The store in one SQLite file: the embedded default.

    A thread takes a connection when it first needs one and keeps it until release(), which
    the web layer calls when a request ends: the connection goes back to a small pool of idle
    ones, so a server that runs each request on a new thread holds as many connections as
    requests run at once. Writes run in BEGIN IMMEDIATE transactions, so concurrent writers
    wait for the lock (busy timeout) instead of failing.
    """

    DIALECT = {
        "identity": "INTEGER PRIMARY KEY AUTOINCREMENT",  # AUTOINCREMENT: ids are never reused
        "reference": "INTEGER",
        "counter": "INTEGER",
        "real": "REAL",
        "without_rowid": " WITHOUT ROWID",
        "v3_orders": "",
    }
    DRIVER_ERROR = sqlite3.Error
    POOL_SIZE = 16  # idle connections kept for the next requests; more are closed

    def __init__(self, path: str, *, busy_timeout: float = 5.0):
        self.path = str(path)
        self.busy_timeout = busy_timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self._idle: list[_Handle] = []  # released connections, newest last
        self._handles: weakref.WeakSet[_Handle] = weakref.WeakSet()  # every open one

    @staticmethod
    def translate(error: sqlite3.Error) -> ServiceError:
        code = getattr(error, "sqlite_errorcode", None)
        return ERRORS.get(None if code is None else code & 0xFF, ServiceError)()

    def _in_ids(self, column: str) -> str:
        return f"{column} IN (SELECT value FROM json_each(?))"

    def _ids(self, ids: list[int]) -> str:
        return json.dumps(ids)

    # -- connections and transactions ---------------------------------------------------

    def _db(self) -> sqlite_utils.Database:
        """This thread's connection, reopened if the file was deleted or replaced (a restore):
        writing on into an unlinked file would lose every write at the next restart."""
        local = self._local
        handle = getattr(local, "handle", None)
        if handle is not None and not local.depth and self._file_id() != handle.file_id:
            local.handle = None
            self._discard(handle)
            handle = None
        if handle is None:
            handle = local.handle = self._checkout()
            local.depth = 0
        return handle.db

    def _connection(self):
        return nullcontext(self._db().conn)

    def _checkout(self) -> _Handle:
        file_id = self._file_id()
        while True:
            with self._lock:
                handle = self._idle.pop() if self._idle else None
            if handle is None:
                break
            if handle.file_id == file_id:
                return handle
            self._discard(handle)
        handle = _Handle(sqlite_utils.Database(self._connect()), file_id)
        with self._lock:
            self._handles.add(handle)
        return handle

    def release(self) -> None:
        """Give this thread's connection back to the pool (outside a transaction only)."""
        local = self._local
        handle = getattr(local, "handle", None)
        if handle is None or local.depth:
            return
        local.handle = None
        with self._lock:
            if len(self._idle) < self.POOL_SIZE:
                self._idle.append(handle)
                return
        self._discard(handle)

    def open_connections(self) -> int:
        """How many connections this store holds open (in use or idle)."""
        with self._lock:
            return len(self._handles)

    def _file_id(self) -> tuple[int, int]:
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            raise Unavailable("The database file is missing.") from None
        return info.st_dev, info.st_ino

    def _discard(self, handle: _Handle) -> None:
        with self._lock:
            self._handles.discard(handle)
        handle.db.conn.close()

    def _connect(self) -> sqlite3.Connection:
        # mode=rw: a database file that vanished is an error, not a new empty file
        uri = "file:" + os.path.abspath(self.path) + "?mode=rw"
        conn = sqlite3.connect(
            uri,
            uri=True,
            timeout=self.busy_timeout,
            isolation_level=None,  # we issue BEGIN / COMMIT ourselves
            check_same_thread=False,  # connections move between threads through the pool
        )
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        # WAL + NORMAL survives a crash of the process; FULL also survives power loss
        conn.execute("PRAGMA synchronous = FULL")
        return conn

    def _writable(self) -> None:
        """Unavailable when the file is no longer writable (inside a transaction, that was
        checked when it began)."""
        if not getattr(self._local, "depth", 0):
            self._db()  # a missing file says so
            if not os.access(self.path, os.W_OK):
                # open connections could still write through their descriptors; the operator
                # said no
                raise Unavailable(READ_ONLY)

    def transaction(self):
        """One write transaction; nested uses join the outer one."""
        return self._transaction("BEGIN IMMEDIATE")

    def snapshot(self):
        """Reads that see one state of the file: a deferred transaction holds the snapshot its
        first read takes (WAL) until it ends."""
        return self._transaction("BEGIN")

    @contextmanager
    def _transaction(self, begin: str):
        local = self._local
        if getattr(local, "depth", 0):
            local.depth += 1
            try:
                yield
            finally:
                local.depth -= 1
            return
        with self._translated():
            if begin == "BEGIN IMMEDIATE":
                self._writable()
            conn = self._db().conn
            conn.execute(begin)
        local.depth = 1
        try:
            yield
        except BaseException:
            local.depth = 0
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        local.depth = 0
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise self.translate(error) from error

    def close(self) -> None:
        """Close every connection this store opened."""
        with self._lock:
            handles, self._idle = list(self._handles), []
            self._handles = weakref.WeakSet()
        for handle in handles:
            handle.db.conn.close()
        self._local = threading.local()

    # -- schema and files ---------------------------------------------------------------

    def upgrade_schema(self) -> int:
        """Create or upgrade the schema; returns the version. Idempotent. The file is created,
        never its directory: which directories may be made is the application's choice."""
        try:  # a new file is the owner's alone (it holds password and key hashes); SQLite
            # gives its -wal and -shm files the same mode
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            pass
        db = self._db()
        db.enable_wal()
        with self.transaction():
            version = db.conn.execute("PRAGMA user_version").fetchone()[0]
            self._migrate(version, lambda n: db.conn.execute(f"PRAGMA user_version = {n}"))
        return SCHEMA_VERSION

    def stored_secret(self) -> str:
        """The signing secret kept in secret.key beside the database."""
        return secret_beside(self.path)

    def check(self) -> str:
        """'ok', or what is wrong with the database: 'missing', 'read-only' or 'unreadable'."""
        if not os.path.exists(self.path):
            return "missing"
        directory = os.path.dirname(os.path.abspath(self.path))
        # access() reports a read-only file system even to root, who may write anything else
        if not (os.access(self.path, os.W_OK) and os.access(directory, os.W_OK)):
            return "read-only"
        try:
            self._execute("SELECT 1 FROM people LIMIT 1")
        except ServiceError:
            return "unreadable"
        return "ok"
