"""Webhook delivery: a thread per process claims due deliveries as senders come free; each
attempt is signed, posted and recorded as it ends."""

import functools
import http.client
import json
import logging
import socket
import ssl
import threading
import time
import uuid
from collections import Counter as Tally
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from urllib.parse import SplitResult

from prometheus_client import Counter, Gauge
from standardwebhooks.webhooks import Webhook

from .config import retry_schedule
from .errors import ServiceError
from .store.events import event_out
from .webhooks import target

log = logging.getLogger("people_service.delivery")

SENDERS = 32  # attempts one process sends at once
PER_RECEIVER = 4  # attempts one process sends to one webhook at once; the rest wait, unspent
PRUNE_SECONDS = 3600  # how often a worker removes what retention no longer keeps
PAUSE_SECONDS = 5  # how long a worker waits for a database that did not answer
OUTCOMES = {"succeeded": "succeeded", "pending": "retrying", "failed": "failed"}  # metric labels

DELIVERIES = Counter(
    "people_service_webhook_deliveries_total",
    "Webhook delivery attempts, by outcome (succeeded, retrying, failed).",
    ["outcome"],
)
PENDING = Gauge(
    "people_service_webhook_deliveries_pending",
    "Deliveries waiting for an attempt (also those of disabled webhooks).",
    multiprocess_mode="mostrecent",
)
OLDEST = Gauge(
    "people_service_webhook_oldest_pending_seconds",
    "Age of the event of the oldest pending delivery (0 with none).",
    multiprocess_mode="mostrecent",
)


def post(url: SplitResult, address: str, body: bytes, headers: dict, timeout: float, tls) -> int:
    """POST `body` to `url` at its checked `address` (TLS verified for the URL's host); the
    answer's status. Follows nothing; raises OSError or http.client.HTTPException."""
    port = url.port or (443 if url.scheme == "https" else 80)
    sock = socket.create_connection((address, port), timeout=timeout)
    if url.scheme == "https":
        sock = tls.wrap_socket(sock, server_hostname=url.hostname)
    conn = http.client.HTTPConnection(url.hostname, port, timeout=timeout)
    conn.sock = sock  # connected to the address checked: no second resolution
    try:
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        conn.request("POST", path, body, {"Host": url.netloc, **headers})
        return conn.getresponse().status
    finally:
        conn.close()


