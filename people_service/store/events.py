"""Events: one row per change, written inside the change's transaction."""

import json
import time

from .people import insert, now_iso

# The key of the lock that puts PostgreSQL's event ids in commit order (see insert_event).
EVENT_ORDER_LOCK = 7_351_001


def event_out(row: dict) -> dict:
    """An event as clients see it (the feed, a webhook's body)."""
    data = json.loads(row["data"])
    return {"id": str(row["id"]), "type": row["type"], "timestamp": row["created_at"], "data": data}


class EventStore:
    # PostgreSQL: taken just before an event is inserted and held to the commit, so that ids
    # are drawn in the order their transactions commit; SQLite has one writer at a time anyway
    ORDER_EVENTS = ""

    def insert_event(self, event_type: str, data: dict, sender_id: str | None = None) -> dict:
        """Record an event in the caller's transaction (call it last in that transaction: on
        PostgreSQL it waits for other writers' events); returns the event as clients see it."""
        if self.ORDER_EVENTS:
            self._execute(self.ORDER_EVENTS, (EVENT_ORDER_LOCK,))
        now = now_iso()
        columns = ("type", "data", "sender_id", "created_at")
        text = json.dumps(data, separators=(",", ":"))
        event_id = self._insert(insert("events", columns), (event_type, text, sender_id, now))
        # a delivery for every webhook that takes its type, committed with the event or not at all
        self._execute(
            "INSERT INTO deliveries (webhook_id, event_id, next_attempt_at)"
            " SELECT id, ?, ? FROM webhooks WHERE events IS NULL OR events LIKE ?",
            (event_id, time.time(), f"%,{event_type},%"),
        )
        return {"id": str(event_id), "type": event_type, "timestamp": now, "data": data}

    def events_after(
        self, after: int, limit: int, types: tuple[str, ...] = (), sender_id: str | None = None
    ) -> list[dict]:
        """Up to `limit` events with an id above `after`, by id: of `types` (all when empty);
        messages only those `sender_id` sent (None: anyone's)."""
        where, params = "id > ?", [after]
        if types:
            where += f" AND type IN ({', '.join('?' * len(types))})"
            params += types
        if sender_id is not None:
            where += " AND (type <> 'message.created' OR sender_id = ?)"
            params.append(sender_id)
        rows = self._execute(
            f"SELECT id, type, data, created_at FROM events WHERE {where} ORDER BY id LIMIT ?",
            (*params, limit),
        )
        return [event_out(row) for row in rows]

    def latest_event_id(self) -> int:
        """The newest committed event's id (0 when none): where a stream without a cursor starts."""
        row = self._execute("SELECT max(id) AS latest FROM events").fetchone()
        return int(row["latest"] or 0)

    def events_pruned_through(self) -> int:
        """The highest event id that retention removed (0 when none was)."""
        row = self._execute(
            "SELECT value FROM settings WHERE name = 'events_pruned_through'"
        ).fetchone()
        return int(row["value"]) if row else 0
