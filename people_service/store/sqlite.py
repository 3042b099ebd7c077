"""The SQLite store: connections, transactions, and the files it keeps."""

import json
import os
import secrets
import sqlite3
import stat
import threading
import weakref
from contextlib import contextmanager, nullcontext, suppress
from types import SimpleNamespace

import sqlite_utils

from ..errors import Busy, Conflict, ServiceError, StorageFull, Unavailable
from .base import READ_ONLY, PerProcess, Store

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


def identity(path: str) -> tuple[int, int] | None:
    """Which file `path` names now (None: none), to notice one deleted or replaced."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino


class Closing:
    """Closes a thread's connection when the thread ends and its locals go: a connection freed
    unclosed keeps its file descriptors (a thread per request would leak one each)."""

    def __init__(self, db: sqlite_utils.Database):
        self.db = db

    def __del__(self):
        self.db.close()


class Connections:
    """One connection per thread to a SQLite file, opened on first use in each process: a fork
    never shares one. A thread's connection goes with the thread, or at close()."""

    def __init__(self, path: str, connect):
        self.path, self.connect = path, connect
        self._process = PerProcess(
            lambda: SimpleNamespace(
                local=threading.local(),
                open=weakref.WeakSet(),
                lock=threading.Lock(),
                # this process's writers take turns here rather than in SQLite's busy handler,
                # whose growing sleeps (up to 100 ms each) made the slowest writes wait
                writer=threading.Lock(),
            )
        )
        _ALL.add(self)

    @property
    def local(self) -> threading.local:
        """This thread's state (its connection, and what its user keeps beside it)."""
        return self._process.get().local

    def get(self) -> sqlite_utils.Database:
        """This thread's connection; a new one if the file was replaced."""
        local = self.local
        db = getattr(local, "db", None)
        if db is None or local.file != identity(self.path):
            self.drop()
            db = self.connect()
            local.db, local.file, local.closing = db, identity(self.path), Closing(db)
            state = self._process.get()
            with state.lock:
                state.open.add(db)
        return db

    def drop(self) -> None:
        """Close this thread's connection and forget its state (it reopens on next use)."""
        state = vars(self.local)
        db = state.get("db")
        state.clear()
        if db is not None:
            db.close()

    def close(self) -> None:
        """Close every connection this process opened here."""
        state = self._process.forget()
        if state is not None:
            with state.lock:
                opened = list(state.open)
            for db in opened:
                db.close()


# The forking thread closes its idle connections first: the child could never close them
# safely (SQLite forbids using or closing a connection across fork()), and the parent reopens.
_ALL: weakref.WeakSet[Connections] = weakref.WeakSet()


def _before_fork() -> None:
    for connections in list(_ALL):
        state = connections._process.made.get(os.getpid())
        if state is not None and not getattr(state.local, "busy", False):
            connections.drop()


os.register_at_fork(before=_before_fork)


class SQLiteStore(Store):
    """The store in one SQLite file: a connection per thread (checked against the file outside
    transactions); writers wait for BEGIN IMMEDIATE."""

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
        self.path = str(path)
        self.busy_timeout = busy_timeout
        self._connections = Connections(self.path, self._connect)

    @staticmethod
    def translate(error: sqlite3.Error) -> ServiceError:
        code = getattr(error, "sqlite_errorcode", None)
        return ERRORS.get(None if code is None else code & 0xFF, ServiceError)()

    @staticmethod
    def _in_ids(column: str, ids: list[int]) -> tuple[str, str]:
        return f"{column} IN (SELECT value FROM json_each(?))", json.dumps(ids)

    def _db(self) -> sqlite_utils.Database:
        """This thread's connection. Outside a transaction it checks the file: one that was
        deleted is Unavailable (mode=rw), one replaced (a restore) gets a new connection."""
        local = self._connections.local
        if getattr(local, "busy", False):
            return local.db
        with self._translated():
            return self._connections.get()

    def _connection(self):
        return nullcontext(self._db().conn)

    def _insert(self, sql: str, params=()) -> int:
        # not RETURNING: its row comes back before the commit, stalling other writers (see docs/)
        with self._translated(), self._connection() as conn:
            return conn.execute(sql, params).lastrowid

    def open_connections(self) -> int:
        """How many connections this process holds open to the file."""
        state = self._connections._process.get()
        with state.lock:
            return len(state.open)

    def _connect(self) -> sqlite_utils.Database:
        # mode=rw: a database file that vanished is an error, not a new empty file
        uri = "file:" + os.path.abspath(self.path) + "?mode=rw"
        conn = sqlite3.connect(
            uri,
            uri=True,
            timeout=self.busy_timeout,  # sets SQLite's busy timeout
            isolation_level=None,  # we issue BEGIN / COMMIT ourselves
            check_same_thread=False,  # close() closes every thread's
        )
        conn.execute("PRAGMA foreign_keys = ON")
        # WAL + NORMAL survives a crash of the process; FULL also survives power loss
        conn.execute("PRAGMA synchronous = FULL")
        return sqlite_utils.Database(conn)

    def _writable(self) -> None:
        if not getattr(self._connections.local, "busy", False):  # checked when it began
            self._db()  # a missing file says so
            if not os.access(self.path, os.W_OK):
                # open connections could still write through their descriptors: refuse
                raise Unavailable(READ_ONLY)

    @contextmanager
    def _transaction(self, begin: str):
        local = self._connections.local
        if getattr(local, "busy", False):  # nested: part of the outer one
            yield
            return
        writer = self._connections._process.get().writer if begin == self.WRITE else None
        if writer is not None and not writer.acquire(timeout=self.busy_timeout):
            raise Busy()
        db = None
        try:
            with self._translated():
                if writer is not None:
                    self._writable()
                db = self._db()
                db.execute(begin)
            local.busy = True
            yield
            local.busy = False
            with self._translated():
                db.execute("COMMIT")
        finally:
            local.busy = False
            if db is not None:
                db.rollback()  # when the block or the COMMIT failed (else nothing to undo)
            if writer is not None:
                writer.release()

    def close(self) -> None:
        """Close every connection this store opened in this process."""
        self._connections.close()

    def upgrade_schema(self) -> int:
        """Create or upgrade the schema (and the file, never its directory); the version."""
        # the owner's alone (it holds password and key hashes), as SQLite's -wal and -shm
        with suppress(FileExistsError):
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        self._connections.get().enable_wal()  # the driver's own error names what is wrong
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
