"""The SQL both stores share, written once; each backend supplies connections and dialect."""

from __future__ import annotations

import functools
import time
from datetime import UTC, datetime

from ..errors import Conflict, NotFound, ServiceError

PERSON_COLUMNS = "id, name, age, email, street, city, country"
MESSAGE_COLUMNS = "id, person_id, sender, content, created_at"
KEY_COLUMNS = (
    "id, name, prefix, scopes, rate_limit, created_at, last_used, request_count, revoked_at"
)
# Every column of the tables a migration between backends copies, in an order that keeps
# foreign keys satisfied.
TABLES = {
    "people": "id, name, name_key, age, email, email_key, street, city, country, created_at,"
    " updated_at",
    "friendships": "person_id, friend_id",
    "messages": "id, person_id, sender_id, sender, content, created_at",
    "api_keys": "id, name, prefix, key_hash, scopes, rate_limit, created_at, last_used,"
    " request_count, revoked_at",
    "users": "id, username, password_hash, scopes, rate_limit, created_at, last_used,"
    " request_count",
}

# The first schema, for both backends; the names in braces are the types each spells its way.
SCHEMA_V1 = """
    CREATE TABLE people (
        id {identity},
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
        person_id {reference} NOT NULL REFERENCES people (id) ON DELETE CASCADE,
        friend_id {reference} NOT NULL REFERENCES people (id) ON DELETE CASCADE,
        PRIMARY KEY (person_id, friend_id)
    ){without_rowid};
    CREATE INDEX friendships_friend ON friendships (friend_id);
    CREATE TABLE messages (
        id {identity},
        person_id {reference} NOT NULL REFERENCES people (id) ON DELETE CASCADE,
        sender_id TEXT NOT NULL,
        sender TEXT NOT NULL,
        content TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX messages_person ON messages (person_id, sender_id, created_at);
    CREATE TABLE api_keys (
        id {identity},
        name TEXT NOT NULL UNIQUE,
        prefix TEXT NOT NULL,
        key_hash TEXT NOT NULL UNIQUE,
        scopes TEXT NOT NULL,
        rate_limit TEXT,
        created_at TEXT NOT NULL,
        last_used TEXT,
        request_count {counter} NOT NULL DEFAULT 0,
        revoked_at TEXT
    );
    CREATE TABLE users (
        id {identity},
        username TEXT NOT NULL UNIQUE,
        password_hash TEXT NOT NULL,
        scopes TEXT NOT NULL,
        rate_limit TEXT,
        created_at TEXT NOT NULL,
        last_used TEXT,
        request_count {counter} NOT NULL DEFAULT 0
    );
    CREATE TABLE idempotency (
        caller TEXT NOT NULL,
        key TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        status INTEGER NOT NULL,
        body TEXT NOT NULL,
        created_at {real} NOT NULL,
        PRIMARY KEY (caller, key)
    );
    CREATE INDEX idempotency_created ON idempotency (created_at)
"""


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


def contains(text: str) -> str:
    """A LIKE pattern (ESCAPE '\\') for `text` anywhere: % and _ are plain characters here."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def translated(method):
    """Turn the driver's failures into the domain errors clients can understand."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except self.driver_error as error:
            raise self.translate(error) from error

    return wrapper


