"""The `limits` storage of the sqlite:// scheme: counters every process of a machine shares."""

import fcntl
import hashlib
import itertools
import os
import sqlite3
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from math import floor
from types import SimpleNamespace
from urllib.parse import parse_qsl, urlencode, urlsplit

from limits.errors import ConfigurationError
from limits.storage import SlidingWindowCounterSupport, Storage
from limits.storage.base import TimestampedSlidingWindow

from . import is_url
from .sqlite import ThreadConnections, file_uri

PREFIX = "sqlite://"

SCHEMA = """
    CREATE TABLE IF NOT EXISTS counters (
        key TEXT PRIMARY KEY,
        value INTEGER NOT NULL,
        expires_at REAL NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS counters_expires_at ON counters (expires_at);
"""

# Add `amount` to a live counter, or start it afresh (a counter past its expiry counts as 0).
ADD = """
    INSERT INTO counters (key, value, expires_at) VALUES (:key, :amount, :expires)
    ON CONFLICT (key) DO UPDATE SET
        value = CASE WHEN expires_at > :now THEN value + :amount ELSE :amount END,
        expires_at = CASE WHEN expires_at > :now THEN expires_at ELSE :expires END
    RETURNING value
"""


def create_private(path: str) -> int:
    """Open `path` 0600, never through a symlink; ConfigurationError if another user owns it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        info = os.fstat(fd)
        if info.st_uid not in (os.geteuid(), 0):
            raise ConfigurationError(
                f"{path} belongs to another user (uid {info.st_uid}); remove it or serve as them"
            )
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
    # named by where the data is, without user or password
    url = urlsplit(str(database))
    query = [(name, value) for name, value in parse_qsl(url.query) if name != "password"]
    identity = f"{url.hostname}:{url.port}{url.path}?{urlencode(query)}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    # in `<tmp>/people-service-<uid>`, created 0700: refused if another user could write in it
    uid = os.getuid()
    directory = os.path.join(tempfile.gettempdir(), f"people-service-{uid}")
    with suppress(FileExistsError):
        os.mkdir(directory, 0o700)
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or info.st_mode & 0o077:
        raise OSError(f"{directory} is not a private directory of user {uid}")
    return PREFIX + os.path.join(directory, f"ratelimits-{digest}.db")


class SQLiteCounters(Storage, SlidingWindowCounterSupport, TimestampedSlidingWindow):
    """Exact across processes: each decision is one statement; writers queue on a thread lock
    and an flock of `<file>.lock` (quicker than SQLite's busy handler); a refusal only reads.
    flask-limiter builds it with the app, maybe before a fork: so each process opens its own
    connections and lock file on first use. An error is raised (as limits' StorageError when
    wrap_exceptions), never a made-up count."""

    STORAGE_SCHEME = ["sqlite"]
    PURGE_EVERY = 100  # writes of one process between purges of expired rows
    PURGE_BATCH = 1000  # rows a purge removes at most: more than the writes between add
    base_exceptions = (sqlite3.Error, OSError)  # what limits wraps when asked to

    def __init__(self, uri: str, wrap_exceptions: bool = False, timeout: float = 5.0, **options):
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)
        # the file of `sqlite://PATH`, taken literally (`sqlite:///srv/x.db` is absolute)
        if not uri.startswith(PREFIX):
            raise ConfigurationError(f"not a {PREFIX} URI: {uri!r}")
        path = uri[len(PREFIX) :]
        if not path or path == ":memory:" or "\0" in path:
            # :memory: would give every thread a database of its own, so nothing would be shared
            raise ConfigurationError(f"{PREFIX} needs the path of a file, not {path!r}")
        self.path = os.path.abspath(path)
        self.timeout = float(timeout)
        self._processes: dict[int, SimpleNamespace] = {}  # a child never uses its parent's
        os.close(create_private(self.path))  # the file and its table now: a bad path fails here
        with closing(self._connect("rwc")) as conn:
            conn.execute("PRAGMA journal_mode = WAL")  # persists in the file
            conn.executescript(SCHEMA)

    def _connect(self, mode: str = "rw") -> sqlite3.Connection:
        conn = sqlite3.connect(
            file_uri(self.path, mode),
            uri=True,
            timeout=self.timeout,
            isolation_level=None,
            check_same_thread=False,  # close() closes every thread's
        )
        conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    def _here(self) -> SimpleNamespace:
        """This process's connections and writer lock, made on first use in it."""
        here = self._processes.get(os.getpid())
        if here is None:  # setdefault is atomic: the threads of a new process agree on one
            made = SimpleNamespace(threads=ThreadConnections(self._connect), lock=threading.Lock())
            made.fd, made.writes = None, itertools.count(1)
            here = self._processes.setdefault(os.getpid(), made)
        return here

    def _conn(self) -> sqlite3.Connection:
        return self._here().threads.get()

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection, as the one writer of the file (statements autocommit)."""
        conn, writer = self._conn(), self._here()
        with writer.lock:
            if writer.fd is None:
                writer.fd = create_private(self.path + ".lock")
            fcntl.flock(writer.fd, fcntl.LOCK_EX)
            try:
                if next(writer.writes) % self.PURGE_EVERY == 0:
                    conn.execute(
                        "DELETE FROM counters WHERE key IN"
                        " (SELECT key FROM counters WHERE expires_at <= ? LIMIT ?)",
                        (time.time(), self.PURGE_BATCH),
                    )
                yield conn
            finally:
                fcntl.flock(writer.fd, fcntl.LOCK_UN)

    def _write(self, sql: str, params) -> list[tuple]:
        with self._writing() as conn:
            # fetchall: the statement runs to its end, and commits, before the lock goes
            return conn.execute(sql, params).fetchall()

    def close(self) -> None:
        """Close this process's connections and lock file (a later use opens them again)."""
        here = self._processes.pop(os.getpid(), None)
        if here is not None:
            here.threads.close()
            if here.fd is not None:
                os.close(here.fd)

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        """Add `amount` to the counter of `key` (expiring `expiry` s after it starts)."""
        now = time.time()
        params = {"key": key, "amount": amount, "now": now, "expires": now + expiry}
        return self._write(ADD, params)[0][0]

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
        """Remove every counter; returns how many there were."""
        return len(self._write("DELETE FROM counters RETURNING 1", ()))

    def _windows(self, conn, key: str, expiry: int, now: float) -> tuple[int, float, int, float]:
        """(previous count, previous TTL, current count, current TTL), as MemoryStorage."""
        previous_key, current_key = self.sliding_window_keys(key, expiry, now)
        counts = dict(
            conn.execute(
                "SELECT key, value FROM counters WHERE key IN (?, ?) AND expires_at > ?",
                (previous_key, current_key, now),
            ).fetchall()
        )
        previous, current = counts.get(previous_key, 0), counts.get(current_key, 0)
        previous_ttl = (1 - (((now - expiry) / expiry) % 1)) * expiry if previous else 0.0
        current_ttl = (1 - ((now / expiry) % 1)) * expiry + expiry
        return previous, previous_ttl, current, current_ttl

    def _weighted(self, conn, key: str, expiry: int, now: float) -> int:
        previous, previous_ttl, current, _ = self._windows(conn, key, expiry, now)
        return floor(previous * previous_ttl / expiry + current)

    def acquire_sliding_window_entry(
        self, key: str, limit: int, expiry: int, amount: int = 1
    ) -> bool:
        """Add the hit if the weighted count of both windows stays within `limit`."""
        now = time.time()
        if amount > limit or self._weighted(self._conn(), key, expiry, now) + amount > limit:
            return False  # refused on a read alone, without waiting for the writer's lock
        if amount <= 0:
            return True  # nothing to add
        with self._writing() as conn:  # read again as the one writer: no one adds meanwhile
            if self._weighted(conn, key, expiry, now) + amount > limit:
                return False
            # the current window's counter lives two windows: it is the next one's previous
            current = self.sliding_window_keys(key, expiry, now)[1]
            params = {"key": current, "amount": amount, "now": now, "expires": now + 2 * expiry}
            conn.execute(ADD, params).fetchall()
        return True

    def get_sliding_window(self, key: str, expiry: int) -> tuple[int, float, int, float]:
        return self._windows(self._conn(), key, expiry, time.time())

    def clear_sliding_window(self, key: str, expiry: int) -> None:
        keys = self.sliding_window_keys(key, expiry, time.time())
        self._write("DELETE FROM counters WHERE key IN (?, ?)", keys)
