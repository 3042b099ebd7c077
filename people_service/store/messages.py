"""Messages: stored with their sender, read back only by it (or an admin)."""

from ..errors import Conflict, NotFound
from .schema import MESSAGE_COLUMNS, insert, now_iso

NEWEST = "created_at DESC, id DESC"


def _from(sender_id: str | None) -> tuple[str, tuple]:
    """The condition and parameters for messages from `sender_id` (None: from anyone)."""
    return ("", ()) if sender_id is None else (" AND sender_id = ?", (sender_id,))


class MessageStore:
    def insert_message(self, message: dict) -> dict:
        """Store a message (person_id, sender_id, sender, content); returns it with id. An
        unknown person is NotFound."""
        self._writable()
        row = dict(message, created_at=now_iso())
        columns = ("person_id", "sender_id", "sender", "content", "created_at")
        try:
            row["id"] = self._insert(insert("messages", columns), [row[name] for name in columns])
        except Conflict:
            raise NotFound(f"No person with id '{row['person_id']}'.") from None
        del row["sender_id"]
        return row

    def get_message(self, message_id: int, sender_id: str | None) -> dict | None:
        """A message, if `sender_id` sent it (None: whoever did)."""
        condition, params = _from(sender_id)
        sql = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?{condition}"
        return self._execute(sql, (message_id, *params)).fetchone()

    def list_messages(
        self, person_id: int, sender_id: str | None, limit: int, offset: int
    ) -> list[dict]:
        """Messages to a person (from `sender_id` unless None), newest first."""
        condition, params = _from(sender_id)
        return self._execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE person_id = ?{condition}"
            f" ORDER BY {NEWEST} LIMIT ? OFFSET ?",
            (person_id, *params, limit, offset),
        ).fetchall()

    def messages_of(
        self, person_ids: list[int], sender_id: str | None, limit: int
    ) -> dict[int, list[dict]]:
        """The newest `limit` messages to each person (from `sender_id` unless None)."""
        where = _from(sender_id)
        return self._firsts(person_ids, limit, MESSAGE_COLUMNS, "messages", NEWEST, where)
