"""Webhooks and their deliveries: the tables, the claims that share the work, retention."""

from .events import EVENT_ORDER_LOCK
from .people import iso, now_iso

SCHEMA = """
    CREATE TABLE webhooks (
        id {identity}, url TEXT NOT NULL, events TEXT, description TEXT,
        enabled INTEGER NOT NULL DEFAULT 1, secret TEXT NOT NULL, previous_secret TEXT,
        previous_until {real}, created_at TEXT NOT NULL
    );
    CREATE TABLE deliveries (
        webhook_id {reference} NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
        event_id {reference} NOT NULL REFERENCES events (id) ON DELETE CASCADE,
        status TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at {real} NOT NULL, lease_until {real}, lease_token TEXT,
        last_status_code INTEGER, last_error TEXT, delivered_at TEXT, finished_at {real},
        PRIMARY KEY (webhook_id, event_id)
    );
    CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
    CREATE INDEX deliveries_event ON deliveries (event_id);
    CREATE INDEX deliveries_finished ON deliveries (finished_at) WHERE status <> 'pending'
"""
# due: pending, of an enabled webhook, its time come, and nobody's lease running
DUE = (
    "FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE d.status = 'pending'"
    " AND w.enabled = 1 AND d.next_attempt_at <= ? AND (d.lease_until IS NULL OR d.lease_until < ?)"
)
RECORDED = "status attempts next_attempt_at status_code error delivered_at finished_at".split()
RECORDED += ["webhook_id", "id"]  # the event's
PRUNED_THROUGH = "events_pruned_through"  # settings: the highest event id removed by retention


def _not_in(ids: list[int]) -> str:
    return f" AND d.webhook_id NOT IN ({', '.join('?' * len(ids))})" if ids else ""


def _webhook(row: dict) -> dict:
    events = row["events"]
    events = events and events.strip(",").split(",")
    return {**row, "id": str(row["id"]), "events": events, "enabled": bool(row["enabled"])}


