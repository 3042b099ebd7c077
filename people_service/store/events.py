"""Events: one row per change, written inside the change's transaction."""

import json
import time

from .people import now_iso

EVENT_ORDER_LOCK = 7_351_001  # the lock that puts PostgreSQL's event ids in commit order


def event_out(row: dict) -> dict:
    """An event as clients see it (the feed, a webhook's body)."""
    data = json.loads(row["data"])
    return {"id": str(row["id"]), "type": row["type"], "timestamp": row["created_at"], "data": data}


class EventStore:
    ORDER_EVENTS = ""  # PostgreSQL: held to the commit, so that ids are drawn in commit order

    def insert_event(self, event_type: str, data: dict, sender_id: str | None = None) -> dict:
        """Record an event and its deliveries; call it last in a transaction (it may wait)."""
        if self.ORDER_EVENTS:
            self._execute(self.ORDER_EVENTS, (EVENT_ORDER_LOCK,))
        now, text = now_iso(), json.dumps(data, separators=(",", ":"))
        event_id = self._insert(
            "INSERT INTO events (type, data, sender_id, created_at) VALUES (?, ?, ?, ?)",
            (event_type, text, sender_id, now),
        )
        self._execute(
            "INSERT INTO deliveries (webhook_id, event_id, next_attempt_at)"
            " SELECT id, ?, ? FROM webhooks WHERE events IS NULL OR events LIKE ?",
            (event_id, time.time(), f"%,{event_type},%"),
        )
        return {"id": str(event_id), "type": event_type, "timestamp": now, "data": data}

    def events_after(self, after: int, limit: int, types=(), sender_id: str | None = None):
        """Events after `after`, by id, of `types` (all: empty), messages of `sender_id` only."""
        where = f" AND type IN ({', '.join('?' * len(types))})" if types else ""
        if sender_id is not None:
            where += " AND (type <> 'message.created' OR sender_id = ?)"
        rows = self._execute(
            f"SELECT id, type, data, created_at FROM events WHERE id > ?{where}"
            " ORDER BY id LIMIT ?",
            (after, *types, *([] if sender_id is None else [sender_id]), limit),
        )
        return [event_out(row) for row in rows]

    def latest_event_id(self) -> int:
        return int(self._execute("SELECT max(id) AS latest FROM events")[0]["latest"] or 0)

    def events_pruned_through(self) -> int:
        """The highest event id that retention removed (0 when none was)."""
        rows = self._execute("SELECT value FROM settings WHERE name = 'events_pruned_through'")
        return int(rows[0]["value"]) if rows else 0
