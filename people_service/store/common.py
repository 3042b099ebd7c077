"""Time and text helpers that every store module shares."""

import time
from datetime import UTC, datetime


def iso(timestamp: float) -> str:
    """A POSIX time as RFC 3339 UTC with milliseconds."""
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now_iso() -> str:
    return iso(time.time())


def fold(text: str | None) -> str | None:
    """The case-insensitive form of names, emails and places, for search and uniqueness."""
    return None if text is None else text.casefold()


def contains(text: str) -> str:
    """A LIKE pattern (ESCAPE '\\') for `text` anywhere: % and _ are plain characters here."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def insert(table: str, columns) -> str:
    """An INSERT of one row of `columns` into `table`, with a placeholder for each."""
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
