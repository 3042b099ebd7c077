"""Rate-limit counters in a SQLite file that every process of a machine shares (long because it
serves three of the limits library's strategies)."""

from __future__ import annotations

import hashlib
import itertools
import os
import sqlite3
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from math import floor
from urllib.parse import parse_qsl, urlencode, urlsplit

from limits.errors import ConfigurationError
from limits.storage import MovingWindowSupport, SlidingWindowCounterSupport, Storage

from . import is_url

SCHEME = "sqlite"
PREFIX = SCHEME + "://"
FILE_CHECK_SECONDS = 1.0  # how long a thread trusts that the file it writes is still the file

SCHEMA = """
    BEGIN IMMEDIATE;
    -- fixed-window and sliding-window counters: one row per key (and window)
    CREATE TABLE IF NOT EXISTS counters (
        key TEXT PRIMARY KEY,
        value INTEGER NOT NULL,
        expires_at REAL NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS counters_expires_at ON counters (expires_at);
    -- moving-window entries: one row per accepted hit, with its cost
    CREATE TABLE IF NOT EXISTS entries (
        key TEXT NOT NULL,
        at REAL NOT NULL,
        amount INTEGER NOT NULL,
        expires_at REAL NOT NULL
    );
    CREATE INDEX IF NOT EXISTS entries_key_at ON entries (key, at);
    CREATE INDEX IF NOT EXISTS entries_expires_at ON entries (expires_at);
    COMMIT;
"""


def path_of(uri: str) -> str:
    """The file a `sqlite://PATH` URI names: everything after `sqlite://`, taken literally
    (`sqlite:///srv/ratelimits.db` is absolute, `sqlite://data/ratelimits.db` is relative to
    the working directory)."""
    if not uri.startswith(PREFIX):
        raise ConfigurationError(f"not a {PREFIX} URI: {uri!r}")
    path = uri[len(PREFIX) :]
    if not path or path == ":memory:" or "\0" in path:
        # :memory: would give every thread a database of its own, so nothing would be shared
        raise ConfigurationError(f"{PREFIX} needs the path of a file, not {path!r}")
    return path


def default_uri(database: str) -> str:
    """Where the counters of DATABASE live when nothing says otherwise.

    Beside a SQLite database: `<database>.ratelimits`. A PostgreSQL database has no file to
    sit beside, so one file per database (named by a hash of its URL without credentials) in
    a directory of the temporary directory that only this user may enter. Raises OSError if
    that directory is not safely ours.
    """
    if not is_url(database):
        return PREFIX + os.path.abspath(str(database) + ".ratelimits")
    # where the data is, without user or password: not even a hash of a password in a name
    url = urlsplit(str(database))
    query = [(name, value) for name, value in parse_qsl(url.query) if name != "password"]
    identity = f"{url.hostname}:{url.port}{url.path}?{urlencode(query)}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return PREFIX + os.path.join(private_directory(), f"ratelimits-{digest}.db")


def private_directory() -> str:
    """`<tmp>/people-service-<uid>`, created 0700; refused if another user could have planted
    it or could write into it (the temporary directory is shared by every user)."""
    uid = os.getuid()
    directory = os.path.join(tempfile.gettempdir(), f"people-service-{uid}")
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or info.st_mode & 0o077:
        raise OSError(f"{directory} is not a private directory of user {uid}")
    return directory


