"""Idempotency records: the first answer to a caller's Idempotency-Key, kept for a day."""

from __future__ import annotations


class IdempotencyStore:
    def get_idempotent(self, caller: str, key: str) -> dict | None:
        return self._execute(
            "SELECT fingerprint, status, body FROM idempotency WHERE caller = ? AND key = ?",
            (caller, key),
        ).fetchone()

    def claim_idempotent(self, caller: str, key: str, fingerprint: str, now: float) -> bool:
        """Record that a caller's key is being answered; False if a record exists (a rival
        claim waits for this transaction, then finds it)."""
        return self._changed(
            "INSERT INTO idempotency (caller, key, fingerprint, status, body, created_at)"
            " VALUES (?, ?, ?, 0, '', ?) ON CONFLICT (caller, key) DO NOTHING",
            (caller, key, fingerprint, now),
        )

    def prune_idempotent(self, before: float) -> None:
        self._execute("DELETE FROM idempotency WHERE created_at < ?", (before,))

    def put_idempotent(self, caller: str, key: str, status: int, body: str) -> None:
        """The answer to a claimed key."""
        self._execute(
            "UPDATE idempotency SET status = ?, body = ? WHERE caller = ? AND key = ?",
            (status, body, caller, key),
        )
