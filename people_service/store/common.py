"""What every store module shares: time and text helpers, error translation, the backend hooks."""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from datetime import UTC, datetime

from .schema import FOLD_PLACES_AT, MIGRATIONS, SCHEMA_VERSION


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


class Rows:
    """A statement's rows (as dicts), read in full before the statement's connection moves on."""

    __slots__ = ("rows", "rowcount", "lastrowid")

    def __init__(self, rows: list[dict], rowcount: int, lastrowid: int | None = None):
        self.rows, self.rowcount, self.lastrowid = rows, rowcount, lastrowid

    def fetchone(self) -> dict | None:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[dict]:
        return self.rows

    def __iter__(self):
        return iter(self.rows)


class StoreBase:
    """The hooks each backend provides, and the schema migrations both run.

    A backend provides `_execute` (`?` placeholders; Rows, or the domain error a driver error
    stands for: a broken constraint is Conflict, which callers that know the constraint make
    precise), `_insert` (returns the new id), `_executemany`, `_script` (a migration's SQL
    text), `transaction`, `snapshot` and the dialect bits below. Checks and the writes they
    guard (If-Match, Idempotency-Key) hold under concurrent writers through row locks
    (`FOR_UPDATE`) and constraints.
    """

    GREATEST = "max"  # the two-argument maximum
    FOR_UPDATE = ""  # locks the rows a SELECT reads until the transaction ends
    DIALECT: dict[str, str] = {}  # the spellings MIGRATIONS leave open

    def _execute(self, sql: str, params=()) -> Rows:
        raise NotImplementedError

    def _insert(self, sql: str, params=()) -> int:
        raise NotImplementedError

    def _executemany(self, sql: str, rows) -> None:
        raise NotImplementedError

    def _script(self, sql: str) -> None:
        """Run a migration's SQL text, which may hold several statements."""
        raise NotImplementedError

    def transaction(self) -> AbstractContextManager:
        """One write transaction; nested uses join the outer one."""
        raise NotImplementedError

    def snapshot(self) -> AbstractContextManager:
        """Reads that see one state of the database (a count and its page); nothing is
        written inside it."""
        raise NotImplementedError

    def release(self) -> None:
        """The calling thread is done for now (a request ended): give back its connection."""

    def _in_ids(self, column: str) -> str:
        """`column` is one of a list of ids given as a single parameter."""
        raise NotImplementedError

    def _ids(self, ids: list[int]):
        raise NotImplementedError

    def _writable(self) -> None:
        """Raise a domain error when nothing can be written now."""

    def _migrate(self, version: int, record) -> None:
        """Run the migrations after `version` in the caller's transaction, `record(n)` after
        each."""
        if version > SCHEMA_VERSION:
            raise RuntimeError(
                f"database schema version {version} is newer than this people-service "
                f"({SCHEMA_VERSION})"
            )
        for number in range(version + 1, SCHEMA_VERSION + 1):
            self._script(MIGRATIONS[number - 1].format(**self.DIALECT))
            if number == FOLD_PLACES_AT:
                self._fold_places()
            record(number)
