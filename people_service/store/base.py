"""The store's one interface: every query of the service, composed from one mixin per job."""

from contextlib import contextmanager

from ..errors import ServiceError
from .credentials import CredentialStore
from .people import PeopleStore
from .schema import FOLD_PLACES_AT, MIGRATIONS, SCHEMA_VERSION

READ_ONLY = "The database is read-only; nothing was written."


class Rows(list):
    """A statement's rows as dicts, read in full, with its rowcount."""

    def __init__(self, rows: list[dict], rowcount: int):
        super().__init__(rows)
        self.rowcount = rowcount

    def fetchone(self) -> dict | None:
        return self[0] if self else None

    def fetchall(self) -> list[dict]:
        return self


class Store(PeopleStore, CredentialStore):
    """The SQL of both backends (`?` placeholders). A backend provides `_connection()`,
    `_transaction(begin)`, `translate()` (a driver error as a domain error: a broken
    constraint is Conflict, which callers that know the constraint make precise), where the
    schema version is kept, and the dialect below."""

    GREATEST = "max"  # the two-argument maximum
    FOR_UPDATE = ""  # locks the rows a SELECT reads until the transaction ends
    DIALECT: dict[str, str] = {}  # the spellings MIGRATIONS leave open
    DRIVER_ERROR: type[Exception] = Exception
    UNAVAILABLE = "unavailable"  # what check() says when the database does not answer
    WRITE = READ = ""  # what begins a write transaction, and a snapshot

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
        return self._execute(sql + " RETURNING id", params).fetchone()["id"]

    def _executemany(self, sql: str, rows) -> None:
        with self._translated(), self._connection() as conn:
            conn.cursor().executemany(self._sql(sql), list(rows))

    def release(self) -> None:
        """The calling thread is done for now (a request ended): give back its connection."""

    def _writable(self) -> None:
        """Raise a domain error when nothing can be written now."""

    def upgrade_schema(self) -> int:
        """Create or upgrade the schema; returns the version. Idempotent."""
        with self.transaction():
            version = self._schema_version()
            if version > SCHEMA_VERSION:
                raise RuntimeError(
                    f"database schema version {version} is newer than this people-service "
                    f"({SCHEMA_VERSION})"
                )
            for number in range(version + 1, SCHEMA_VERSION + 1):
                # one statement at a time (no migration has a `;` inside a statement)
                for statement in MIGRATIONS[number - 1].format(**self.DIALECT).split(";"):
                    self._execute(statement)
                if number == FOLD_PLACES_AT:
                    self._fold_places()
                self._set_version(number)
        return SCHEMA_VERSION

    def check(self) -> str:
        """'ok', or what is wrong with the database."""
        try:
            self._execute("SELECT 1 FROM people LIMIT 1")
        except ServiceError:
            return self.UNAVAILABLE
        return "ok"
