"""API keys and users: their hashes, scopes, limits and usage counts."""

from __future__ import annotations

from ..errors import Conflict
from .common import now_iso, translated
from .schema import KEY_COLUMNS


class CredentialStore:
    """API keys, users and their usage (mixed into Store)."""

    # -- API keys and users -----------------------------------------------------------------

    @translated
    def insert_key(self, key: dict) -> int:
        """Store a key (name, prefix, key_hash, scopes, rate_limit); a taken name is Conflict."""
        try:
            return self._insert(
                "INSERT INTO api_keys (name, prefix, key_hash, scopes, rate_limit, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    key["name"],
                    key["prefix"],
                    key["key_hash"],
                    key["scopes"],
                    key.get("rate_limit"),
                    now_iso(),
                ),
            )
        except self.integrity_error:
            raise Conflict(f"An API key named '{key['name']}' already exists.") from None

    @translated
    def key_by_hash(self, key_hash: str) -> dict | None:
        """The unrevoked key with this hash, with its hash for a constant-time comparison."""
        return self._execute(
            f"SELECT {KEY_COLUMNS}, key_hash FROM api_keys"
            " WHERE key_hash = ? AND revoked_at IS NULL",
            (key_hash,),
        ).fetchone()

    @translated
    def list_keys(self) -> list[dict]:
        return self._execute(f"SELECT {KEY_COLUMNS} FROM api_keys ORDER BY id").fetchall()

    @translated
    def revoke_key(self, name: str) -> bool:
        """Revoke a key; servers on this database notice at their next request."""
        cursor = self._execute(
            "UPDATE api_keys SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL",
            (now_iso(), name),
        )
        if cursor.rowcount:
            self._credentials_changed()
        return cursor.rowcount > 0

    def _credentials_changed(self) -> None:
        """Tell every server that cached callers may be stale."""

    def credentials_epoch(self) -> bytes | None:
        """Bytes that change whenever a credential is revoked; None: nothing may be cached."""
        return None

    @translated
    def usage(self, kind: str, ident: int) -> dict | None:
        """Stored request count and last use of a key or user."""
        table = "api_keys" if kind == "api_key" else "users"
        return self._execute(
            f"SELECT request_count, last_used FROM {table} WHERE id = ?", (ident,)
        ).fetchone()

    @translated
    def add_usage(self, counts: dict[tuple[str, int], tuple[int, str]]) -> None:
        """Add request counts and move last-used times forward, for keys and users at once."""
        with self.transaction():
            for (kind, ident), (count, last_used) in counts.items():
                table = "api_keys" if kind == "api_key" else "users"
                self._execute(
                    f"UPDATE {table} SET request_count = request_count + ?,"
                    f" last_used = {self.GREATEST}(coalesce(last_used, ''), ?) WHERE id = ?",
                    (count, last_used, ident),
                )

    @translated
    def insert_user(self, user: dict) -> int:
        """Store a login (username, password_hash, scopes); a taken name is Conflict."""
        try:
            return self._insert(
                "INSERT INTO users (username, password_hash, scopes, rate_limit, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    user["username"],
                    user["password_hash"],
                    user["scopes"],
                    user.get("rate_limit"),
                    now_iso(),
                ),
            )
        except self.integrity_error:
            raise Conflict(f"A user named '{user['username']}' already exists.") from None

    @translated
    def user_by_name(self, username: str) -> dict | None:
        return self._execute(
            "SELECT id, username, password_hash, scopes, rate_limit FROM users WHERE username = ?",
            (username,),
        ).fetchone()
