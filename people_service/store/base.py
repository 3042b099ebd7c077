"""The store's one interface: its SQL (people's in a mixin) and the migrations of both backends."""

from contextlib import contextmanager, suppress

from ..errors import Conflict, ServiceError
from .events import EventStore
from .people import PeopleStore, insert, now_iso
from .webhooks import SCHEMA as WEBHOOKS_SCHEMA
from .webhooks import WebhookStore

READ_ONLY = "The database is read-only; nothing was written."
USER_COLUMNS = "id, username, scopes, rate_limit, created_at, last_used, request_count, disabled_at"
KEY_COLUMNS = "id, name, prefix, scopes, rate_limit, created_at, last_used, request_count"
KINDS = {"api_key": "api_keys", "user": "users"}

# Migration n takes a database from version n - 1 to n in one transaction; the names in braces
# are each backend's spelling (its DIALECT). No statement holds a `;`.
MIGRATIONS = [
    """
    CREATE TABLE people (id {identity}, name TEXT NOT NULL, name_key TEXT NOT NULL, age INTEGER,
        email TEXT, email_key TEXT UNIQUE, street TEXT, city TEXT, country TEXT,
        created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
    CREATE INDEX people_name_key ON people (name_key);
    CREATE TABLE friendships (
        person_id {reference} NOT NULL REFERENCES people (id) ON DELETE CASCADE,
        friend_id {reference} NOT NULL REFERENCES people (id) ON DELETE CASCADE,
        PRIMARY KEY (person_id, friend_id)){without_rowid};
    CREATE INDEX friendships_friend ON friendships (friend_id);
    CREATE TABLE messages (id {identity},
        person_id {reference} NOT NULL REFERENCES people (id) ON DELETE CASCADE,
        sender_id TEXT NOT NULL, sender TEXT NOT NULL, content TEXT NOT NULL,
        created_at TEXT NOT NULL);
    CREATE INDEX messages_person ON messages (person_id, sender_id, created_at);
    CREATE TABLE api_keys (id {identity}, name TEXT NOT NULL UNIQUE, prefix TEXT NOT NULL,
        key_hash TEXT NOT NULL UNIQUE, scopes TEXT NOT NULL, rate_limit TEXT,
        created_at TEXT NOT NULL, last_used TEXT, request_count {counter} NOT NULL DEFAULT 0,
        revoked_at TEXT);
    CREATE TABLE users (id {identity}, username TEXT NOT NULL UNIQUE, password_hash TEXT NOT NULL,
        scopes TEXT NOT NULL, rate_limit TEXT, created_at TEXT NOT NULL, last_used TEXT,
        request_count {counter} NOT NULL DEFAULT 0);
    CREATE TABLE idempotency (caller TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,
        status INTEGER NOT NULL, body TEXT NOT NULL, created_at {real} NOT NULL,
        PRIMARY KEY (caller, key));
    CREATE INDEX idempotency_created ON idempotency (created_at);
    CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)
    """,
    """
    ALTER TABLE users ADD COLUMN disabled_at TEXT;
    ALTER TABLE users ADD COLUMN token_generation {counter} NOT NULL DEFAULT 0
    """,
    # id ends each index: the people lists' tie-break
    """
    ALTER TABLE people ADD COLUMN city_key TEXT;
    ALTER TABLE people ADD COLUMN country_key TEXT;
    CREATE INDEX people_city_key ON people (city_key, id);
    CREATE INDEX people_country_key ON people (country_key, id);
    CREATE INDEX people_age ON people (age, id){v3_orders}
    """,
    """CREATE TABLE persisted_queries (
        hash TEXT PRIMARY KEY, document TEXT NOT NULL, created_at TEXT NOT NULL)""",
    """
    CREATE TABLE events (id {identity}, type TEXT NOT NULL, data TEXT NOT NULL, sender_id TEXT,
        created_at TEXT NOT NULL);
    CREATE INDEX events_created ON events (created_at)
    """,
    """
    ALTER TABLE persisted_queries ADD COLUMN owner TEXT NOT NULL DEFAULT '';
    ALTER TABLE persisted_queries ADD COLUMN used_at TEXT NOT NULL DEFAULT '';
    UPDATE persisted_queries SET used_at = created_at;
    CREATE INDEX persisted_queries_used ON persisted_queries (used_at);
    CREATE INDEX persisted_queries_owner ON persisted_queries (owner, used_at)
    """,
    WEBHOOKS_SCHEMA,
]
SCHEMA_VERSION = len(MIGRATIONS)
FOLD_PLACES_AT = 3  # the migration after which existing rows get their folded places


class Rows(list):
    """A statement's rows as dicts, read in full, with its rowcount."""

    def __init__(self, rows: list[dict], rowcount: int):
        super().__init__(rows)
        self.rowcount = rowcount

    def fetchone(self) -> dict | None:
        return self[0] if self else None

    def fetchall(self) -> list[dict]:
        return self


