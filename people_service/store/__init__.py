"""The data-access layer: every SQL statement, behind one narrow interface with two backends."""

import re

from .base import SCHEMA_VERSION as SCHEMA_VERSION
from .base import Store
from .people import iso as iso
from .sqlite import SQLiteStore


def is_url(database: str) -> bool:
    return str(database).startswith(("postgresql://", "postgres://"))


def redacted(database: str) -> str:
    """DATABASE without the password it may carry, for messages and logs."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", str(database))


def open_store(database: str) -> Store:
    """The store for DATABASE: a PostgreSQL URL, or else the path of a SQLite file."""
    if not is_url(database):
        return SQLiteStore(str(database))
    try:
        from .postgres import PostgresStore  # psycopg is only needed for PostgreSQL
    except ModuleNotFoundError:
        raise RuntimeError(
            "PostgreSQL support is not installed: pip install -e '.[postgres]'"
        ) from None
    return PostgresStore(str(database))
