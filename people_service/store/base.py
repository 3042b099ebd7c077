"""The store's one interface: every query of the service, composed from one mixin per job."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager

from .common import Rows
from .credentials import CredentialStore
from .idempotency import IdempotencyStore
from .messages import MessageStore
from .people import PeopleStore
from .persisted import PersistedStore
from .schema import FOLD_PLACES_AT, MIGRATIONS, SCHEMA_VERSION
from .transfer import TransferStore


class Store(
    PeopleStore, MessageStore, CredentialStore, IdempotencyStore, PersistedStore, TransferStore
):
    """People, friendships, messages, credentials and idempotency records in a SQL database.

    The SQL (`?` placeholders) is written once; a backend provides `_connection()`,
    `transaction()`, `snapshot()`, `translate()` (a driver error as a domain error: a broken
    constraint is Conflict, which callers that know the constraint make precise) and the
    dialect below. Checks and the writes they guard (If-Match, Idempotency-Key) hold under
    concurrent writers through row locks (`FOR_UPDATE`) and constraints.
    """

    GREATEST = "max"  # the two-argument maximum
    FOR_UPDATE = ""  # locks the rows a SELECT reads until the transaction ends
    DIALECT: dict[str, str] = {}  # the spellings MIGRATIONS leave open
    DRIVER_ERROR: type[Exception] = Exception

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
        """Whether the statement changed any row."""
        return self._execute(sql, params).rowcount > 0

    def _insert(self, sql: str, params=()) -> int:
        return self._execute(sql + " RETURNING id", params).fetchone()["id"]

    def _executemany(self, sql: str, rows) -> None:
        with self._translated(), self._connection() as conn:
            conn.cursor().executemany(self._sql(sql), list(rows))

    def _script(self, sql: str) -> None:
        # statement by statement, inside the caller's transaction; complete_statement knows
        # where one ends, semicolons in strings too
        statement = ""
        for line in sql.splitlines(keepends=True):
            statement += line
            if sqlite3.complete_statement(statement):
                self._execute(statement)
                statement = ""
        if statement.strip():
            self._execute(statement)

    def release(self) -> None:
        """The calling thread is done for now (a request ended): give back its connection."""

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