class Store(PeopleStore, EventStore, WebhookStore):
    """The SQL of both backends (`?` placeholders); a backend adds its connections."""

    GREATEST = "max"  # the two-argument maximum
    FOR_UPDATE = ""  # locks the rows a SELECT reads until the transaction ends
    DIALECT: dict[str, str] = {}
    DRIVER_ERROR: type[Exception] = Exception
    UNAVAILABLE = "unavailable"  # what check() says when the database does not answer
    WRITE = READ = ""  # what begins a write transaction, and a snapshot
    SCHEMA_LOCK: tuple[str, ...] = ()  # what a migration runs first
    VERSION, SET_VERSION = "PRAGMA user_version", "PRAGMA user_version = {}"

    def transaction(self):
        """One write transaction; nested uses join the outer one."""
        return self._transaction(self.WRITE)

    def snapshot(self):
        """Reads that see one state of the database (nested in a transaction: that one's)."""
        return self._transaction(self.READ)

    def _sql(self, sql: str) -> str:
        return sql

    @contextmanager
    def _translated(self):
        try:
            yield
        except self.DRIVER_ERROR as error:
            raise self.translate(error) from error

    def _execute(self, sql: str, params=()) -> Rows:
        with self._translated(), self._connection() as conn:
            cursor = conn.execute(self._sql(sql), params)
            if cursor.description is None:  # no rows to read (psycopg would refuse)
                return Rows([], cursor.rowcount)
            names = [column[0] for column in cursor.description]
            return Rows([dict(zip(names, row, strict=True)) for row in cursor], cursor.rowcount)

    def _changed(self, sql: str, params=()) -> bool:
        return self._execute(sql, params).rowcount > 0

    def _insert(self, sql: str, params=()) -> int:
        return self._execute(sql + " RETURNING id", params)[0]["id"]

    def _executemany(self, sql: str, rows) -> None:
        with self._translated(), self._connection() as conn:
            conn.cursor().executemany(self._sql(sql), list(rows))

    def _writable(self) -> None:
        """Raise a domain error when nothing can be written now."""

    def upgrade_schema(self) -> int:
        """Create or upgrade the schema (writing only to an older one); returns the version."""
        with suppress(ServiceError):  # no schema yet (PostgreSQL): made below
            if self._execute(self.VERSION)[0]["user_version"] == SCHEMA_VERSION:
                return SCHEMA_VERSION
        with self.transaction():
            for statement in self.SCHEMA_LOCK:
                self._execute(statement)
            version = self._execute(self.VERSION)[0]["user_version"]
            if version > SCHEMA_VERSION:
                raise RuntimeError(
                    f"database schema version {version} is newer than this people-service "
                    f"({SCHEMA_VERSION})"
                )
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[number - 1].format(**self.DIALECT).split(";"):
                    self._execute(statement)
                if number == FOLD_PLACES_AT:
                    self._fold_places()
                self._execute(self.SET_VERSION.format(number))
        return SCHEMA_VERSION

    def check(self) -> str:
        """'ok', or what is wrong with the database."""
        try:
            self._execute("SELECT 1 FROM people LIMIT 1")
        except ServiceError:
            return self.UNAVAILABLE
        return "ok"

    def _insert_named(self, table: str, row: dict, columns: tuple, taken: str) -> int:
        values = (*(row[column] for column in columns), row.get("rate_limit"), now_iso())
        try:
            return self._insert(insert(table, [*columns, "rate_limit", "created_at"]), values)
        except Conflict:
            raise Conflict(taken) from None

    def insert_key(self, key: dict) -> int:
        """Store a key (name, prefix, key_hash, scopes, rate_limit); a taken name is Conflict."""
        taken = f"An API key named '{key['name']}' already exists."
        return self._insert_named("api_keys", key, ("name", "prefix", "key_hash", "scopes"), taken)

    def insert_user(self, user: dict) -> int:
        """Store a login (username, password_hash, scopes); a taken name is Conflict."""
        taken = f"A user named '{user['username']}' already exists."
        return self._insert_named("users", user, ("username", "password_hash", "scopes"), taken)

    def key_by_hash(self, key_hash: str) -> dict | None:
        """The unrevoked key with this hash, with its hash for a constant-time comparison."""
        sql = f"SELECT {KEY_COLUMNS}, revoked_at, key_hash FROM api_keys WHERE key_hash = ?"
        return self._execute(sql + " AND revoked_at IS NULL", (key_hash,)).fetchone()

    def user_by_name(self, username: str) -> dict | None:
        sql = f"SELECT {USER_COLUMNS}, password_hash, token_generation FROM users"
        return self._execute(sql + " WHERE username = ?", (username,)).fetchone()

    def list_keys(self) -> list[dict]:
        return self._execute(f"SELECT {KEY_COLUMNS}, revoked_at FROM api_keys ORDER BY id")

    def list_users(self) -> list[dict]:
        return self._execute(f"SELECT {USER_COLUMNS} FROM users ORDER BY id")

    def revoke_key(self, name: str) -> bool:
        sql = "UPDATE api_keys SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL"
        return self._changed(sql, (now_iso(), name))

    def rotate_key(self, name: str, prefix: str, key_hash: str) -> bool:
        """Give an active key a new secret; its name, scopes, limit and usage stay."""
        sql = "UPDATE api_keys SET prefix = ?, key_hash = ? WHERE name = ? AND revoked_at IS NULL"
        return self._changed(sql, (prefix, key_hash, name))

    def delete_key(self, name: str) -> bool:
        return self._changed("DELETE FROM api_keys WHERE name = ?", (name,))

    def delete_user(self, username: str) -> bool:
        return self._changed("DELETE FROM users WHERE username = ?", (username,))

    def usage(self, kind: str, ident: int) -> dict | None:
        """Stored request count and last use of a key or user."""
        sql = f"SELECT request_count, last_used FROM {KINDS[kind]} WHERE id = ?"
        return self._execute(sql, (ident,)).fetchone()

    def add_usage(self, counts: dict[tuple[str, int], tuple[int, str]]) -> None:
        """Add request counts and move last-used times forward, for keys and users at once."""
        with self.transaction():  # in one order, so that two flushes never deadlock
            for (kind, ident), (count, last_used) in sorted(counts.items()):
                self._execute(
                    f"UPDATE {KINDS[kind]} SET request_count = request_count + ?,"
                    f" last_used = {self.GREATEST}(coalesce(last_used, ''), ?) WHERE id = ?",
                    (count, last_used, ident),
                )

    def set_password(self, username: str, password_hash: str) -> bool:
        """A new password; tokens issued before it stop working."""
        sql = "UPDATE users SET password_hash = ?, token_generation = token_generation + 1"
        return self._changed(sql + " WHERE username = ?", (password_hash, username))

    def set_disabled(self, username: str, disabled: bool) -> bool:
        """Disable a user (no logins; its tokens stop working at once) or enable it again."""
        if not disabled:
            sql = "UPDATE users SET disabled_at = NULL WHERE username = ?"
            return self._changed(sql + " AND disabled_at IS NOT NULL", (username,))
        sql = "UPDATE users SET disabled_at = ?, token_generation = token_generation + 1"
        return self._changed(
            sql + " WHERE username = ? AND disabled_at IS NULL", (now_iso(), username)
        )

    def claim_idempotent(self, caller: str, key: str, fingerprint: str, now: float, ttl: float):
        """None if this claims a caller's key (a rival waits for this transaction), else the
        record there is; records older than `ttl` go."""
        self._execute("DELETE FROM idempotency WHERE created_at < ?", (now - ttl,))
        sql = "INSERT INTO idempotency VALUES (?, ?, ?, 0, '', ?) ON CONFLICT DO NOTHING"
        if self._changed(sql, (caller, key, fingerprint, now)):
            return None
        sql = "SELECT fingerprint, status, body FROM idempotency WHERE caller = ? AND key = ?"
        return self._execute(sql, (caller, key)).fetchone()

    def put_idempotent(self, caller: str, key: str, status: int, body: str) -> None:
        sql = "UPDATE idempotency SET status = ?, body = ? WHERE caller = ? AND key = ?"
        self._execute(sql, (status, body, caller, key))

    def get_persisted(self, digest: str) -> str | None:
        """The document stored under a hex SHA-256, if any."""
        rows = self._execute("SELECT document FROM persisted_queries WHERE hash = ?", (digest,))
        return rows[0]["document"] if rows else None

    def put_persisted(self, digest, document, owner="", keep=1000, per_owner=100) -> None:
        """Store a document under its SHA-256 for `owner` (once); past `per_owner` documents of
        its owner or `keep` in all, the least recently used go."""
        if self.get_persisted(digest) is not None:
            return
        oldest = (
            "DELETE FROM persisted_queries WHERE {0} hash NOT IN (SELECT hash FROM"
            " persisted_queries WHERE {0} TRUE ORDER BY used_at DESC, hash DESC LIMIT ?)"
        )
        with self.transaction():
            now = now_iso()
            sql = "INSERT INTO persisted_queries (hash, document, created_at, owner, used_at)"
            sql += " VALUES (?, ?, ?, ?, ?) ON CONFLICT (hash) DO NOTHING"
            self._execute(sql, (digest, document, now, owner, now))
            self._execute(oldest.format("owner = ? AND"), (owner, owner, per_owner))
            self._execute(oldest.format(""), (keep,))
