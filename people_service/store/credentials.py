"""API keys and users (their hashes, scopes, limits and usage counts), and what repeated
requests are answered from: first answers to an Idempotency-Key (kept for a day) and persisted
GraphQL documents by their SHA-256, shared by every process."""

from ..errors import Conflict
from .schema import KEY_COLUMNS, USER_COLUMNS, insert, now_iso

TABLES = {"api_key": "api_keys", "user": "users"}


class CredentialStore:
    def _insert_named(self, table: str, row: dict, columns: tuple, taken: str) -> int:
        values = (*(row[column] for column in columns), row.get("rate_limit"), now_iso())
        try:
            return self._insert(insert(table, [*columns, "rate_limit", "created_at"]), values)
        except Conflict:
            raise Conflict(taken) from None

    def insert_key(self, key: dict) -> int:
        """Store a key (name, prefix, key_hash, scopes, rate_limit); a taken name is Conflict."""
        taken = f"An API key named '{key['name']}' already exists."
        return self._insert_named("api_keys", key, ("name", "prefix", "key_hash", "scopes"), taken)

    def key_by_hash(self, key_hash: str) -> dict | None:
        """The unrevoked key with this hash, with its hash for a constant-time comparison."""
        return self._execute(
            f"SELECT {KEY_COLUMNS}, key_hash FROM api_keys"
            " WHERE key_hash = ? AND revoked_at IS NULL",
            (key_hash,),
        ).fetchone()

    def list_keys(self) -> list[dict]:
        return self._execute(f"SELECT {KEY_COLUMNS} FROM api_keys ORDER BY id").fetchall()

    def revoke_key(self, name: str) -> bool:
        """Revoke a key; servers on this database refuse it from their next request."""
        sql = "UPDATE api_keys SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL"
        return self._changed(sql, (now_iso(), name))

    def rotate_key(self, name: str, prefix: str, key_hash: str) -> bool:
        """Give an active key a new secret; its name, scopes, limit and usage stay."""
        sql = "UPDATE api_keys SET prefix = ?, key_hash = ? WHERE name = ? AND revoked_at IS NULL"
        return self._changed(sql, (prefix, key_hash, name))

    def delete_key(self, name: str) -> bool:
        """Forget a key (revoked or not); its messages stay, with its name as their sender."""
        return self._changed("DELETE FROM api_keys WHERE name = ?", (name,))

    def usage(self, kind: str, ident: int) -> dict | None:
        """Stored request count and last use of a key or user."""
        return self._execute(
            f"SELECT request_count, last_used FROM {TABLES[kind]} WHERE id = ?", (ident,)
        ).fetchone()

    def add_usage(self, counts: dict[tuple[str, int], tuple[int, str]]) -> None:
        """Add request counts and move last-used times forward, for keys and users at once."""
        with self.transaction():  # in one order, so that two flushes never deadlock
            for (kind, ident), (count, last_used) in sorted(counts.items()):
                self._execute(
                    f"UPDATE {TABLES[kind]} SET request_count = request_count + ?,"
                    f" last_used = {self.GREATEST}(coalesce(last_used, ''), ?) WHERE id = ?",
                    (count, last_used, ident),
                )

    def insert_user(self, user: dict) -> int:
        """Store a login (username, password_hash, scopes); a taken name is Conflict."""
        message = f"A user named '{user['username']}' already exists."
        return self._insert_named("users", user, ("username", "password_hash", "scopes"), message)

    def user_by_name(self, username: str) -> dict | None:
        """A user with its password hash, disabled time and token generation."""
        return self._execute(
            f"SELECT {USER_COLUMNS}, password_hash, token_generation FROM users WHERE username = ?",
            (username,),
        ).fetchone()

    def list_users(self) -> list[dict]:
        return self._execute(f"SELECT {USER_COLUMNS} FROM users ORDER BY id").fetchall()

    def set_password(self, username: str, password_hash: str) -> bool:
        """A new password; tokens issued before it stop working."""
        sql = (
            "UPDATE users SET password_hash = ?, token_generation = token_generation + 1"
            " WHERE username = ?"
        )
        return self._changed(sql, (password_hash, username))

    def set_disabled(self, username: str, disabled: bool) -> bool:
        """Disable a user (no logins; its tokens stop working at once) or enable it again."""
        if disabled:
            sql = (
                "UPDATE users SET disabled_at = ?, token_generation = token_generation + 1"
                " WHERE username = ? AND disabled_at IS NULL"
            )
            return self._changed(sql, (now_iso(), username))
        sql = "UPDATE users SET disabled_at = NULL WHERE username = ? AND disabled_at IS NOT NULL"
        return self._changed(sql, (username,))

    def delete_user(self, username: str) -> bool:
        """Forget a user; its tokens stop working at once."""
        return self._changed("DELETE FROM users WHERE username = ?", (username,))

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
