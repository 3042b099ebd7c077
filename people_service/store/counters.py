"""The `limits` storage of the sqlite:// scheme: counters every process of a machine shares."""

import fcntl
import hashlib
import os
import sqlite3
import stat
import tempfile
import threading
import time
from contextlib import closing, contextmanager, suppress
from math import floor
from types import SimpleNamespace
from urllib.parse import parse_qsl, urlencode, urlsplit

from limits.errors import ConfigurationError
from limits.storage import SlidingWindowCounterSupport, Storage
from limits.storage.base import TimestampedSlidingWindow

from . import is_url
from .sqlite import ThreadConnections, connect

PREFIX = "sqlite://"
SCHEMA = """
    CREATE TABLE IF NOT EXISTS counters (
        key TEXT PRIMARY KEY, value INTEGER NOT NULL, expires_at REAL NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS counters_expires_at ON counters (expires_at);
"""
# add `amount` to a live counter, or start it afresh (a counter past its expiry counts as 0)
ADD = """
    INSERT INTO counters (key, value, expires_at) VALUES (:key, :amount, :expires)
    ON CONFLICT (key) DO UPDATE SET
        value = CASE WHEN expires_at > :now THEN value + :amount ELSE :amount END,
        expires_at = CASE WHEN expires_at > :now THEN expires_at ELSE :expires END
    RETURNING value
"""
# each write first removes a few expired counters (more than it can add), so the file stays small
PURGE = (
    "DELETE FROM counters WHERE key IN (SELECT key FROM counters WHERE expires_at <= ? LIMIT 100)"
)