class SQLiteCounters(Storage, MovingWindowSupport, SlidingWindowCounterSupport):
    """A `limits` storage in one SQLite file: `storage_from_string("sqlite:///path/file.db")`.

    Every process that opens the same file shares the counters, and each decision (read the
    counts, compare with the limit, add the hit) is one `BEGIN IMMEDIATE` transaction, so
    limits are exact however many processes and threads hit them. Each thread keeps its own
    connection. Counters need not outlive a crash of the machine: WAL with `synchronous =
    NORMAL` commits without waiting for the disk, and the file stays consistent even after a
    power loss. OFF could leave it corrupt then; it would save the fdatasync of each checkpoint,
    68 per 20,000 hits (strace): 1 µs a hit on an idle disk, more on a busy one (README).
    Expired rows are purged as hits go by, so the file stays as large as the live counters.
    """

    STORAGE_SCHEME = [SCHEME]
    SYNCHRONOUS = "NORMAL"
    PURGE_EVERY = 100  # writes of one process between purges of expired rows
    PURGE_BATCH = 1000  # rows a purge removes at most (10 per write: more than a write adds)

    def __init__(
        self,
        uri: str,
        wrap_exceptions: bool = False,
        timeout: float = 5.0,
        **options,
    ):
        """`timeout`: seconds a hit waits for another process's transaction (busy timeout)."""
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)
        self.path = os.path.abspath(path_of(uri))
        self.timeout = float(timeout)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._pid = os.getpid()
        self._writes = itertools.count(1)
        self._connection()  # creates the file and its tables now: a bad path fails at start

    @property
    def base_exceptions(self) -> type[Exception]:
        return sqlite3.Error

    # -- connections and transactions -------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=self.timeout,  # the busy timeout: wait for other writers, do not fail
            isolation_level=None,  # transactions are ours: BEGIN IMMEDIATE ... COMMIT
            check_same_thread=False,  # only close() crosses threads
        )
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")  # persists in the file
            conn.execute(f"PRAGMA synchronous = {self.SYNCHRONOUS}")
            conn.executescript(SCHEMA)
        except BaseException:
            conn.close()
            raise
        with self._lock:
            if self._pid != os.getpid():
                # connections inherited through fork() are the parent's: never used, nor closed
                self._pid, self._connections = os.getpid(), []
            self._connections.append(conn)
        return conn

    def _file_id(self) -> tuple[int, int] | None:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return info.st_dev, info.st_ino

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection; a new one after a fork, or when the file was deleted or
        replaced (a temporary-file cleaner): counting on in an unlinked file would count alone."""
        local = self._local
        conn = getattr(local, "conn", None)
        now = time.monotonic()
        if conn is not None and local.pid == os.getpid():
            if now - local.checked < FILE_CHECK_SECONDS:
                return conn
            local.checked = now
            if self._file_id() == local.file_id:
                return conn
            self._forget(conn)
        conn = self._connect()
        local.conn, local.pid, local.checked = conn, os.getpid(), now
        local.file_id = self._file_id()
        return conn

    def _forget(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            if conn in self._connections:
                self._connections.remove(conn)
        conn.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, begun IMMEDIATE: the write lock is taken before reading, so a
        concurrent writer waits (busy timeout) instead of deciding on counts about to change."""
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            if next(self._writes) % self.PURGE_EVERY == 0:
                self._purge(conn, time.time())
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite may have rolled back already (disk full, I/O)
                conn.execute("ROLLBACK")
            raise

    def _purge(self, conn: sqlite3.Connection, now: float) -> None:
        conn.execute(
            "DELETE FROM counters WHERE key IN"
            " (SELECT key FROM counters WHERE expires_at <= ? LIMIT ?)",
            (now, self.PURGE_BATCH),
        )
        conn.execute(
            "DELETE FROM entries WHERE rowid IN"
            " (SELECT rowid FROM entries WHERE expires_at <= ? LIMIT ?)",
            (now, self.PURGE_BATCH),
        )

    def close(self) -> None:
        """Close every connection this storage opened (for tests and orderly shutdowns)."""
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
        self._local = threading.local()

    # -- counters: the fixed window, and the two windows of the sliding-window counter ------

    def _value(self, conn: sqlite3.Connection, key: str, now: float) -> int:
        row = conn.execute(
            "SELECT value FROM counters WHERE key = ? AND expires_at > ?", (key, now)
        ).fetchone()
        return row[0] if row else 0

    def _add(self, conn: sqlite3.Connection, key: str, expiry: float, amount: int, now: float):
        """Add `amount` to a live counter, or start it afresh; inside a write transaction."""
        updated = conn.execute(
            "UPDATE counters SET value = value + ? WHERE key = ? AND expires_at > ?"
            " RETURNING value",
            (amount, key, now),
        ).fetchone()
        if updated:
            return updated[0]
        conn.execute(
            "INSERT OR REPLACE INTO counters (key, value, expires_at) VALUES (?, ?, ?)",
            (key, amount, now + expiry),
        )
        return amount

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        """Add `amount` to the counter of `key` (which expires `expiry` seconds after it
        starts); returns the new count."""
        now = time.time()
        with self._write() as conn:
            return self._add(conn, key, expiry, amount, now)

    def get(self, key: str) -> int:
        return self._value(self._connection(), key, time.time())

    def get_expiry(self, key: str) -> float:
        row = (
            self._connection()
            .execute("SELECT expires_at FROM counters WHERE key = ?", (key,))
            .fetchone()
        )
        return row[0] if row else time.time()

    def clear(self, key: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM counters WHERE key = ?", (key,))
            conn.execute("DELETE FROM entries WHERE key = ?", (key,))

    def check(self) -> bool:
        """Whether the file answers."""
        try:
            self._connection().execute("SELECT 1 FROM counters LIMIT 1").fetchall()
        except sqlite3.Error:
            return False
        return True

    def reset(self) -> int:
        """Remove every counter and entry; returns how many there were."""
        with self._write() as conn:
            removed = conn.execute("DELETE FROM counters").rowcount
            return removed + conn.execute("DELETE FROM entries").rowcount

    # -- the sliding-window counter (the strategy the service uses) --------------------------

    @staticmethod
    def _window_keys(key: str, expiry: int, now: float) -> tuple[str, str]:
        # the keys limits' own storages use: the window's number since the epoch
        return f"{key}/{int((now - expiry) / expiry)}", f"{key}/{int(now / expiry)}"

    def _windows(
        self, conn: sqlite3.Connection, key: str, expiry: int, now: float
    ) -> tuple[int, float, int, float]:
        """(previous count, previous TTL, current count, current TTL), as MemoryStorage."""
        previous_key, current_key = self._window_keys(key, expiry, now)
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

    @staticmethod
    def _weighted(windows: tuple[int, float, int, float], expiry: int) -> float:
        previous, previous_ttl, current, _ = windows
        return previous * previous_ttl / expiry + current

    def acquire_sliding_window_entry(
        self, key: str, limit: int, expiry: int, amount: int = 1
    ) -> bool:
        """Add the hit if the weighted count of both windows stays within `limit`; a refused
        hit adds nothing."""
        if amount > limit:
            return False
        now = time.time()
        # A hit that is over the limit already is refused on a plain read, without the write
        # lock: a flood of refused requests never queues the accepted ones behind it.
        if self._over(self._connection(), key, limit, expiry, amount, now):
            return False
        with self._write() as conn:
            now = time.time()
            if self._over(conn, key, limit, expiry, amount, now):
                return False
            # the current window's counter lives two windows: it is the next one's previous
            self._add(conn, self._window_keys(key, expiry, now)[1], 2 * expiry, amount, now)
            return True

    def _over(self, conn, key: str, limit: int, expiry: int, amount: int, now: float) -> bool:
        windows = self._windows(conn, key, expiry, now)
        return floor(self._weighted(windows, expiry)) + amount > limit

    def get_sliding_window(self, key: str, expiry: int) -> tuple[int, float, int, float]:
        return self._windows(self._connection(), key, expiry, time.time())

    def clear_sliding_window(self, key: str, expiry: int) -> None:
        with self._write() as conn:
            conn.execute(
                "DELETE FROM counters WHERE key IN (?, ?)",
                self._window_keys(key, expiry, time.time()),
            )

    # -- the moving window ------------------------------------------------------------------

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        """Add the hit if the entries of the last `expiry` seconds leave room for `amount`."""
        if amount > limit:
            return False
        with self._write() as conn:
            now = time.time()
            (used,) = conn.execute(
                "SELECT coalesce(sum(amount), 0) FROM entries WHERE key = ? AND at >= ?",
                (key, now - expiry),
            ).fetchone()
            if used + amount > limit:
                return False
            conn.execute(
                "INSERT INTO entries (key, at, amount, expires_at) VALUES (?, ?, ?, ?)",
                (key, now, amount, now + expiry),
            )
            return True

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        """(start of the window: the oldest entry in it, entries in it)."""
        now = time.time()
        oldest, used = (
            self._connection()
            .execute(
                "SELECT min(at), coalesce(sum(amount), 0) FROM entries WHERE key = ? AND at >= ?",
                (key, now - expiry),
            )
            .fetchone()
        )
        return (oldest if oldest is not None else now), used