class Deliverer:
    """Delivers the due webhooks of `store` from this process. It sleeps while nothing is due:
    wake() after a commit, a timer for the next retry or claim that ends."""

    def __init__(self, config: dict, store, *, clock=time.time):
        self.config, self.store, self.clock = config, store, clock
        self.timeout = config["WEBHOOK_TIMEOUT"]
        self.schedule = retry_schedule(config["WEBHOOK_RETRY_SCHEDULE"])
        # a claim outlives its attempt, yet ends soon after: a dead process's work goes on
        self.lease = self.timeout + min(15, self.timeout + 2)
        self.changed = threading.Condition()
        self.flight: Tally = Tally()  # attempts under way, by webhook
        self.woken = self.closing = False
        self.due: float | None = None  # when a delivery falls due next, as far as known
        self.pruned_at = 0.0
        self.thread: threading.Thread | None = None
        self.senders = ThreadPoolExecutor(SENDERS, thread_name_prefix="webhook")

    @functools.cached_property
    def tls(self) -> ssl.SSLContext:
        return ssl.create_default_context()

    def start(self) -> "Deliverer":
        self.thread = threading.Thread(target=self.run, name="webhook-delivery", daemon=True)
        self.thread.start()
        return self

    def wake(self) -> None:
        """A commit happened in this process: look for due deliveries now."""
        with self.changed:
            self.woken = True
            self.changed.notify_all()

    def close(self, wait: float = 2.0) -> None:
        """Claim nothing more; wait up to `wait` seconds for the attempts under way to be
        recorded (one cut short is sent again when its claim ends)."""
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
        while self._next():
            try:
                self.round()
                paused = None
            except ServiceError as exc:  # the database cannot answer now: said once
                if paused != exc.detail:
                    log.warning("webhook delivery waits for the database: %s", exc.detail)
                paused, self.due = exc.detail, self.clock() + PAUSE_SECONDS
            except Exception:  # a bug: look again later
                log.exception("webhook delivery failed; retrying")
                self.due = self.clock() + PAUSE_SECONDS

    def _next(self) -> bool:
        """Wait until a sender is free and work may be due; False once closing."""
        with self.changed:
            while not self.closing:
                free = self.flight.total() < SENDERS
                now = self.clock()
                when = min(self.due or now + PRUNE_SECONDS, self.pruned_at + PRUNE_SECONDS)
                if free and (self.woken or when <= now):
                    self.woken = False
                    return True
                self.changed.wait(when - now if free else None)
            return False

    def round(self) -> None:
        """Claim as many due deliveries as there are free senders, hand each to one, and learn
        when the next falls due."""
        now = self.clock()
        if now - self.pruned_at >= PRUNE_SECONDS:
            self.prune(now)
        with self.changed:
            capped = [hook for hook, count in self.flight.items() if count >= PER_RECEIVER]
            free = SENDERS - self.flight.total()
            self.due = None  # what senders record from now on counts (see send)
        due = self.store.next_delivery_at(capped)  # the cheap look first: a read
        if due is not None and due <= now:
            token, extra = uuid.uuid4().hex, []
            claimed = self.store.claim_deliveries(token, now, self.lease, free, capped)
            with self.changed:
                for row in claimed:
                    hook = row["webhook_id"]
                    if self.closing or self.flight[hook] >= PER_RECEIVER:
                        extra.append(row)
                    else:
                        self.flight[hook] += 1
                        self.senders.submit(self.send, row, token)
                capped = [hook for hook, count in self.flight.items() if count >= PER_RECEIVER]
            if extra:  # back as they were, unspent: their webhook's turn comes when one ends
                self.store.release_deliveries(token, extra)
            due = now if len(claimed) == free else self.store.next_delivery_at(capped)
        with self.changed:
            self.due = min((x for x in (due, self.due) if x is not None), default=None)

    def send(self, row: dict, token: str) -> None:
        """Send one claimed delivery and record its outcome (a sender's work)."""
        outcome = None
        try:
            outcome = self.attempt(row)
            self.store.record_delivery(token, outcome, self.clock())
            DELIVERIES.labels(OUTCOMES[outcome["status"]]).inc()
            if outcome["status"] == "failed":
                log.warning(
                    "webhook %s gave up on event %s after %s attempts: %s",
                    row["webhook_id"],
                    row["id"],
                    outcome["attempts"],
                    outcome["error"],
                )
        except Exception:  # not recorded: sent again when its claim ends
            log.exception("webhook %s: event %s not recorded", row["webhook_id"], row["id"])
            outcome = None
        finally:
            with self.changed:
                hook = row["webhook_id"]
                if outcome is None or self.flight[hook] >= PER_RECEIVER:
                    self.woken = True  # its waiting deliveries may go now
                self.flight[hook] -= 1
                if not self.flight[hook]:
                    del self.flight[hook]
                if outcome is not None and outcome["status"] == "pending":
                    retry = outcome["next_attempt_at"]
                    self.due = retry if self.due is None else min(self.due, retry)
                self.changed.notify_all()

    def attempt(self, row: dict) -> dict:
        """Send one claimed delivery; what to record of it."""
        status_code, error = None, None
        try:
            to = target(row["url"], self.config["WEBHOOK_ALLOW_PRIVATE"])
            if to is None:
                raise ConnectionError("the host does not resolve")
            body, msg_id = json.dumps(event_out(row), separators=(",", ":")), str(row["id"])
            stamp = datetime.now(UTC)  # the receiver compares it with its own clock
            keys = [row["secret"]]
            if row["previous_secret"] and (row["previous_until"] or 0) > self.clock():
                keys.append(row["previous_secret"])
            headers = {
                "Content-Type": "application/json",
                "User-Agent": "people-service-webhooks",
                "webhook-id": msg_id,
                "webhook-timestamp": str(int(stamp.timestamp())),
                "webhook-signature": " ".join(Webhook(k).sign(msg_id, stamp, body) for k in keys),
            }
            status_code = post(*to, body.encode(), headers, self.timeout, self.tls)
            if not 200 <= status_code < 300:
                followed = " (redirects are not followed)" if 300 <= status_code < 400 else ""
                error = f"answered {status_code}{followed}"
        except ValueError as exc:  # the address rules
            error = f"refused: {exc}"
        except (OSError, http.client.HTTPException) as exc:  # ssl.SSLError, timeouts too
            error = (str(exc) or type(exc).__name__)[:200]
        attempts, now = row["attempts"] + 1, self.clock()
        outcome = {**row, "attempts": attempts, "status_code": status_code, "error": error}
        if error is None:
            return {**outcome, "status": "succeeded", "next_attempt_at": now}
        if attempts > len(self.schedule):
            return {**outcome, "status": "failed", "next_attempt_at": now}
        later = now + self.schedule[attempts - 1]
        return {**outcome, "status": "pending", "next_attempt_at": later}

    def prune(self, now: float) -> None:
        """Retention: events and finished deliveries older than EVENT_RETENTION_DAYS go."""
        self.pruned_at = now  # tried: again in an hour, whatever happens
        self.store.prune_events(now - self.config["EVENT_RETENTION_DAYS"] * 86_400)


def observe(store) -> None:
    """Set the backlog gauges from the database, for a scrape of /metrics."""
    backlog = store.delivery_backlog()
    PENDING.set(backlog["pending"])
    oldest = backlog["oldest"] and datetime.fromisoformat(backlog["oldest"]).timestamp()
    OLDEST.set(max(0.0, time.time() - oldest) if oldest else 0)
