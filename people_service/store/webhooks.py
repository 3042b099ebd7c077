"""Webhooks and their deliveries: the tables, the claims that share the work, retention."""

from .events import EVENT_ORDER_LOCK
from .people import insert, iso, now_iso

SCHEMA = """
    CREATE TABLE webhooks (
        id {identity},
        url TEXT NOT NULL,
        events TEXT,
        description TEXT,
        enabled INTEGER NOT NULL DEFAULT 1,
        secret TEXT NOT NULL,
        previous_secret TEXT,
        previous_until {real},
        created_at TEXT NOT NULL
    );
    CREATE TABLE deliveries (
        webhook_id {reference} NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
        event_id {reference} NOT NULL REFERENCES events (id) ON DELETE CASCADE,
        status TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at {real} NOT NULL,
        lease_until {real},
        lease_token TEXT,
        last_status_code INTEGER,
        last_error TEXT,
        delivered_at TEXT,
        finished_at {real},
        PRIMARY KEY (webhook_id, event_id)
    );
    CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
    CREATE INDEX deliveries_event ON deliveries (event_id);
    CREATE INDEX deliveries_finished ON deliveries (finished_at) WHERE status <> 'pending'
"""
WEBHOOK_COLUMNS = "id, url, events, description, enabled, created_at"
DELIVERY_COLUMNS = (
    "d.event_id, e.type AS event_type, d.status, d.attempts, d.last_status_code, d.last_error,"
    " d.next_attempt_at, d.delivered_at"
)
# what a claimed delivery needs to be sent: the event, where to, and the secrets that sign it
CLAIMED = (
    "SELECT d.webhook_id, d.attempts, d.last_status_code, d.last_error, e.id, e.type, e.data,"
    " e.created_at, w.url, w.secret,"
    " w.previous_secret, w.previous_until FROM deliveries d JOIN events e ON e.id = d.event_id"
    " JOIN webhooks w ON w.id = d.webhook_id WHERE d.lease_token = ?"
)
# due: pending, of an enabled webhook, its time come, and nobody's lease running
DUE = (
    "FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE d.status = 'pending'"
    " AND w.enabled = 1 AND d.next_attempt_at <= ? AND (d.lease_until IS NULL OR d.lease_until < ?)"
)
PRUNED_THROUGH = "events_pruned_through"  # settings: the highest event id removed by retention


def events_text(events: list[str] | None) -> str | None:
    """How a webhook's event types are kept: ',a,b,' (matched with LIKE), None for all."""
    return None if events is None else "," + ",".join(events) + ","


def _not_in(webhook_ids: list[int]) -> str:
    return f" AND d.webhook_id NOT IN ({', '.join('?' * len(webhook_ids))})" if webhook_ids else ""


def webhook_out(row: dict) -> dict:
    events = row["events"]
    return {
        "id": str(row["id"]),
        "url": row["url"],
        "events": None if events is None else events.strip(",").split(","),
        "description": row["description"],
        "enabled": bool(row["enabled"]),
        "created_at": row["created_at"],
    }


