"""The data-access layer on SQLite: every SQL statement, the schema and its migrations."""

from __future__ import annotations

import functools
import json
import mmap
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from datetime import UTC, datetime

import sqlite_utils

from .errors import Conflict, NotFound, ServiceError, StorageFull, Unavailable

# Each entry upgrades the schema by one version; PRAGMA user_version records how far a file is.
MIGRATIONS = [
    """
    CREATE TABLE people (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL,
        name_key TEXT NOT NULL,
        age INTEGER,
        email TEXT,
        email_key TEXT UNIQUE,
        street TEXT,
        city TEXT,
        country TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX people_name_key ON people (name_key);
    CREATE TABLE friendships (
        person_id INTEGER NOT NULL REFERENCES people (id) ON DELETE CASCADE,
        friend_id INTEGER NOT NULL REFERENCES people (id) ON DELETE CASCADE,
        PRIMARY KEY (person_id, friend_id)
    ) WITHOUT ROWID;
    CREATE INDEX friendships_friend ON friendships (friend_id);
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        person_id INTEGER NOT NULL REFERENCES people (id) ON DELETE CASCADE,
        sender_id TEXT NOT NULL,
        sender TEXT NOT NULL,
        content TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX messages_person ON messages (person_id, sender_id, created_at);
    CREATE TABLE api_keys (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL UNIQUE,
        prefix TEXT NOT NULL,
        key_hash TEXT NOT NULL UNIQUE,
        scopes TEXT NOT NULL,
        rate_limit TEXT,
        created_at TEXT NOT NULL,
        last_used TEXT,
        request_count INTEGER NOT NULL DEFAULT 0,
        revoked_at TEXT
    );
    CREATE TABLE users (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        username TEXT NOT NULL UNIQUE,
        password_hash TEXT NOT NULL,
        scopes TEXT NOT NULL,
        rate_limit TEXT,
        created_at TEXT NOT NULL,
        last_used TEXT,
        request_count INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE idempotency (
        caller TEXT NOT NULL,
        key TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        status INTEGER NOT NULL,
        body TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (caller, key)
    );
    CREATE INDEX idempotency_created ON idempotency (created_at)
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)
FILE_CHECK_SECONDS = 1.0  # how long a read may trust that the database file is still there

PERSON_COLUMNS = "id, name, age, email, street, city, country"
MESSAGE_COLUMNS = "id, person_id, sender, content, created_at"
KEY_COLUMNS = (
    "id, name, prefix, scopes, rate_limit, created_at, last_used, request_count, revoked_at"
)


def iso(timestamp: float) -> str:
    """A POSIX time as RFC 3339 UTC with milliseconds."""
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now_iso() -> str:
    """The current UTC time as RFC 3339 with milliseconds."""
    return iso(time.time())


def fold(text: str | None) -> str | None:
    """The case-insensitive form of names and emails used for search and uniqueness."""
    return None if text is None else text.casefold()


def _dict_row(cursor, row):
    return dict(zip([column[0] for column in cursor.description], row, strict=True))


def _translated(method):
    """Turn SQLite's failures into the domain errors clients can understand."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as error:
            raise translate(error) from error

    return wrapper


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


class SQLiteStore:
    """People, friendships, messages, credentials and idempotency records in one SQLite file.

    Each thread gets its own connection; writes run in BEGIN IMMEDIATE transactions so that
    concurrent writers wait for the lock (busy timeout) instead of failing.
    """

    def __init__(self, path: str, *, busy_timeout: float = 5.0):
        self.path = str(path)
        self.busy_timeout = busy_timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._epoch_map: mmap.mmap | None = None

    # -- connections and transactions ---------------------------------------------------

    def _db(self, verify: bool = False) -> sqlite_utils.Database:
        """This thread's connection, reopened if the file was deleted or replaced (a restore).

        Writing on into an unlinked inode would lose every write at the next restart, so a
        write transaction always checks (verify); reads check at most every second.
        """
        local = self._local
        db = getattr(local, "db", None)
        if db is not None and not local.depth:
            now = time.monotonic()
            if verify or now - local.checked >= FILE_CHECK_SECONDS:
                local.checked = now
                if self._file_id() != local.file_id:
                    local.db = None
                    self._forget(db.conn)
                    db = None
        if db is None:
            file_id = self._file_id()
            db = sqlite_utils.Database(self._connect())
            local.db, local.depth, local.file_id = db, 0, file_id
            local.checked = time.monotonic()
        return db

    def _file_id(self) -> tuple[int, int]:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            missing = Unavailable("The database file is missing.", headers={"Retry-After": "5"})
            raise missing from None
        return stat.st_dev, stat.st_ino

    def _forget(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            if conn in self._connections:
                self._connections.remove(conn)
        try:
            conn.close()
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
            check_same_thread=False,  # only close() crosses threads
        )
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        # WAL + NORMAL survives a crash of the process; FULL also survives power loss
        conn.execute("PRAGMA synchronous = FULL")
        with self._lock:
            self._connections.append(conn)
        return conn

    def _execute(self, sql: str, params=()):
        # rows as dicts on our cursors only: sqlite-utils expects tuples from the connection
        cursor = self._db().conn.cursor()
        cursor.row_factory = _dict_row
        return cursor.execute(sql, params)

    def _writable(self) -> sqlite_utils.Database:
        """This thread's connection, after checking that the file is still there and writable."""
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
            connections, self._connections = self._connections, []
        for conn in connections:
            try:
                conn.close()
            except sqlite3.Error:
                pass
        self._local = threading.local()
        if self._epoch_map is not None:
            self._epoch_map.close()
            self._epoch_map = None

    # -- schema -----------------------------------------------------------------------------

    def migrate(self) -> int:
        """Create or upgrade the schema; returns the version. Idempotent."""
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, exist_ok=True)
        sqlite3.connect(self.path).close()  # creates the file on first use
        db = self._db()
        if db.conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            db.enable_wal()
        with self.transaction():
            version = db.conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise RuntimeError(
                    f"database schema version {version} is newer than this people-service "
                    f"({SCHEMA_VERSION})"
                )
            for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
                for statement in script.split(";"):
                    if statement.strip():
                        db.conn.execute(statement)
                db.conn.execute(f"PRAGMA user_version = {number}")
        self.credentials_epoch()  # made at start-up, not on a request (the disk may be full then)
        return SCHEMA_VERSION

    @_translated
    def is_empty(self) -> bool:
        """True when the database holds neither people nor API keys."""
        row = self._execute(
            "SELECT (SELECT count(*) FROM people) + (SELECT count(*) FROM api_keys) AS n"
        ).fetchone()
        return row["n"] == 0

    @_translated
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

    # -- people -----------------------------------------------------------------------------

    @_translated
    def count_people(self, name: str | None = None) -> int:
        if name is None:
            sql, params = "SELECT count(*) AS n FROM people", ()
        else:
            sql, params = (
                "SELECT count(*) AS n FROM people WHERE instr(name_key, ?) > 0",
                (fold(name),),
            )
        return self._execute(sql, params).fetchone()["n"]

    @_translated
    def list_people(self, name: str | None, limit: int, offset: int) -> list[dict]:
        """People with `name` in their name (any case), ordered by id: id and name only."""
        if name is None:
            sql = "SELECT id, name FROM people ORDER BY id LIMIT ? OFFSET ?"
            params = (limit, offset)
        else:
            sql = (
                "SELECT id, name FROM people WHERE instr(name_key, ?) > 0 "
                "ORDER BY id LIMIT ? OFFSET ?"
            )
            params = (fold(name), limit, offset)
        return self._execute(sql, params).fetchall()

    @_translated
    def list_people_details(self, name: str | None, limit: int, offset: int) -> list[dict]:
        """As list_people, with every column of the details."""
        where = "" if name is None else "WHERE instr(name_key, ?) > 0 "
        params = () if name is None else (fold(name),)
        sql = f"SELECT {PERSON_COLUMNS} FROM people {where}ORDER BY id LIMIT ? OFFSET ?"
        return self._execute(sql, (*params, limit, offset)).fetchall()

    @_translated
    def get_person(self, person_id: int) -> dict | None:
        sql = f"SELECT {PERSON_COLUMNS} FROM people WHERE id = ?"
        return self._execute(sql, (person_id,)).fetchone()

    @_translated
    def get_people(self, person_ids: list[int]) -> list[dict]:
        """The people with these ids, in one statement (unknown ids are left out)."""
        if not person_ids:
            return []
        sql = f"SELECT {PERSON_COLUMNS} FROM people WHERE id IN (SELECT value FROM json_each(?))"
        return self._execute(sql, (json.dumps(person_ids),)).fetchall()

    @_translated
    def find_person(self, name: str) -> dict | None:
        """The person whose name equals `name` ignoring case, lowest id first."""
        sql = f"SELECT {PERSON_COLUMNS} FROM people WHERE name_key = ? ORDER BY id LIMIT 1"
        return self._execute(sql, (fold(name),)).fetchone()

    @_translated
    def insert_person(self, person: dict) -> int:
        """Insert a person (columns as in get_person, without id); returns the new id."""
        now = now_iso()
        cursor = self._execute(
            "INSERT INTO people (name, name_key, age, email, email_key, street, city, country,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                person["name"],
                fold(person["name"]),
                person["age"],
                person["email"],
                fold(person["email"]),
                person["street"],
                person["city"],
                person["country"],
                now,
                now,
            ),
        )
        return cursor.lastrowid

    @_translated
    def update_person(self, person_id: int, person: dict) -> None:
        """Replace every column of a person."""
        cursor = self._execute(
            "UPDATE people SET name = ?, name_key = ?, age = ?, email = ?, email_key = ?,"
            " street = ?, city = ?, country = ?, updated_at = ? WHERE id = ?",
            (
                person["name"],
                fold(person["name"]),
                person["age"],
                person["email"],
                fold(person["email"]),
                person["street"],
                person["city"],
                person["country"],
                now_iso(),
                person_id,
            ),
        )
        if cursor.rowcount == 0:
            raise NotFound(f"No person with id '{person_id}'.")

    @_translated
    def delete_person(self, person_id: int) -> bool:
        """Delete a person; friendships and messages go with it (ON DELETE CASCADE)."""
        return self._execute("DELETE FROM people WHERE id = ?", (person_id,)).rowcount > 0

    # -- friendships ----------------------------------------------------------------------

    @_translated
    def add_friendship(self, person_id: int, friend_id: int) -> None:
        """Make two people friends both ways; already being friends is fine."""
        self._execute(
            "INSERT OR IGNORE INTO friendships (person_id, friend_id) VALUES (?, ?), (?, ?)",
            (person_id, friend_id, friend_id, person_id),
        )

    @_translated
    def remove_friendship(self, person_id: int, friend_id: int) -> None:
        self._execute(
            "DELETE FROM friendships WHERE (person_id = ? AND friend_id = ?)"
            " OR (person_id = ? AND friend_id = ?)",
            (person_id, friend_id, friend_id, person_id),
        )

    @_translated
    def friends_of(self, person_ids: list[int], limit: int) -> dict[int, list[dict]]:
        """The first `limit` friends (by id) of each person, in one statement."""
        result: dict[int, list[dict]] = {person_id: [] for person_id in person_ids}
        if not person_ids or limit <= 0:
            return result
        rows = self._execute(
            f"SELECT owner, {PERSON_COLUMNS} FROM ("
            f" SELECT f.person_id AS owner, p.*, ROW_NUMBER() OVER"
            f" (PARTITION BY f.person_id ORDER BY f.friend_id) AS n"
            f" FROM friendships f JOIN people p ON p.id = f.friend_id"
            f" WHERE f.person_id IN (SELECT value FROM json_each(?))"
            f") WHERE n <= ? ORDER BY owner, id",
            (json.dumps(person_ids), limit),
        )
        for row in rows:
            result[row.pop("owner")].append(row)
        return result

    # -- messages ---------------------------------------------------------------------------

    @_translated
    def insert_message(self, message: dict) -> dict:
        """Store a message (person_id, sender_id, sender, content); returns it with id.

        One statement, so it needs no transaction of its own; an unknown person is NotFound
        (the foreign key refuses it).
        """
        if not getattr(self._local, "depth", 0):
            self._writable()
        row = dict(message, created_at=now_iso())
        try:
            cursor = self._execute(
                "INSERT INTO messages (person_id, sender_id, sender, content, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    row["person_id"],
                    row["sender_id"],
                    row["sender"],
                    row["content"],
                    row["created_at"],
                ),
            )
        except sqlite3.IntegrityError:
            raise NotFound(f"No person with id '{row['person_id']}'.") from None
        row["id"] = cursor.lastrowid
        del row["sender_id"]
        return row

    @_translated
    def get_message(self, message_id: int, sender_id: str | None) -> dict | None:
        """A message, if `sender_id` sent it (None: whoever did)."""
        sql = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?"
        params: tuple = (message_id,)
        if sender_id is not None:
            sql += " AND sender_id = ?"
            params += (sender_id,)
        return self._execute(sql, params).fetchone()

    @_translated
    def list_messages(
        self, person_id: int, sender_id: str | None, limit: int, offset: int
    ) -> list[dict]:
        """Messages to a person (from `sender_id` unless None), newest first."""
        sql = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE person_id = ?"
        params: tuple = (person_id,)
        if sender_id is not None:
            sql += " AND sender_id = ?"
            params += (sender_id,)
        sql += " ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?"
        return self._execute(sql, (*params, limit, offset)).fetchall()

    @_translated
    def messages_of(
        self, person_ids: list[int], sender_id: str | None, limit: int
    ) -> dict[int, list[dict]]:
        """The newest `limit` messages to each person (from `sender_id` unless None)."""
        result: dict[int, list[dict]] = {person_id: [] for person_id in person_ids}
        if not person_ids or limit <= 0:
            return result
        sender_filter = "" if sender_id is None else " AND sender_id = ?"
        params: tuple = (json.dumps(person_ids),)
        if sender_id is not None:
            params += (sender_id,)
        rows = self._execute(
            f"SELECT {MESSAGE_COLUMNS} FROM ("
            f" SELECT *, ROW_NUMBER() OVER"
            f" (PARTITION BY person_id ORDER BY created_at DESC, id DESC) AS n"
            f" FROM messages WHERE person_id IN (SELECT value FROM json_each(?)){sender_filter}"
            f") WHERE n <= ? ORDER BY person_id, n",
            (*params, limit),
        )
        for row in rows:
            result[row["person_id"]].append(row)
        return result

    # -- API keys and users -----------------------------------------------------------------

    @_translated
    def insert_key(self, key: dict) -> int:
        """Store a key (name, prefix, key_hash, scopes, rate_limit); a taken name is Conflict."""
        try:
            cursor = self._execute(
                "INSERT INTO api_keys (name, prefix, key_hash, scopes, rate_limit, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    key["name"],
                    key["prefix"],
                    key["key_hash"],
                    key["scopes"],
                    key.get("rate_limit"),
                    now_iso(),
                ),
            )
        except sqlite3.IntegrityError:
            raise Conflict(f"An API key named '{key['name']}' already exists.") from None
        return cursor.lastrowid

    @_translated
    def key_by_hash(self, key_hash: str) -> dict | None:
        """The unrevoked key with this hash, with its hash for a constant-time comparison."""
        return self._execute(
            f"SELECT {KEY_COLUMNS}, key_hash FROM api_keys"
            " WHERE key_hash = ? AND revoked_at IS NULL",
            (key_hash,),
        ).fetchone()

    @_translated
    def key_is_active(self, key_id: int) -> bool:
        row = self._execute(
            "SELECT 1 AS ok FROM api_keys WHERE id = ? AND revoked_at IS NULL", (key_id,)
        ).fetchone()
        return row is not None

    @_translated
    def list_keys(self) -> list[dict]:
        return self._execute(f"SELECT {KEY_COLUMNS} FROM api_keys ORDER BY id").fetchall()

    @_translated
    def revoke_key(self, name: str) -> bool:
        """Revoke a key; servers on this database notice at their next request."""
        cursor = self._execute(
            "UPDATE api_keys SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL",
            (now_iso(), name),
        )
        if cursor.rowcount:
            self._bump_credentials_epoch()
        return cursor.rowcount > 0

    # -- the credentials epoch ------------------------------------------------------------------
    # Servers cache the callers of valid keys and tokens. A revocation, often made by the CLI in
    # another process, rewrites the 8 bytes of <database>.epoch; each server maps that file into
    # memory and compares the bytes on every request: immediate, and without a system call.

    @property
    def _epoch_path(self) -> str:
        return os.path.abspath(self.path) + ".epoch"

    def credentials_epoch(self) -> bytes | None:
        """Bytes that change whenever a credential is revoked; None if they cannot be read
        (then nothing may be cached)."""
        mapping = self._epoch_map
        if mapping is None:
            try:
                with self._lock:
                    fd = os.open(self._epoch_path, os.O_RDWR | os.O_CREAT, 0o600)
                    try:
                        if os.fstat(fd).st_size < 8:
                            os.pwrite(fd, os.urandom(8), 0)
                        mapping = self._epoch_map = mmap.mmap(fd, 8, access=mmap.ACCESS_READ)
                    finally:
                        os.close(fd)
            except (OSError, ValueError):
                return None
        return mapping[:8]

    def _bump_credentials_epoch(self) -> None:
        fd = os.open(self._epoch_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            os.pwrite(fd, os.urandom(8), 0)
        finally:
            os.close(fd)

    @_translated
    def usage(self, kind: str, ident: int) -> dict | None:
        """Stored request count and last use of a key or user."""
        table = "api_keys" if kind == "api_key" else "users"
        return self._execute(
            f"SELECT request_count, last_used FROM {table} WHERE id = ?", (ident,)
        ).fetchone()

    @_translated
    def add_usage(self, counts: dict[tuple[str, int], tuple[int, str]]) -> None:
        """Add request counts and move last-used times forward, for keys and users at once."""
        with self.transaction():
            for (kind, ident), (count, last_used) in counts.items():
                table = "api_keys" if kind == "api_key" else "users"
                self._execute(
                    f"UPDATE {table} SET request_count = request_count + ?,"
                    " last_used = max(coalesce(last_used, ''), ?) WHERE id = ?",
                    (count, last_used, ident),
                )

    @_translated
    def insert_user(self, user: dict) -> int:
        """Store a login (username, password_hash, scopes); a taken name is Conflict."""
        try:
            cursor = self._execute(
                "INSERT INTO users (username, password_hash, scopes, rate_limit, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    user["username"],
                    user["password_hash"],
                    user["scopes"],
                    user.get("rate_limit"),
                    now_iso(),
                ),
            )
        except sqlite3.IntegrityError:
            raise Conflict(f"A user named '{user['username']}' already exists.") from None
        return cursor.lastrowid

    @_translated
    def user_by_name(self, username: str) -> dict | None:
        return self._execute(
            "SELECT id, username, password_hash, scopes, rate_limit FROM users WHERE username = ?",
            (username,),
        ).fetchone()

    # -- idempotency records ----------------------------------------------------------------

    @_translated
    def get_idempotent(self, caller: str, key: str, since: float) -> dict | None:
        """The stored answer for a caller's Idempotency-Key, if it is newer than `since`."""
        return self._execute(
            "SELECT fingerprint, status, body FROM idempotency"
            " WHERE caller = ? AND key = ? AND created_at >= ?",
            (caller, key, since),
        ).fetchone()

    @_translated
    def put_idempotent(self, record: dict, prune_before: float) -> None:
        """Store an answer (caller, key, fingerprint, status, body, created_at)."""
        self._execute("DELETE FROM idempotency WHERE created_at < ?", (prune_before,))
        self._execute(
            "INSERT OR REPLACE INTO idempotency"
            " (caller, key, fingerprint, status, body, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (
                record["caller"],
                record["key"],
                record["fingerprint"],
                record["status"],
                record["body"],
                record["created_at"],
            ),
        )

    # -- bulk import and export -------------------------------------------------------------

    @_translated
    def import_people(self, people: list[dict], friendships: list[tuple[int, int]]) -> None:
        """Insert people with their ids and friendships, in the caller's transaction."""
        now = now_iso()
        taken = self._execute(
            "SELECT id FROM people WHERE id IN (SELECT value FROM json_each(?)) LIMIT 1",
            (json.dumps([person["id"] for person in people]),),
        ).fetchone()
        if taken:
            raise Conflict(f"A person with id '{taken['id']}' already exists.")
        rows = [
            dict(
                person,
                name_key=fold(person["name"]),
                email_key=fold(person["email"]),
                created_at=now,
                updated_at=now,
            )
            for person in people
        ]
        db = self._db()
        try:
            db["people"].insert_all(rows, batch_size=500)
        except sqlite3.IntegrityError as error:
            if "email_key" in str(error):
                raise Conflict("Two people share an email (or one already exists).") from None
            raise
        pairs = {pair for a, b in friendships for pair in ((a, b), (b, a))}
        db["friendships"].insert_all(
            ({"person_id": a, "friend_id": b} for a, b in sorted(pairs)),
            batch_size=1000,
            ignore=True,
        )

    @_translated
    def export_people(self) -> tuple[list[dict], list[tuple[int, int]]]:
        """Every person (all columns of the details) and every friendship pair once."""
        people = self._execute(f"SELECT {PERSON_COLUMNS} FROM people ORDER BY id").fetchall()
        pairs = self._execute(
            "SELECT person_id, friend_id FROM friendships WHERE person_id < friend_id"
            " ORDER BY person_id, friend_id"
        ).fetchall()
        return people, [(row["person_id"], row["friend_id"]) for row in pairs]
