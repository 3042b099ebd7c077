"""Persisted GraphQL documents (automatic persisted queries), shared by every process."""

from __future__ import annotations

from .common import now_iso


class PersistedStore:
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
