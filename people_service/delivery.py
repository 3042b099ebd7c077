"""Webhook delivery: claims due deliveries as senders come free, posts and records each."""

import http.client
import json
import logging
import math
import socket
import ssl
import threading
import time
import uuid
from collections import Counter as Tally
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from prometheus_client import Counter, Gauge
from standardwebhooks.webhooks import Webhook

from .config import retry_schedule
from .store import iso
from .store.events import event_out
from .webhooks import target

log = logging.getLogger("people_service.delivery")
SENDERS, PER_RECEIVER = 32, 4  # attempts at once: in all, and to one webhook (claimed at once)
PRUNE_SECONDS, PAUSE_SECONDS = 3600, 5  # retention's period; a failed round's pause
OUTCOMES = {"succeeded": "succeeded", "pending": "retrying", "failed": "failed"}  # metric labels
LAST = {"multiprocess_mode": "mostrecent"}
DELIVERIES = Counter("people_service_webhook_deliveries", "Delivery attempts.", ["outcome"])
PENDING = Gauge("people_service_webhook_deliveries_pending", "Deliveries waiting.", **LAST)
OLDEST = Gauge("people_service_webhook_oldest_pending_seconds", "The oldest one's age.", **LAST)


class Deliverer:
    """This process's delivery thread: it sleeps until wake() or the next known due time."""

    def __init__(self, config: dict, store, *, clock=time.time):
        self.config, self.store, self.clock = config, store, clock
        self.timeout = config["WEBHOOK_TIMEOUT"]
        self.schedule = retry_schedule(config["WEBHOOK_RETRY_SCHEDULE"])
        self.lease = self.timeout + min(15, self.timeout + 2)  # a dead process's claims end soon
        self.changed, self.flight = threading.Condition(), Tally()  # attempts under way, by webhook
        self.woken = self.closing = False
        self.due, self.pruned_at, self.thread = math.inf, 0.0, None  # due: the next known
        self.senders = ThreadPoolExecutor(SENDERS, thread_name_prefix="webhook")
        self.tls = ssl.create_default_context()

    def start(self) -> "Deliverer":
        self.thread = threading.Thread(target=self.run, name="webhook-delivery", daemon=True)
        self.thread.start()
        return self

    def wake(self) -> None:
        with self.changed:
            self.woken = True
            self.changed.notify_all()

    def close(self, wait: float = 2.0) -> None:
        """Claim nothing more; wait up to `wait` seconds for the attempts under way."""
        deadline = time.monotonic() + wait
        with self.changed:
            self.closing = True
            self.changed.notify_all()
            self.changed.wait_for(lambda: not self.flight, wait)
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(max(0, deadline - time.monotonic()))  # its query ends first
        self.senders.shutdown(wait=False)

    def run(self) -> None:
        paused = None
        while self._wait():
            try:
                self._round()
                paused = None
            except Exception as exc:
                detail = getattr(exc, "detail", None)  # a ServiceError: the database cannot answer
                if detail is None:
                    log.exception("webhook delivery failed; retrying")
                elif detail != paused:  # said once
                    log.warning("webhook delivery waits for the database: %s", detail)
                paused, self.due = detail, self.clock() + PAUSE_SECONDS

    def _wait(self) -> bool:
        """Until a sender is free and work may be due; False once closing."""
        with self.changed:
            while not self.closing:
                free, now = self.flight.total() < SENDERS, self.clock()
                when = min(self.due, self.pruned_at + PRUNE_SECONDS)
                if free and (self.woken or when <= now):
                    self.woken = False
                    return True
                self.changed.wait(when - now if free else None)
            return False

    def _round(self) -> None:
        """Claim due deliveries of webhooks with none under way, and learn the next due time."""
        now = self.clock()
        if now - self.pruned_at >= PRUNE_SECONDS:
            self.pruned_at = now  # tried: again in an hour, whatever happens
            self.prune(now)
        with self.changed:
            busy, free = list(self.flight), min(PER_RECEIVER, SENDERS - self.flight.total())
            self.due = math.inf
        due = self.store.next_delivery_at(busy) or math.inf  # the cheap look first: a read
        if due <= now and not self.closing:
            token = uuid.uuid4().hex
            claimed = self.store.claim_deliveries(token, now, self.lease, free, busy)
            with self.changed:
                for row in claimed:
                    self.flight[row["webhook_id"]] += 1
                    self.senders.submit(self._send, row, token)
                busy = list(self.flight)
            due = now if len(claimed) == free else self.store.next_delivery_at(busy) or math.inf
        with self.changed:  # senders may have set an earlier one meanwhile
            self.due = min(due, self.due)

    def _send(self, row: dict, token: str) -> None:
        """Send one claimed delivery and record its outcome (a sender's work)."""
        hook, out = row["webhook_id"], None
        try:
            out = self.attempt(row)
            self.store.record_delivery(token, out)
            DELIVERIES.labels(OUTCOMES[out["status"]]).inc()
            if out["status"] == "failed":
                log.warning("webhook %s gave up on event %s: %s", hook, row["id"], out["error"])
        except Exception:  # not recorded: sent again when its claim ends
            log.exception("webhook %s: event %s not recorded", hook, row["id"])
            out = None
        with self.changed:
            self.flight -= Tally([hook])
            self.woken |= out is None or hook not in self.flight  # its waiting ones may go now
            if out is not None and out["status"] == "pending":
                self.due = min(self.due, out["next_attempt_at"])
            self.changed.notify_all()

    def attempt(self, row: dict) -> dict:
        """Sign and post one claimed delivery to the address checked now; what to record."""
        code, error, now = None, None, self.clock()
        try:
            to = target(row["url"], self.config["WEBHOOK_ALLOW_PRIVATE"])
            if to is None:
                raise ConnectionError("the host does not resolve")
            (url, address), msg_id = to, str(row["id"])
            body, stamp = json.dumps(event_out(row), separators=(",", ":")), datetime.now(UTC)
            keys = [row["secret"]] + [row["previous_secret"]] * ((row["previous_until"] or 0) > now)
            headers = {
                "Host": url.netloc,
                "Content-Type": "application/json",
                "webhook-id": msg_id,
                "webhook-timestamp": str(int(stamp.timestamp())),
                "webhook-signature": " ".join(Webhook(k).sign(msg_id, stamp, body) for k in keys),
            }
            port = url.port or (443 if url.scheme == "https" else 80)
            conn = http.client.HTTPConnection(url.hostname, port, timeout=self.timeout)
            conn.sock = socket.create_connection((address, port), self.timeout)  # no 2nd lookup
            if url.scheme == "https":
                conn.sock = self.tls.wrap_socket(conn.sock, server_hostname=url.hostname)
            try:
                path = (url.path or "/") + (f"?{url.query}" if url.query else "")
                conn.request("POST", path, body.encode(), headers)
                code = conn.getresponse().status
            finally:
                conn.close()
            if not 200 <= code < 300:
                error = f"answered {code}" + (" (redirects are not followed)" * (code // 100 == 3))
        except ValueError as exc:  # the address rules
            error = f"refused: {exc}"
        except (OSError, http.client.HTTPException) as exc:  # ssl.SSLError, timeouts too
            error = (str(exc) or type(exc).__name__)[:200]
        attempts, now = row["attempts"] + 1, self.clock()
        status = "pending" if attempts <= len(self.schedule) else "failed"
        status = "succeeded" if error is None else status
        out = {**row, "attempts": attempts, "status_code": code, "error": error, "status": status}
        out["next_attempt_at"] = now + self.schedule[attempts - 1] if status == "pending" else now
        out["finished_at"] = None if status == "pending" else now
        out["delivered_at"] = iso(time.time()) if status == "succeeded" else None
        return out

    def prune(self, now: float) -> None:
        """Retention: events and finished deliveries older than EVENT_RETENTION_DAYS go."""
        self.store.prune_events(now - self.config["EVENT_RETENTION_DAYS"] * 86_400)


def observe(store) -> None:
    """Set the backlog gauges from the database, for a scrape of /metrics."""
    backlog = store.delivery_backlog()
    oldest = backlog["oldest"] and datetime.fromisoformat(backlog["oldest"]).timestamp()
    PENDING.set(backlog["pending"])
    OLDEST.set(max(0.0, time.time() - oldest) if oldest else 0)
