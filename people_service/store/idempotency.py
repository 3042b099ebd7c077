"""Idempotency records: the first answer to a caller's Idempotency-Key, kept for a day."""

from __future__ import annotations


class IdempotencyStore:
    """Saved answers of idempotent requests (mixed into Store)."""

    # -- idempotency records ----------------------------------------------------------------

    def get_idempotent(self, caller: str, key: str) -> dict | None:
        """The stored answer for a caller's Idempotency-Key."""
        return self._execute(
            "SELECT fingerprint, status, body FROM idempotency WHERE caller = ? AND key = ?",
            (caller, key),
        ).fetchone()

    def claim_idempotent(self, caller: str, key: str, fingerprint: str, now: float) -> bool:
        """Record that a caller's Idempotency-Key is being answered; False if a record exists.

        Another transaction claiming the same key waits here until this one ends (the primary
        key), then finds its record.
        """
        return (
            self._execute(
                "INSERT INTO idempotency (caller, key, fingerprint, status, body, created_at)"
                " VALUES (?, ?, ?, 0, '', ?) ON CONFLICT (caller, key) DO NOTHING",
                (caller, key, fingerprint, now),
            ).rowcount
            > 0
        )

    def prune_idempotent(self, before: float) -> None:
        """Forget answers older than `before`."""
        self._execute("DELETE FROM idempotency WHERE created_at < ?", (before,))

    def put_idempotent(self, caller: str, key: str, status: int, body: str) -> None:
        """The answer to a claimed key."""
        self._execute(
            "UPDATE idempotency SET status = ?, body = ? WHERE caller = ? AND key = ?",
            (status, body, caller, key),
        )
