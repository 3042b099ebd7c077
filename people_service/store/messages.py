"""Messages: stored with their sender, read back only by it (or an admin)."""

from __future__ import annotations

from ..errors import Conflict, NotFound
from .common import now_iso
from .schema import MESSAGE_COLUMNS


class MessageStore:
    """Messages to people (mixed into Store)."""

    # -- messages ---------------------------------------------------------------------------

    def insert_message(self, message: dict) -> dict:
        """Store a message (person_id, sender_id, sender, content); returns it with id.

        One statement, so it needs no transaction of its own; an unknown person is NotFound
        (the foreign key refuses it).
        """
        self._writable()
        row = dict(message, created_at=now_iso())
        try:
            row["id"] = self._insert(
                "INSERT INTO messages (person_id, sender_id, sender, content, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    row["person_id"],
                    row["sender_id"],
                    row["sender"],
                    row["content"],
                    row["created_at"],
                ),
            )
        except Conflict:
            raise NotFound(f"No person with id '{row['person_id']}'.") from None
        del row["sender_id"]
        return row

    def get_message(self, message_id: int, sender_id: str | None) -> dict | None:
        """A message, if `sender_id` sent it (None: whoever did)."""
        sql = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?"
        params: tuple = (message_id,)
        if sender_id is not None:
            sql += " AND sender_id = ?"
            params += (sender_id,)
        return self._execute(sql, params).fetchone()

    def list_messages(
        self, person_id: int, sender_id: str | None, limit: int, offset: int
    ) -> list[dict]:
        """Messages to a person (from `sender_id` unless None), newest first."""
        sql = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE person_id = ?"
        params: tuple = (person_id,)
        if sender_id is not None:
            sql += " AND sender_id = ?"
            params += (sender_id,)
        sql += " ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?"
        return self._execute(sql, (*params, limit, offset)).fetchall()

    def messages_of(
        self, person_ids: list[int], sender_id: str | None, limit: int
    ) -> dict[int, list[dict]]:
        """The newest `limit` messages to each person (from `sender_id` unless None)."""
        result: dict[int, list[dict]] = {person_id: [] for person_id in person_ids}
        if not person_ids or limit <= 0:
            return result
        sender_filter = "" if sender_id is None else " AND sender_id = ?"
        params: tuple = (self._ids(person_ids),)
        if sender_id is not None:
            params += (sender_id,)
        rows = self._execute(
            f"SELECT {MESSAGE_COLUMNS} FROM ("
            f" SELECT *, ROW_NUMBER() OVER"
            f" (PARTITION BY person_id ORDER BY created_at DESC, id DESC) AS n"
            f" FROM messages WHERE {self._in_ids('person_id')}{sender_filter}"
            f") AS ranked WHERE n <= ? ORDER BY person_id, n",
            (*params, limit),
        )
        for row in rows:
            result[row["person_id"]].append(row)
        return result
