"""The SQLite store: connections, transactions, the schema and what SQLite does its own way."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import weakref
from contextlib import contextmanager

import sqlite_utils

from ..errors import Conflict, ServiceError, StorageFull, Unavailable
from .base import Store
from .beside import FilesBeside
from .common import translated
from .persisted import PERSISTED_SCHEMA
from .schema import SCHEMA_V1

SCHEMA_V1_SQLITE = SCHEMA_V1.format(
    identity="INTEGER PRIMARY KEY AUTOINCREMENT",  # AUTOINCREMENT: ids are never reused
    reference="INTEGER",
    counter="INTEGER",
    real="REAL",
    without_rowid=" WITHOUT ROWID",
)


def _v2_user_status(store) -> None:
    """Users can be disabled, and a password change or a disable ends their tokens."""
    users = store._db()["users"]
    users.add_column("disabled_at", str)
    users.add_column("token_generation", int, not_null_default=0)


def _v3_people_filters(store) -> None:
    """People lists filter by city and country ignoring case (stored folded keys, filled from
    what is there) and sort by name or age: indexes for those filters and orders."""
    people = store._db()["people"]
    people.add_column("city_key", str)
    people.add_column("country_key", str)
    store._fold_places()
    # the rowid (id) ends every index, so equal keys come in id order, the lists' tie-break
    people.create_index(["city_key"], index_name="people_city_key")
    people.create_index(["country_key"], index_name="people_country_key")
    people.create_index(["age"], index_name="people_age")


# Each entry upgrades the schema by one version, inside one transaction; sqlite-utils writes
# the DDL of the later ones. PRAGMA user_version records how far a file is.
MIGRATIONS = [
    lambda store: store._script(SCHEMA_V1_SQLITE),
    _v2_user_status,
    _v3_people_filters,
    lambda store: store._script(PERSISTED_SCHEMA),
]
SCHEMA_VERSION = len(MIGRATIONS)
FILE_CHECK_SECONDS = 1.0  # how long a read may trust that the database file is still there


def _dict_row(cursor, row):
    return dict(zip([column[0] for column in cursor.description], row, strict=True))


def translate(error: sqlite3.Error) -> ServiceError:
    """The domain error for a SQLite error; unexpected ones stay internal (500)."""
    text = str(error).lower()
    if isinstance(error, sqlite3.IntegrityError) and "email_key" in text:
        return Conflict("A person with this email already exists.")
    if "full" in text:
        return StorageFull()
    if any(
        part in text
        for part in ("locked", "busy", "readonly", "unable to open", "disk i/o", "no such table")
    ):
        return Unavailable(headers={"Retry-After": "1"})
    return ServiceError()


class _Handle:
    """A connection with what is known of the file it was opened on."""

    __slots__ = ("db", "file_id", "checked", "__weakref__")

    def __init__(self, db: sqlite_utils.Database, file_id: tuple[int, int], checked: float):
        self.db, self.file_id, self.checked = db, file_id, checked


class SQLiteStore(FilesBeside, Store):
    """The store in one SQLite file: the embedded default.

    Each thread gets its own connection; writes run in BEGIN IMMEDIATE transactions so that
    concurrent writers wait for the lock (busy timeout) instead of failing.
    """

    driver_error = sqlite3.Error
    integrity_error = sqlite3.IntegrityError
    GREATEST = "max"

    def translate(self, error: Exception) -> ServiceError:
        return translate(error)

    def _in_ids(self, column: str) -> str:
        return f"{column} IN (SELECT value FROM json_each(?))"

    def _ids(self, ids: list[int]) -> str:
        return json.dumps(ids)

    POOL_SIZE = 16  # idle connections kept for the next requests; more are closed

    def __init__(self, path: str, *, busy_timeout: float = 5.0):
        self.path = str(path)
        self.busy_timeout = busy_timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self._idle: list[_Handle] = []  # released connections, newest last
        self._handles: weakref.WeakSet[_Handle] = weakref.WeakSet()  # every open one
        self._epoch_map = None  # the mapped epoch file (FilesBeside)
        self._epoch_identity: tuple[int, int] | None = None

    # -- connections and transactions ---------------------------------------------------
    # A thread takes a connection when it first needs one and keeps it until release(), which
    # the web layer calls when a request ends: the connection goes back to a small pool of
    # idle ones. So a server that runs each request on a new thread holds as many
    # connections as requests run at once, never one per thread it ever started.

    def _db(self, verify: bool = False) -> sqlite_utils.Database:
        """This thread's connection, reopened if the file was deleted or replaced (a restore).

        Writing on into an unlinked inode would lose every write at the next restart, so a
        write transaction always checks (verify); reads check at most every second.
        """
        local = self._local
        handle = getattr(local, "handle", None)
        if handle is None:
            handle = local.handle = self._checkout()
            local.depth = 0
        elif not local.depth:
            now = time.monotonic()
            if verify or now - handle.checked >= FILE_CHECK_SECONDS:
                handle.checked = now
                if self._file_id() != handle.file_id:
                    self._discard(handle)
                    handle = local.handle = self._checkout()
        return handle.db

    def _checkout(self) -> _Handle:
        with self._lock:
            handle = self._idle.pop() if self._idle else None
        if handle is not None:
            if time.monotonic() - handle.checked < FILE_CHECK_SECONDS:
                return handle
            handle.checked = time.monotonic()
            if self._file_id() == handle.file_id:
                return handle
            self._discard(handle)
        file_id = self._file_id()
        handle = _Handle(sqlite_utils.Database(self._connect()), file_id, time.monotonic())
        with self._lock:
            self._handles.add(handle)
        return handle

    def release(self) -> None:
        """Give this thread's connection back to the pool (outside a transaction only)."""
        local = self._local
        handle = getattr(local, "handle", None)
        if handle is None or getattr(local, "depth", 0):
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
            stat = os.stat(self.path)
        except FileNotFoundError:
            missing = Unavailable("The database file is missing.", headers={"Retry-After": "5"})
            raise missing from None
        return stat.st_dev, stat.st_ino

    def _discard(self, handle: _Handle) -> None:
        with self._lock:
            self._handles.discard(handle)
        try:
            handle.db.conn.close()
        except sqlite3.Error:
            pass

    def _connect(self) -> sqlite3.Connection:
        # uri=True with mode=rw: a database file that vanished is an error, not a new empty file
        uri = "file:" + os.path.abspath(self.path) + "?mode=rw"
        conn = sqlite3.connect(
            uri,
            uri=True,
            timeout=self.busy_timeout,
            isolation_level=None,  # we issue BEGIN IMMEDIATE / COMMIT ourselves
            check_same_thread=False,  # connections move between threads through the pool
        )
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        # WAL + NORMAL survives a crash of the process; FULL also survives power loss
        conn.execute("PRAGMA synchronous = FULL")
        return conn

    def _execute(self, sql: str, params=()):
        # rows as dicts on our cursors only: sqlite-utils expects tuples from the connection
        cursor = self._db().conn.cursor()
        cursor.row_factory = _dict_row
        return cursor.execute(sql, params)

    def _insert(self, sql: str, params=()) -> int:
        return self._execute(sql, params).lastrowid

    def _executemany(self, sql: str, rows) -> None:
        self._db().conn.executemany(sql, rows)

    def _script(self, sql: str) -> None:
        # statement by statement, inside the caller's transaction (executescript would commit
        # it); complete_statement knows where one ends, semicolons in strings and triggers too
        statement = ""
        for line in sql.splitlines(keepends=True):
            statement += line
            if sqlite3.complete_statement(statement):
                self._execute(statement)
                statement = ""
        if statement.strip():
            self._execute(statement)

    def _writable(self) -> sqlite_utils.Database:
        """This thread's connection, after checking that the file is still there and writable.

        Inside a transaction that was checked when it began."""
        if getattr(self._local, "depth", 0):
            return self._local.handle.db
        db = self._db(verify=True)
        if not os.access(self.path, os.W_OK):
            # open connections could still write through their descriptors; the operator said no
            raise Unavailable(
                "The database is read-only; nothing was written.", headers={"Retry-After": "5"}
            )
        return db

    @contextmanager
    def transaction(self):
        """One write transaction; nested uses join the outer one."""
        if getattr(self._local, "depth", 0):
            self._local.depth += 1
            try:
                yield
            finally:
                self._local.depth -= 1
            return
        db = self._writable()
        try:
            db.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            raise translate(error) from error
        self._local.depth = 1
        try:
            yield
        except BaseException:
            self._local.depth = 0
            if db.conn.in_transaction:
                db.conn.execute("ROLLBACK")
            raise
        self._local.depth = 0
        try:
            db.conn.execute("COMMIT")
        except sqlite3.Error as error:
            if db.conn.in_transaction:
                db.conn.execute("ROLLBACK")
            raise translate(error) from error

    def close(self) -> None:
        """Close every connection this store opened."""
        with self._lock:
            handles, self._idle = list(self._handles), []
            self._handles = weakref.WeakSet()
        for handle in handles:
            try:
                handle.db.conn.close()
            except sqlite3.Error:
                pass
        self._local = threading.local()
        if self._epoch_map is not None:
            self._epoch_map.close()
            self._epoch_map = None

    # -- schema -----------------------------------------------------------------------------

    def upgrade_schema(self) -> int:
        """Create or upgrade the schema; returns the version. Idempotent. The file is created,
        never its directory: which directories may be made is the application's choice."""
        try:  # a new file is the owner's alone (it holds password and key hashes); SQLite
            # gives its -wal and -shm files the same mode
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            pass
        db = self._db()
        if db.conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            db.enable_wal()
        with self.transaction():
            version = db.conn.execute("PRAGMA user_version").fetchone()[0]
            self._upgrade(
                MIGRATIONS, version, lambda n: db.conn.execute(f"PRAGMA user_version = {n}")
            )
        self.credentials_epoch()  # made at start-up, not on a request (the disk may be full then)
        return SCHEMA_VERSION

    @translated
    def check(self) -> str:
        """'ok', or what is wrong with the database: 'missing', 'read-only' or 'unreadable'."""
        if not os.path.exists(self.path):
            return "missing"
        directory = os.path.dirname(os.path.abspath(self.path))
        # access() reports a read-only file system even to root, who may write anything else
        if not (os.access(self.path, os.W_OK) and os.access(directory, os.W_OK)):
            return "read-only"
        try:
            self._execute("SELECT 1 FROM people LIMIT 1").fetchall()
        except (sqlite3.Error, ServiceError):
            return "unreadable"
        return "ok"
