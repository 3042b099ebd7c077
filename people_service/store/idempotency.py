"""Idempotency records: the first answer to a caller's Idempotency-Key, kept for a day."""

from __future__ import annotations

from .common import translated


class IdempotencyStore:
    """Saved answers of idempotent requests (mixed into Store)."""

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
