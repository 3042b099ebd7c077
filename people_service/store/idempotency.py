"""What repeated requests are answered from: first answers to an Idempotency-Key (kept for a
day) and persisted GraphQL documents by their SHA-256, shared by every process."""

from .schema import now_iso


class IdempotencyStore:
    def claim_idempotent(self, caller: str, key: str, fingerprint: str, now: float, ttl: float):
        """Record that a caller's key is being answered (past `ttl`, records go): None, else the
        record there is (a rival claim waits for this transaction, then finds it)."""
        self._execute("DELETE FROM idempotency WHERE created_at < ?", (now - ttl,))
        if self._changed(
            "INSERT INTO idempotency (caller, key, fingerprint, status, body, created_at)"
            " VALUES (?, ?, ?, 0, '', ?) ON CONFLICT (caller, key) DO NOTHING",
            (caller, key, fingerprint, now),
        ):
            return None
        return self._execute(
            "SELECT fingerprint, status, body FROM idempotency WHERE caller = ? AND key = ?",
            (caller, key),
        ).fetchone()

    def put_idempotent(self, caller: str, key: str, status: int, body: str) -> None:
        """The answer to a claimed key."""
        self._execute(
            "UPDATE idempotency SET status = ?, body = ? WHERE caller = ? AND key = ?",
            (status, body, caller, key),
        )

    def get_persisted(self, digest: str) -> str | None:
        """The document stored under a hex SHA-256, if any."""
        sql = "SELECT document FROM persisted_queries WHERE hash = ?"
        row = self._execute(sql, (digest,)).fetchone()
        return row["document"] if row else None

    def put_persisted(self, digest: str, document: str, keep: int) -> None:
        """Store a document under its SHA-256; past `keep` documents, the oldest go."""
        with self.transaction():
            self._execute(
                "INSERT INTO persisted_queries (hash, document, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT (hash) DO NOTHING",
                (digest, document, now_iso()),
            )
            self._execute(
                "DELETE FROM persisted_queries WHERE hash NOT IN (SELECT hash FROM"
                " persisted_queries ORDER BY created_at DESC, hash DESC LIMIT ?)",
                (keep,),
            )
