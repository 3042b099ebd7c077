"""The tables: their columns, how they store times, and the migrations both backends run."""

import time
from datetime import UTC, datetime

PERSON_COLUMNS = "id, name, age, email, street, city, country"
MESSAGE_COLUMNS = "id, person_id, sender, content, created_at"
USER_COLUMNS = "id, username, scopes, rate_limit, created_at, last_used, request_count, disabled_at"
KEY_COLUMNS = (
    "id, name, prefix, scopes, rate_limit, created_at, last_used, request_count, revoked_at"
)


def iso(timestamp: float) -> str:
    """A POSIX time as RFC 3339 UTC with milliseconds."""
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now_iso() -> str:
    return iso(time.time())


def insert(table: str, columns) -> str:
    """An INSERT of one row of `columns` into `table`, with a placeholder for each."""
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


# The tables a migration between backends copies, in an order that keeps foreign keys satisfied
TABLES = ("people", "friendships", "messages", "api_keys", "users")

# The migrations, for both backends: migration n takes a database from version n - 1 to n, in
# one transaction. The names in braces are what each backend spells its own way (its DIALECT).
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
    CREATE INDEX idempotency_created ON idempotency (created_at);
    -- what the service keeps in the database itself (PostgreSQL: the token secret)
    CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)
"""
MIGRATIONS = [
    SCHEMA_V1,
    # users can be disabled, and a password change or a disable ends their tokens
    """
    ALTER TABLE users ADD COLUMN disabled_at TEXT;
    ALTER TABLE users ADD COLUMN token_generation {counter} NOT NULL DEFAULT 0
    """,
    # people lists filter by folded city and country (filled by _fold_places after this) and
    # sort by name or age; id ends each index, the lists' tie-break
    """
    ALTER TABLE people ADD COLUMN city_key TEXT;
    ALTER TABLE people ADD COLUMN country_key TEXT;
    CREATE INDEX people_city_key ON people (city_key, id);
    CREATE INDEX people_country_key ON people (country_key, id);
    CREATE INDEX people_age ON people (age, id){v3_orders}
    """,
    # automatic persisted queries: GraphQL documents by their SHA-256, shared by every process
    """
    CREATE TABLE persisted_queries (
        hash TEXT PRIMARY KEY,
        document TEXT NOT NULL,
        created_at TEXT NOT NULL
    )
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)
FOLD_PLACES_AT = 3  # the migration after which existing rows get their folded keys