class WebhookStore:
    def insert_webhook(self, data: dict, secret: str, most: int) -> dict | None:
        """A new webhook (url, events, description), or None when `most` exist already."""
        with self.transaction():
            if self.ORDER_EVENTS:  # after the events being written: it takes every later one
                self._execute(self.ORDER_EVENTS, (EVENT_ORDER_LOCK,))
            if self._execute("SELECT count(*) AS n FROM webhooks").fetchone()["n"] >= most:
                return None
            events = data.get("events") and f",{','.join(data['events'])},"
            sql = "INSERT INTO webhooks (url, events, description, secret, created_at) VALUES "
            values = (data["url"], events, data.get("description"), secret, now_iso())
            return self.get_webhook(self._insert(sql + "(?, ?, ?, ?, ?)", values))

    def get_webhook(self, webhook_id: int) -> dict | None:
        return next(iter(self.list_webhooks(webhook_id)), None)

    def list_webhooks(self, webhook_id: int | None = None) -> list[dict]:
        where, params = ("", ()) if webhook_id is None else (" WHERE id = ?", (webhook_id,))
        sql = f"SELECT id, url, events, description, enabled, created_at FROM webhooks{where}"
        return [_webhook(row) for row in self._execute(sql + " ORDER BY id", params)]

    def update_webhook(self, webhook_id: int, changes: dict, now: float) -> dict | None:
        """Set url, events, description or enabled; enabling makes its pending ones due now."""
        if changes.get("events"):
            changes = {**changes, "events": f",{','.join(changes['events'])},"}
        if "enabled" in changes:
            changes = {**changes, "enabled": int(changes["enabled"])}
        with self.transaction():
            if changes:
                sets = ", ".join(f"{name} = ?" for name in changes)
                sql = f"UPDATE webhooks SET {sets} WHERE id = ?"
                self._execute(sql, (*changes.values(), webhook_id))
            if changes.get("enabled"):
                self._execute(
                    "UPDATE deliveries SET next_attempt_at = ? WHERE webhook_id = ?"
                    " AND status = 'pending' AND next_attempt_at > ?",
                    (now, webhook_id, now),
                )
            return self.get_webhook(webhook_id)

    def delete_webhook(self, webhook_id: int) -> bool:
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
        rows = self._execute(
            "SELECT d.event_id, e.type AS event_type, d.status, d.attempts, d.last_status_code,"
            " d.last_error, d.next_attempt_at, d.delivered_at FROM deliveries d"
            " JOIN events e ON e.id = d.event_id"
            " WHERE d.webhook_id = ? ORDER BY d.event_id DESC LIMIT ? OFFSET ?",
            (webhook_id, limit, offset),
        )
        for row in rows:
            row["event_id"] = str(row["event_id"])
            row["next_attempt_at"] = (
                row["status"] == "pending" and iso(row["next_attempt_at"]) or None
            )
        return rows

    def retry_delivery(self, webhook_id: int, event_id: int, now: float) -> bool:
        """Make a delivery (new or not) pending from the start, due now; False: no such event."""
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

    def claim_deliveries(self, token: str, now: float, lease: float, limit: int, skip: list[int]):
        """Lease up to `limit` due deliveries, none of webhooks `skip`, with what sending needs."""
        lock = f"{self.FOR_UPDATE} OF d SKIP LOCKED" if self.FOR_UPDATE else ""
        with self.transaction():
            claimed = self._execute(
                "UPDATE deliveries SET lease_until = ?, lease_token = ?"
                " WHERE (webhook_id, event_id) IN (SELECT d.webhook_id, d.event_id"
                f" {DUE}{_not_in(skip)} ORDER BY d.next_attempt_at LIMIT ?{lock})"
                " RETURNING event_id",
                (now + lease, token, now, now, *skip, limit),
            )
            return claimed and self._execute(
                "SELECT d.webhook_id, d.attempts, e.id, e.type, e.data, e.created_at, w.url,"
                " w.secret, w.previous_secret, w.previous_until FROM deliveries d"
                " JOIN events e ON e.id = d.event_id JOIN webhooks w ON w.id = d.webhook_id"
                " WHERE d.lease_token = ?",
                (token,),
            )

    def next_delivery_at(self, skip: list[int]) -> float | None:
        """When a delivery of an enabled webhook not in `skip` falls due or its claim ends."""
        return self._execute(
            "SELECT min(CASE WHEN d.lease_until > d.next_attempt_at THEN d.lease_until"
            " ELSE d.next_attempt_at END) AS due FROM deliveries d JOIN webhooks w"
            " ON w.id = d.webhook_id WHERE d.status = 'pending' AND w.enabled = 1" + _not_in(skip),
            tuple(skip),
        )[0]["due"]

    def record_delivery(self, token: str, out: dict) -> None:
        """Record an attempt if it is still leased to `token`; a 410 disables the webhook."""
        with self.transaction():
            mine = self._changed(
                "UPDATE deliveries SET status = ?, attempts = ?, next_attempt_at = ?,"
                " last_status_code = ?, last_error = ?, delivered_at = ?, finished_at = ?,"
                " lease_until = NULL, lease_token = NULL"
                " WHERE webhook_id = ? AND event_id = ? AND lease_token = ?",
                (*map(out.get, RECORDED), token),
            )
            if out["status_code"] == 410 and mine:  # a stale claim's 410 never undoes a re-enable
                self._execute("UPDATE webhooks SET enabled = 0 WHERE id = ?", (out["webhook_id"],))

    def delivery_backlog(self) -> dict:
        """Pending deliveries and the time of the oldest one's event, for /metrics."""
        return self._execute(
            "SELECT count(*) AS pending, min(e.created_at) AS oldest FROM deliveries d"
            " JOIN events e ON e.id = d.event_id WHERE d.status = 'pending'"
        ).fetchone()

    def prune_events(self, before: float) -> None:
        """Remove what is older than `before`, no event from the first one a delivery awaits."""
        with self.transaction():
            self._execute(
                "DELETE FROM deliveries WHERE status <> 'pending' AND finished_at < ?", (before,)
            )
            last = self._execute(
                "SELECT max(id) AS id FROM events WHERE created_at < ? AND id < coalesce("
                "(SELECT min(event_id) FROM deliveries WHERE status = 'pending'), id + 1)",
                (iso(before),),
            ).fetchone()["id"]
            if last is not None:
                self._execute("DELETE FROM events WHERE id <= ?", (last,))  # deliveries cascade
                self._execute(
                    "INSERT INTO settings (name, value) VALUES (?, ?)"
                    " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                    (PRUNED_THROUGH, str(last)),
                )