class Store:
    """People, friendships, messages, credentials and idempotency records in a SQL database.

    Subclasses provide `_execute` (rows as dicts, `?` placeholders), `_insert` (returns the
    new id), `_executemany`, `transaction`, `translate` and the dialect bits below. Write
    transactions are serialized, as SQLite's BEGIN IMMEDIATE does, so a check and the write it
    guards (If-Match, Idempotency-Key) can never interleave with another writer.
    """

    driver_error: type[Exception] = Exception
    integrity_error: type[Exception] = Exception
    GREATEST = "max"  # the two-argument maximum

    def _in_ids(self, column: str) -> str:
        """`column` is one of a list of ids given as a single parameter."""
        raise NotImplementedError

    def _ids(self, ids: list[int]):
        raise NotImplementedError

    def _writable(self) -> None:
        """Raise a domain error when nothing can be written now."""

    def translate(self, error: Exception) -> ServiceError:
        raise NotImplementedError

    def _upgrade(self, migrations: list[str], version: int, record) -> None:
        """Run the migrations after `version` (in the caller's transaction), `record(n)` each."""
        if version > len(migrations):
            raise RuntimeError(
                f"database schema version {version} is newer than this people-service "
                f"({len(migrations)})"
            )
        for number, script in enumerate(migrations[version:], start=version + 1):
            for statement in script.split(";"):
                if statement.strip():
                    self._execute(statement)
            record(number)

    # -- people -----------------------------------------------------------------------------

    @translated
    def is_empty(self) -> bool:
        """True when the database holds neither people nor API keys."""
        row = self._execute(
            "SELECT (SELECT count(*) FROM people) + (SELECT count(*) FROM api_keys) AS n"
        ).fetchone()
        return row["n"] == 0

    @translated
    def count_people(self, name: str | None = None) -> int:
        if name is None:
            return self._execute("SELECT count(*) AS n FROM people").fetchone()["n"]
        sql = "SELECT count(*) AS n FROM people WHERE name_key LIKE ? ESCAPE '\\'"
        return self._execute(sql, (contains(fold(name)),)).fetchone()["n"]

    @translated
    def list_people(self, name: str | None, limit: int, offset: int) -> list[dict]:
        """People with `name` in their name (any case), ordered by id: id and name only."""
        return self._people("id, name", name, limit, offset)

    @translated
    def list_people_details(self, name: str | None, limit: int, offset: int) -> list[dict]:
        """As list_people, with every column of the details."""
        return self._people(PERSON_COLUMNS, name, limit, offset)

    def _people(self, columns: str, name: str | None, limit: int, offset: int) -> list[dict]:
        if name is None:
            sql = f"SELECT {columns} FROM people ORDER BY id LIMIT ? OFFSET ?"
            return self._execute(sql, (limit, offset)).fetchall()
        sql = (
            f"SELECT {columns} FROM people WHERE name_key LIKE ? ESCAPE '\\'"
            " ORDER BY id LIMIT ? OFFSET ?"
        )
        return self._execute(sql, (contains(fold(name)), limit, offset)).fetchall()

    @translated
    def get_person(self, person_id: int) -> dict | None:
        sql = f"SELECT {PERSON_COLUMNS} FROM people WHERE id = ?"
        return self._execute(sql, (person_id,)).fetchone()

    @translated
    def get_people(self, person_ids: list[int]) -> list[dict]:
        """The people with these ids, in one statement (unknown ids are left out)."""
        if not person_ids:
            return []
        sql = f"SELECT {PERSON_COLUMNS} FROM people WHERE {self._in_ids('id')}"
        return self._execute(sql, (self._ids(person_ids),)).fetchall()

    @translated
    def find_person(self, name: str) -> dict | None:
        """The person whose name equals `name` ignoring case, lowest id first."""
        sql = f"SELECT {PERSON_COLUMNS} FROM people WHERE name_key = ? ORDER BY id LIMIT 1"
        return self._execute(sql, (fold(name),)).fetchone()

    @staticmethod
    def _person_values(person: dict) -> tuple:
        return (
            person["name"],
            fold(person["name"]),
            person["age"],
            person["email"],
            fold(person["email"]),
            person["street"],
            person["city"],
            person["country"],
        )

    @translated
    def insert_person(self, person: dict) -> int:
        """Insert a person (columns as in get_person, without id); returns the new id."""
        now = now_iso()
        return self._insert(
            "INSERT INTO people (name, name_key, age, email, email_key, street, city, country,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*self._person_values(person), now, now),
        )

    @translated
    def update_person(self, person_id: int, person: dict) -> None:
        """Replace every column of a person."""
        cursor = self._execute(
            "UPDATE people SET name = ?, name_key = ?, age = ?, email = ?, email_key = ?,"
            " street = ?, city = ?, country = ?, updated_at = ? WHERE id = ?",
            (*self._person_values(person), now_iso(), person_id),
        )
        if cursor.rowcount == 0:
            raise NotFound(f"No person with id '{person_id}'.")

    @translated
    def delete_person(self, person_id: int) -> bool:
        """Delete a person; friendships and messages go with it (ON DELETE CASCADE)."""
        return self._execute("DELETE FROM people WHERE id = ?", (person_id,)).rowcount > 0

    # -- friendships ----------------------------------------------------------------------

    @translated
    def add_friendship(self, person_id: int, friend_id: int) -> None:
        """Make two people friends both ways; already being friends is fine."""
        self._execute(
            "INSERT INTO friendships (person_id, friend_id) VALUES (?, ?), (?, ?)"
            " ON CONFLICT DO NOTHING",
            (person_id, friend_id, friend_id, person_id),
        )

    @translated
    def remove_friendship(self, person_id: int, friend_id: int) -> None:
        self._execute(
            "DELETE FROM friendships WHERE (person_id = ? AND friend_id = ?)"
            " OR (person_id = ? AND friend_id = ?)",
            (person_id, friend_id, friend_id, person_id),
        )

    @translated
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
            f" WHERE {self._in_ids('f.person_id')}"
            f") AS ranked WHERE n <= ? ORDER BY owner, id",
            (self._ids(person_ids), limit),
        )
        for row in rows:
            result[row.pop("owner")].append(row)
        return result

    # -- messages ---------------------------------------------------------------------------

    @translated
    def insert_message(self, message: dict) -> dict:
        """Store a message (person_id, sender_id, sender, content); returns it with id.

        One statement, so it needs no transaction of its own; an unknown person is NotFound
        (the foreign key refuses it).
        """
        self._writable()
        row = dict(message, created_at=now_iso())
        try:
            row["id"] = self._insert(
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
        except self.integrity_error:
            raise NotFound(f"No person with id '{row['person_id']}'.") from None
        del row["sender_id"]
        return row

    @translated
    def get_message(self, message_id: int, sender_id: str | None) -> dict | None:
        """A message, if `sender_id` sent it (None: whoever did)."""
        sql = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?"
        params: tuple = (message_id,)
        if sender_id is not None:
            sql += " AND sender_id = ?"
            params += (sender_id,)
        return self._execute(sql, params).fetchone()

    @translated
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

    @translated
    def messages_of(
        self, person_ids: list[int], sender_id: str | None, limit: int
    ) -> dict[int, list[dict]]:
        """The newest `limit` messages to each person (from `sender_id` unless None)."""
        result: dict[int, list[dict]] = {person_id: [] for person_id in person_ids}
        if not person_ids or limit <= 0:
            return result
        sender_filter = "" if sender_id is None else " AND sender_id = ?"
        params: tuple = (self._ids(person_ids),)
        if sender_id is not None:
            params += (sender_id,)
        rows = self._execute(
            f"SELECT {MESSAGE_COLUMNS} FROM ("
            f" SELECT *, ROW_NUMBER() OVER"
            f" (PARTITION BY person_id ORDER BY created_at DESC, id DESC) AS n"
            f" FROM messages WHERE {self._in_ids('person_id')}{sender_filter}"
            f") AS ranked WHERE n <= ? ORDER BY person_id, n",
            (*params, limit),
        )
        for row in rows:
            result[row["person_id"]].append(row)
        return result

    # -- API keys and users -----------------------------------------------------------------

    @translated
    def insert_key(self, key: dict) -> int:
        """Store a key (name, prefix, key_hash, scopes, rate_limit); a taken name is Conflict."""
        try:
            return self._insert(
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
        except self.integrity_error:
            raise Conflict(f"An API key named '{key['name']}' already exists.") from None

    @translated
    def key_by_hash(self, key_hash: str) -> dict | None:
        """The unrevoked key with this hash, with its hash for a constant-time comparison."""
        return self._execute(
            f"SELECT {KEY_COLUMNS}, key_hash FROM api_keys"
            " WHERE key_hash = ? AND revoked_at IS NULL",
            (key_hash,),
        ).fetchone()

    @translated
    def list_keys(self) -> list[dict]:
        return self._execute(f"SELECT {KEY_COLUMNS} FROM api_keys ORDER BY id").fetchall()

    @translated
    def revoke_key(self, name: str) -> bool:
        """Revoke a key; servers on this database notice at their next request."""
        cursor = self._execute(
            "UPDATE api_keys SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL",
            (now_iso(), name),
        )
        if cursor.rowcount:
            self._credentials_changed()
        return cursor.rowcount > 0

    def _credentials_changed(self) -> None:
        """Tell every server that cached callers may be stale."""

    def credentials_epoch(self) -> bytes | None:
        """Bytes that change whenever a credential is revoked; None: nothing may be cached."""
        return None

    @translated
    def usage(self, kind: str, ident: int) -> dict | None:
        """Stored request count and last use of a key or user."""
        table = "api_keys" if kind == "api_key" else "users"
        return self._execute(
            f"SELECT request_count, last_used FROM {table} WHERE id = ?", (ident,)
        ).fetchone()

    @translated
    def add_usage(self, counts: dict[tuple[str, int], tuple[int, str]]) -> None:
        """Add request counts and move last-used times forward, for keys and users at once."""
        with self.transaction():
            for (kind, ident), (count, last_used) in counts.items():
                table = "api_keys" if kind == "api_key" else "users"
                self._execute(
                    f"UPDATE {table} SET request_count = request_count + ?,"
                    f" last_used = {self.GREATEST}(coalesce(last_used, ''), ?) WHERE id = ?",
                    (count, last_used, ident),
                )

    @translated
    def insert_user(self, user: dict) -> int:
        """Store a login (username, password_hash, scopes); a taken name is Conflict."""
        try:
            return self._insert(
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
        except self.integrity_error:
            raise Conflict(f"A user named '{user['username']}' already exists.") from None

    @translated
    def user_by_name(self, username: str) -> dict | None:
        return self._execute(
            "SELECT id, username, password_hash, scopes, rate_limit FROM users WHERE username = ?",
            (username,),
        ).fetchone()

    # -- idempotency records ----------------------------------------------------------------

    @translated
    def get_idempotent(self, caller: str, key: str, since: float) -> dict | None:
        """The stored answer for a caller's Idempotency-Key, if it is newer than `since`."""
        return self._execute(
            "SELECT fingerprint, status, body FROM idempotency"
            " WHERE caller = ? AND key = ? AND created_at >= ?",
            (caller, key, since),
        ).fetchone()

    @translated
    def put_idempotent(self, record: dict, prune_before: float) -> None:
        """Store an answer (caller, key, fingerprint, status, body, created_at)."""
        self._execute("DELETE FROM idempotency WHERE created_at < ?", (prune_before,))
        self._execute(
            "INSERT INTO idempotency (caller, key, fingerprint, status, body, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (caller, key) DO UPDATE SET"
            " fingerprint = excluded.fingerprint, status = excluded.status,"
            " body = excluded.body, created_at = excluded.created_at",
            (
                record["caller"],
                record["key"],
                record["fingerprint"],
                record["status"],
                record["body"],
                record["created_at"],
            ),
        )

    # -- bulk import, export and migration --------------------------------------------------

    @translated
    def import_people(self, people: list[dict], friendships: list[tuple[int, int]]) -> None:
        """Insert people with their ids and friendships, in the caller's transaction."""
        taken = self._execute(
            f"SELECT id FROM people WHERE {self._in_ids('id')} LIMIT 1",
            (self._ids([person["id"] for person in people]),),
        ).fetchone()
        if taken:
            raise Conflict(f"A person with id '{taken['id']}' already exists.")
        now = now_iso()
        try:
            self._executemany(
                f"INSERT INTO people ({TABLES['people']}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(person["id"], *self._person_values(person), now, now) for person in people],
            )
        except self.integrity_error:
            raise Conflict("Two people share an email (or one already exists).") from None
        pairs = {pair for a, b in friendships for pair in ((a, b), (b, a))}
        self._executemany(
            "INSERT INTO friendships (person_id, friend_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
            sorted(pairs),
        )
        self._ids_taken()

    def _ids_taken(self) -> None:
        """After rows were inserted with their own ids, new ids continue above them."""

    @translated
    def export_people(self) -> tuple[list[dict], list[tuple[int, int]]]:
        """Every person (all columns of the details) and every friendship pair once."""
        people = self._execute(f"SELECT {PERSON_COLUMNS} FROM people ORDER BY id").fetchall()
        pairs = self._execute(
            "SELECT person_id, friend_id FROM friendships WHERE person_id < friend_id"
            " ORDER BY person_id, friend_id"
        ).fetchall()
        return people, [(row["person_id"], row["friend_id"]) for row in pairs]

    @translated
    def dump(self) -> dict[str, list[dict]]:
        """Every row of every table a migration copies."""
        return {
            table: self._execute(f"SELECT {columns} FROM {table}").fetchall()
            for table, columns in TABLES.items()
        }

    @translated
    def load(self, tables: dict[str, list[dict]]) -> dict[str, int]:
        """Copy dumped rows into this (empty) database in one transaction; returns counts."""
        with self.transaction():
            if not self.is_empty():
                raise Conflict("The target database already holds people or API keys.")
            for table, columns in TABLES.items():
                names = [column.strip() for column in columns.split(",")]
                marks = ", ".join("?" * len(names))
                self._executemany(
                    f"INSERT INTO {table} ({columns}) VALUES ({marks})",
                    [tuple(row[name] for name in names) for row in tables[table]],
                )
            self._ids_taken()
            return {
                table: self._execute(f"SELECT count(*) AS n FROM {table}").fetchone()["n"]
                for table in TABLES
            }