class WebhookStore:
    def insert_webhook(self, url, events, description, secret, most: int) -> dict | None:
        """A new webhook, or None when `most` exist already."""
        columns = ("url", "events", "description", "secret", "created_at")
        values = (url, events_text(events), description, secret, now_iso())
        with self.transaction():
            if self.ORDER_EVENTS:  # after the events being written: it takes every later one
                self._execute(self.ORDER_EVENTS, (EVENT_ORDER_LOCK,))
            if self._execute("SELECT count(*) AS n FROM webhooks").fetchone()["n"] >= most:
                return None
            return self.get_webhook(self._insert(insert("webhooks", columns), values))

    def get_webhook(self, webhook_id: int) -> dict | None:
        sql = f"SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE id = ?"
        row = self._execute(sql, (webhook_id,)).fetchone()
        return row and webhook_out(row)

    def list_webhooks(self) -> list[dict]:
        rows = self._execute(f"SELECT {WEBHOOK_COLUMNS} FROM webhooks ORDER BY id")
        return [webhook_out(row) for row in rows]

    def update_webhook(self, webhook_id: int, changes: dict, now: float) -> dict | None:
        """Set url, events, description or enabled; enabling sends its pending ones now."""
        if "events" in changes:
            changes = {**changes, "events": events_text(changes["events"])}
        if "enabled" in changes:
            changes = {**changes, "enabled": int(changes["enabled"])}
        with self.transaction():
            if changes:
                sets = ", ".join(f"{name} = ?" for name in changes)
                sql = f"UPDATE webhooks SET {sets} WHERE id = ?"
                if not self._changed(sql, (*changes.values(), webhook_id)):
                    return None
            if changes.get("enabled"):
                self._execute(
                    "UPDATE deliveries SET next_attempt_at = ? WHERE webhook_id = ?"
                    " AND status = 'pending' AND next_attempt_at > ?",
                    (now, webhook_id, now),
                )
            return self.get_webhook(webhook_id)

    def delete_webhook(self, webhook_id: int) -> bool:
        """Delete a webhook; its deliveries go with it (ON DELETE CASCADE)."""
        return self._changed("DELETE FROM webhooks WHERE id = ?", (webhook_id,))

    def rotate_webhook_secret(self, webhook_id: int, secret: str, until: float) -> bool:
        """A new secret; the one it replaces still signs until `until`."""
        return self._changed(
            "UPDATE webhooks SET previous_secret = secret, previous_until = ?, secret = ?"
            " WHERE id = ?",
            (until, secret, webhook_id),
        )

    def list_deliveries(self, webhook_id: int, limit: int, offset: int) -> list[dict]:
        """A webhook's deliveries, newest event first."""
        return self._execute(
            f"SELECT {DELIVERY_COLUMNS} FROM deliveries d JOIN events e ON e.id = d.event_id"
            " WHERE d.webhook_id = ? ORDER BY d.event_id DESC LIMIT ? OFFSET ?",
            (webhook_id, limit, offset),
        ).fetchall()

    def retry_delivery(self, webhook_id: int, event_id: int, now: float) -> bool:
        """Make a delivery pending again, due now, its schedule from the start (made if the
        webhook never had one of the event); False when the event is unknown."""
        with self.transaction():
            if not self._execute("SELECT 1 FROM events WHERE id = ?", (event_id,)):
                return False
            self._execute(
                "INSERT INTO deliveries (webhook_id, event_id, next_attempt_at) VALUES (?, ?, ?)"
                " ON CONFLICT (webhook_id, event_id) DO UPDATE SET status = 'pending',"
                " attempts = 0, next_attempt_at = excluded.next_attempt_at, finished_at = NULL"
                # an attempt under way keeps its claim: no second process sends it meanwhile
                " WHERE deliveries.lease_until IS NULL OR deliveries.lease_until < ?",
                (webhook_id, event_id, now, now),
            )
            return True

    def claim_deliveries(
        self, token: str, now: float, lease: float, limit: int, skip: list[int]
    ) -> list[dict]:
        """Lease up to `limit` due deliveries, none of the webhooks in `skip`, to `token` until
        now + lease; with what sending each needs. Claims of other processes skip them (SKIP
        LOCKED, or SQLite's one writer)."""
        lock = f"{self.FOR_UPDATE} OF d SKIP LOCKED" if self.FOR_UPDATE else ""
        with self.transaction():
            claimed = self._execute(
                "UPDATE deliveries SET lease_until = ?, lease_token = ?"
                " WHERE (webhook_id, event_id) IN (SELECT d.webhook_id, d.event_id"
                f" {DUE}{_not_in(skip)}"
                f" ORDER BY d.next_attempt_at LIMIT ?{lock}) RETURNING event_id",
                (now + lease, token, now, now, *skip, limit),
            )
            return self._execute(CLAIMED, (token,)).fetchall() if claimed else []

    def release_deliveries(self, token: str, rows: list[dict]) -> None:
        """Give claimed deliveries back unsent, as they were."""
        with self.transaction():
            for row in rows:
                self._execute(
                    "UPDATE deliveries SET lease_until = NULL, lease_token = NULL"
                    " WHERE webhook_id = ? AND event_id = ? AND lease_token = ?",
                    (row["webhook_id"], row["id"], token),
                )

    def next_delivery_at(self, skip: list[int]) -> float | None:
        """When a delivery of an enabled webhook not in `skip` falls due or its claim ends."""
        row = self._execute(
            "SELECT min(CASE WHEN d.lease_until > d.next_attempt_at THEN d.lease_until"
            " ELSE d.next_attempt_at END) AS due FROM deliveries d JOIN webhooks w"
            " ON w.id = d.webhook_id WHERE d.status = 'pending' AND w.enabled = 1" + _not_in(skip),
            tuple(skip),
        ).fetchone()
        return row["due"]

    def record_delivery(self, token: str, out: dict, now: float) -> None:
        """Record an attempt (webhook_id, id: the event's, status, attempts, next_attempt_at,
        status_code, error) if it is still leased to `token`; a 410 disables the webhook."""
        done = out["status"] != "pending"
        with self.transaction():
            mine = self._changed(
                "UPDATE deliveries SET status = ?, attempts = ?, next_attempt_at = ?,"
                " last_status_code = ?, last_error = ?, delivered_at = ?, finished_at = ?,"
                " lease_until = NULL, lease_token = NULL"
                " WHERE webhook_id = ? AND event_id = ? AND lease_token = ?",
                (
                    out["status"],
                    out["attempts"],
                    out["next_attempt_at"],
                    out["status_code"],
                    out["error"],
                    now_iso() if out["status"] == "succeeded" else None,
                    now if done else None,
                    out["webhook_id"],
                    out["id"],
                    token,
                ),
            )
            if out["status_code"] == 410 and mine:  # a stale claim's 410 never undoes a re-enable
                self._execute("UPDATE webhooks SET enabled = 0 WHERE id = ?", (out["webhook_id"],))

    def delivery_backlog(self) -> dict:
        """Pending deliveries and the age in seconds of the oldest, for /metrics."""
        return self._execute(
            "SELECT count(*) AS pending, min(e.created_at) AS oldest FROM deliveries d"
            " JOIN events e ON e.id = d.event_id WHERE d.status = 'pending'"
        ).fetchone()

    def prune_events(self, before: float) -> None:
        """Remove finished deliveries and events older than `before` (POSIX time), events up to
        the first one a pending delivery waits for; record the highest event id removed."""
        with self.transaction():
            self._execute(
                "DELETE FROM deliveries WHERE status <> 'pending' AND finished_at < ?", (before,)
            )
            # old events go, but none from the first one a pending delivery still waits for:
            # a disabled webhook's deliveries wait, and nothing committed is ever lost
            row = self._execute(
                "SELECT max(id) AS id FROM events WHERE created_at < ? AND id < coalesce("
                "(SELECT min(event_id) FROM deliveries WHERE status = 'pending'), id + 1)",
                (iso(before),),
            ).fetchone()
            if row["id"] is None:
                return
            self._execute("DELETE FROM events WHERE id <= ?", (row["id"],))  # deliveries cascade
            self._execute(
                "INSERT INTO settings (name, value) VALUES (?, ?)"
                " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                (PRUNED_THROUGH, str(row["id"])),
            )
