"""The SQLite store: connections, transactions, and the files it keeps."""

import json
import os
import secrets
import sqlite3
import stat
import threading
import weakref
from contextlib import contextmanager, nullcontext, suppress

import sqlite_utils

from ..errors import Busy, Conflict, ServiceError, StorageFull, Unavailable
from .base import READ_ONLY, Store

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


class Pool:
    """Idle connections (anything with close()) to one SQLite file, kept per process with the
    file each was opened on: a file replaced since (a restore) gets new ones."""

    def __init__(self, path: str, connect, size: int):
        self.path, self.connect, self.size = path, connect, size
        self.lock = threading.Lock()
        self.idle: list[tuple] = []  # (connection, file id), newest last
        self.pid = os.getpid()

    def file_id(self) -> tuple[int, int] | None:
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return None
        return info.st_dev, info.st_ino

    def take(self) -> tuple:
        """An idle connection to the file as it is now, else a new one; with its file id."""
        file_id = self.file_id()
        with self.lock:
            if self.pid != os.getpid():
                # a fork's inherited connections are the parent's: never used nor closed
                self.pid, self.idle = os.getpid(), []
            while self.idle:
                conn, opened = self.idle.pop()
                if opened == file_id:
                    return conn, opened
                conn.close()
        return self.connect(), self.file_id()

    def give(self, conn, file_id) -> None:
        with self.lock:
            if self.pid == os.getpid() and len(self.idle) < self.size:
                self.idle.append((conn, file_id))
                return
        conn.close()

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        for conn, _ in idle:
            conn.close()


class SQLiteStore(Store):
    """The store in one SQLite file. A thread keeps a connection until release() (the end of
    a request) gives it to a small pool of idle ones; writers wait for BEGIN IMMEDIATE."""

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
    POOL_SIZE = 16  # idle connections kept for the next requests; more are closed
    WRITE, READ = "BEGIN IMMEDIATE", "BEGIN"  # a snapshot: a deferred transaction, under WAL

    def __init__(self, path: str, *, busy_timeout: float = 5.0):
        self.path = str(path)
        self.busy_timeout = busy_timeout
        self._local = threading.local()
        self._pool = Pool(self.path, self._connect, self.POOL_SIZE)
        self._open: weakref.WeakSet[sqlite_utils.Database] = weakref.WeakSet()  # in use or idle

    @staticmethod
    def translate(error: sqlite3.Error) -> ServiceError:
        code = getattr(error, "sqlite_errorcode", None)
        return ERRORS.get(None if code is None else code & 0xFF, ServiceError)()

    @staticmethod
    def _in_ids(column: str, ids: list[int]) -> tuple[str, str]:
        return f"{column} IN (SELECT value FROM json_each(?))", json.dumps(ids)

    def _db(self) -> sqlite_utils.Database:
        """This thread's connection, reopened if the file was deleted or replaced (a restore):
        writing on into an unlinked file would lose every write at the next restart."""
        local = self._local
        held = getattr(local, "held", None)
        if getattr(local, "busy", False):
            return held[0]
        file_id = self._pool.file_id()
        if file_id is None:
            raise Unavailable("The database file is missing.")
        if held is not None and held[1] != file_id:
            held[0].close()
            local.held = held = None
        if held is None:
            held = local.held = self._pool.take()
            with self._pool.lock:
                self._open.add(held[0])
        return held[0]

    def _connection(self):
        return nullcontext(self._db().conn)

    def _insert(self, sql: str, params=()) -> int:
        # not RETURNING: its row comes back before the commit, stalling other writers (see docs/)
        with self._translated(), self._connection() as conn:
            return conn.execute(sql, params).lastrowid

    def release(self) -> None:
        """Give this thread's connection back to the pool (outside a transaction only)."""
        held = getattr(self._local, "held", None)
        if held is not None and not getattr(self._local, "busy", False):
            self._local.held = None
            self._pool.give(*held)

    def open_connections(self) -> int:
        """How many connections this store holds open (in use or idle)."""
        with self._pool.lock:
            return len(self._open)

    def _connect(self) -> sqlite_utils.Database:
        # mode=rw: a database file that vanished is an error, not a new empty file
        uri = "file:" + os.path.abspath(self.path) + "?mode=rw"
        conn = sqlite3.connect(
            uri,
            uri=True,
            timeout=self.busy_timeout,  # sets SQLite's busy timeout
            isolation_level=None,  # we issue BEGIN / COMMIT ourselves
            check_same_thread=False,  # connections move between threads through the pool
        )
        conn.execute("PRAGMA foreign_keys = ON")
        # WAL + NORMAL survives a crash of the process; FULL also survives power loss
        conn.execute("PRAGMA synchronous = FULL")
        return sqlite_utils.Database(conn)

    def _writable(self) -> None:
        if not getattr(self._local, "busy", False):  # a transaction checked when it began
            self._db()  # a missing file says so
            if not os.access(self.path, os.W_OK):
                # open connections could still write through their descriptors: refuse
                raise Unavailable(READ_ONLY)

    @contextmanager
    def _transaction(self, begin: str):
        local = self._local
        if getattr(local, "busy", False):  # nested: part of the outer one
            yield
            return
        with self._translated():
            if begin == self.WRITE:
                self._writable()
            db = self._db()
            db.execute(begin)
        local.busy = True
        try:
            yield
            local.busy = False
            with self._translated():
                db.execute("COMMIT")
        finally:
            local.busy = False
            db.rollback()  # when the block or the COMMIT failed (else there is nothing to undo)

    def close(self) -> None:
        """Close every connection this store opened."""
        self._pool.close()
        with self._pool.lock:
            handles = list(self._open)
        for db in handles:
            db.close()
        self._local = threading.local()

    def upgrade_schema(self) -> int:
        """Create or upgrade the schema (and the file, never its directory); the version."""
        # the owner's alone (it holds password and key hashes), as SQLite's -wal and -shm
        with suppress(FileExistsError):
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        self._db().enable_wal()
        return super().upgrade_schema()

    def _schema_version(self) -> int:
        return self._db().conn.execute("PRAGMA user_version").fetchone()[0]

    def _set_version(self, number: int) -> None:
        self._db().conn.execute(f"PRAGMA user_version = {number}")

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
            draft = f"{path}.{secrets.token_hex(8)}.tmp"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            with os.fdopen(os.open(draft, flags, 0o600), "w", encoding="ascii") as file:
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