def create_private(path: str) -> int:
    """Open `path` 0600, never through a symlink; ConfigurationError if another user owns it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        info = os.fstat(fd)
        if info.st_uid not in (os.geteuid(), 0):
            who = f"another user (uid {info.st_uid}); remove it or serve as them"
            raise ConfigurationError(f"{path} belongs to {who}")
        if info.st_mode & 0o077:
            os.fchmod(fd, 0o600)
    except BaseException:
        os.close(fd)
        raise
    return fd


def default_uri(database: str) -> str:
    """The counters of DATABASE: `<database>.ratelimits`, or for PostgreSQL a private temp file."""
    if not is_url(database):
        return PREFIX + os.path.abspath(str(database) + ".ratelimits")
    url = urlsplit(str(database))  # named by where the data is, without user or password
    query = urlencode([item for item in parse_qsl(url.query) if item[0] != "password"])
    digest = hashlib.sha256(f"{url.hostname}:{url.port}{url.path}?{query}".encode()).hexdigest()
    uid = os.getuid()  # in `<tmp>/people-service-<uid>`, 0700: refused if others could write
    directory = os.path.join(tempfile.gettempdir(), f"people-service-{uid}")
    with suppress(FileExistsError):
        os.mkdir(directory, 0o700)
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or info.st_mode & 0o077:
        raise OSError(f"{directory} is not a private directory of user {uid}")
    return PREFIX + os.path.join(directory, f"ratelimits-{digest[:16]}.db")


class SQLiteCounters(Storage, SlidingWindowCounterSupport, TimestampedSlidingWindow):
    """Exact across processes: writers queue on a thread lock and an flock of `<file>.lock`
    (quicker than SQLite's busy handler); a refusal only reads. Errors are raised, never a
    made-up count. Each process opens its own connections (flask-limiter may build it before
    a fork)."""

    STORAGE_SCHEME = ["sqlite"]
    base_exceptions = (sqlite3.Error, OSError)

    def __init__(self, uri: str, wrap_exceptions: bool = False, timeout: float = 5.0, **options):
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)
        path = uri.removeprefix(PREFIX)  # taken literally: `sqlite:///srv/x.db` is absolute
        if not uri.startswith(PREFIX) or not path or path == ":memory:" or "\0" in path:
            # :memory: would give every thread a database of its own, sharing nothing
            raise ConfigurationError(f"{PREFIX} needs the path of a file, not {uri!r}")
        self.path, self.timeout = os.path.abspath(path), float(timeout)
        self._processes: dict[int, SimpleNamespace] = {}  # a child never uses its parent's
        os.close(create_private(self.path))  # the file and its table now: a bad path fails here
        with closing(self._connect("rwc")) as conn:
            conn.execute("PRAGMA journal_mode = WAL")  # persists in the file
            conn.executescript(SCHEMA)

    def _connect(self, mode: str = "rw") -> sqlite3.Connection:
        conn = connect(self.path, self.timeout, mode)
        conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    def _here(self) -> SimpleNamespace:
        here = self._processes.get(os.getpid())
        if here is None:  # setdefault is atomic: the threads of a new process agree on one
            made = SimpleNamespace(threads=ThreadConnections(self._connect), lock=threading.Lock())
            here = self._processes.setdefault(os.getpid(), made)
        return here

    def _conn(self) -> sqlite3.Connection:
        return self._here().threads.get()

    @contextmanager
    def _writing(self):
        """This thread's connection, as the one writer of the file."""
        conn, here = self._conn(), self._here()
        with here.lock:
            if getattr(here, "fd", None) is None:
                here.fd = create_private(self.path + ".lock")
            fcntl.flock(here.fd, fcntl.LOCK_EX)
            try:
                conn.execute(PURGE, (time.time(),))
                yield conn
            finally:
                fcntl.flock(here.fd, fcntl.LOCK_UN)

    def _write(self, sql: str, params) -> list[tuple]:
        with self._writing() as conn:  # fetchall: it ends, and commits, before the lock goes
            return conn.execute(sql, params).fetchall()

    def close(self) -> None:
        """Close this process's connections and lock file (a later use opens others)."""
        here = self._processes.pop(os.getpid(), None)
        if here is not None:
            here.threads.close()
            if getattr(here, "fd", None) is not None:
                os.close(here.fd)

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        now = time.time()
        return self._write(ADD, dict(key=key, amount=amount, now=now, expires=now + expiry))[0][0]

    def _read(self, sql: str, *params):
        row = self._conn().execute(sql, params).fetchone()
        return row[0] if row else None

    def get(self, key: str) -> int:
        sql = "SELECT value FROM counters WHERE key = ? AND expires_at > ?"
        return self._read(sql, key, time.time()) or 0

    def get_expiry(self, key: str) -> float:
        return self._read("SELECT expires_at FROM counters WHERE key = ?", key) or time.time()

    def clear(self, key: str) -> None:
        self._write("DELETE FROM counters WHERE key = ?", (key,))

    def check(self) -> bool:
        """Whether the file answers, to a connection of its own."""
        try:
            with closing(self._connect()) as conn:
                conn.execute("SELECT 1 FROM counters LIMIT 1")
        except sqlite3.Error:
            return False
        return True

    def reset(self) -> int:
        return len(self._write("DELETE FROM counters RETURNING 1", ()))

    def _windows(self, conn, key: str, expiry: int, now: float) -> tuple[int, float, int, float]:
        """(previous count, previous TTL, current count, current TTL), as MemoryStorage."""
        previous_key, current_key = self.sliding_window_keys(key, expiry, now)
        sql = "SELECT key, value FROM counters WHERE key IN (?, ?) AND expires_at > ?"
        counts = dict(conn.execute(sql, (previous_key, current_key, now)).fetchall())
        previous, current = counts.get(previous_key, 0), counts.get(current_key, 0)
        previous_ttl = (1 - (((now - expiry) / expiry) % 1)) * expiry if previous else 0.0
        return previous, previous_ttl, current, (1 - ((now / expiry) % 1)) * expiry + expiry

    def _weighted(self, conn, key: str, expiry: int, now: float) -> int:
        previous, previous_ttl, current, _ = self._windows(conn, key, expiry, now)
        return floor(previous * previous_ttl / expiry + current)

    def acquire_sliding_window_entry(self, key: str, limit: int, expiry: int, amount=1) -> bool:
        now = time.time()
        if amount > limit or self._weighted(self._conn(), key, expiry, now) + amount > limit:
            return False  # refused on a read alone, without waiting for the writer's lock
        if amount <= 0:
            return True
        with self._writing() as conn:  # read again as the one writer: no one adds meanwhile
            if self._weighted(conn, key, expiry, now) + amount > limit:
                return False
            # the current window's counter lives two windows: it is the next one's previous
            current = self.sliding_window_keys(key, expiry, now)[1]
            params = dict(key=current, amount=amount, now=now, expires=now + 2 * expiry)
            conn.execute(ADD, params).fetchall()
        return True

    def get_sliding_window(self, key: str, expiry: int) -> tuple[int, float, int, float]:
        return self._windows(self._conn(), key, expiry, time.time())

    def clear_sliding_window(self, key: str, expiry: int) -> None:
        keys = self.sliding_window_keys(key, expiry, time.time())
        self._write("DELETE FROM counters WHERE key IN (?, ?)", keys)
