"""Persisted GraphQL documents (automatic persisted queries), shared by every process."""

from __future__ import annotations

from .common import now_iso


class PersistedStore:
    """Documents by their SHA-256 (mixed into Store)."""

    def get_persisted(self, digest: str) -> str | None:
        """The document stored under a hex SHA-256, if any."""
        row = self._execute(
            "SELECT document FROM persisted_queries WHERE hash = ?", (digest,)
        ).fetchone()
        return row["document"] if row else None

    def put_persisted(self, digest: str, document: str, keep: int) -> None:
        """Store a document under its SHA-256; past `keep` documents, the oldest go."""
        with self.transaction():
            self._execute(
                "INSERT INTO persisted_queries (hash, document, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT (hash) DO NOTHING",
                (digest, document, now_iso()),
            )
            count = self._execute("SELECT count(*) AS n FROM persisted_queries").fetchone()["n"]
            if count > keep:
                self._execute(
                    "DELETE FROM persisted_queries WHERE hash IN (SELECT hash FROM"
                    " persisted_queries ORDER BY created_at, hash LIMIT ?)",
                    (count - keep,),
                )
