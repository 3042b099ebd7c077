"""Webhook delivery: a thread per process claims due deliveries, signs, posts, records."""

import json
import logging
import os
import re
import socket
import ssl
import threading
import time
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from urllib.parse import SplitResult

from prometheus_client import Counter, Gauge
from standardwebhooks.webhooks import Webhook

from .config import retry_schedule
from .errors import ServiceError
from .store import iso, open_store
from .store.events import event_out
from .webhooks import target

log = logging.getLogger("people_service.delivery")

POLL_SECONDS = 1.0  # an idle worker looks for due deliveries this often (one query)
PER_HOST = 4  # attempts one process sends to one receiver at once
SENDERS = 64  # attempts sent at once by one process; a claim takes at most this many
MAX_ANSWER = 4096  # bytes of a receiver's answer read at most: its status line is enough
PRUNE_SECONDS = 3600  # how often a worker removes what retention no longer keeps
STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([1-5][0-9][0-9])[ \r]")
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


def _within(sock: socket.socket, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("no answer within WEBHOOK_TIMEOUT")
    sock.settimeout(left)


def post(url: SplitResult, address: str, body: bytes, headers: dict, timeout: float) -> int:
    """POST `body` to `url` at its checked `address` (TLS for its name) within `timeout` seconds
    all told; the answer's status. Reads a few KiB at most, follows nothing; raises OSError."""
    deadline = time.monotonic() + timeout
    port = url.port or (443 if url.scheme == "https" else 80)
    sock = socket.create_connection((address, port), timeout=timeout)
    try:
        if url.scheme == "https":
            _within(sock, deadline)
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=url.hostname)
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        head = [f"POST {path} HTTP/1.1", f"Host: {url.netloc}"]  # no credentials: checked
        head += [f"{name}: {value}" for name, value in headers.items()]
        head += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
        _within(sock, deadline)
        sock.sendall("\r\n".join(head).encode("ascii") + body)
        answer = b""
        while b"\n" not in answer and len(answer) < MAX_ANSWER:
            _within(sock, deadline)
            chunk = sock.recv(MAX_ANSWER - len(answer))
            if not chunk:
                break
            answer += chunk
    finally:
        sock.close()
    match = STATUS_LINE.match(answer)
    if match is None:
        raise ConnectionError("the answer is not HTTP/1.x")
    return int(match.group(1))


class Deliverer:
    """Delivers the due webhooks of one database from this process, in a thread of its own."""

    def __init__(self, config: dict, store=None, *, clock=time.time):
        self.config, self.clock = config, clock
        self.timeout = config["WEBHOOK_TIMEOUT"]
        self.schedule = retry_schedule(config["WEBHOOK_RETRY_SCHEDULE"])
        # a claim outlives its attempt, yet ends soon after: a dead process's work goes on
        self.lease = self.timeout + min(15, self.timeout + 2)
        self.pid = os.getpid()
        self.wakeup, self.stopping = threading.Event(), threading.Event()
        self.pruned_at, self.full = 0.0, False
        self.paused: str | None = None  # why the database did not answer, while it does not
        self.thread: threading.Thread | None = None
        self._store = store
        self._threads: ThreadPoolExecutor | None = None  # the attempts and their look-ups
        self._receivers: dict[tuple, threading.Semaphore] = {}

    @property
    def store(self):
        if self._store is None:  # opened by the process and thread that use it
            self._store = open_store(self.config["DATABASE"])
        return self._store

    def start(self) -> "Deliverer":
        self.thread = threading.Thread(target=self.run, name="webhook-delivery", daemon=True)
        self.thread.start()
        return self

    def run(self) -> None:
        """Deliver until stop(): at once while work is due, else after a wake() or a second."""
        while not self.stopping.is_set():
            try:
                busy = self.round()
                self.paused = None
            except ServiceError as exc:  # the database cannot answer now: said once, retried
                if self.paused != exc.detail:
                    log.warning("webhook delivery waits for the database: %s", exc.detail)
                self.paused, busy = exc.detail, 0
            except Exception:  # a bug: the next round retries
                log.exception("webhook delivery failed; retrying")
                busy = 0
            if not busy:
                self.wakeup.wait(POLL_SECONDS)
                self.wakeup.clear()

    def stop(self, wait: float = 0) -> None:
        """Claim nothing more; wait up to `wait` seconds for the attempts under way to be
        recorded (an attempt cut short by the exit is sent again when its claim ends)."""
        self.stopping.set()
        self.wakeup.set()
        thread = self.thread
        if thread is not None and thread is not threading.current_thread() and wait:
            thread.join(wait)
        if thread is None or not thread.is_alive():
            if self._threads is not None:
                self._threads.shutdown(wait=False)
            if self._store is not None and self.pid == os.getpid():
                self._store.close()

    def wake(self) -> None:  # TEMP adapter until the events rebuild lands
        self.wakeup.set()

    def close(self, wait: float = 0) -> None:  # TEMP adapter
        self.stop(wait)

    def round(self) -> int:
        """One look for due work: claim, send at once, record. How many were attempted."""
        now = self.clock()
        if now - self.pruned_at >= PRUNE_SECONDS:
            self.prune(now)
        # the cheap look first, unless the last claim was full (more is surely due)
        if not self.full and not self.store.delivery_due(now):
            return 0
        token = uuid.uuid4().hex
        claimed = self.store.claim_deliveries(token, now, self.lease, SENDERS)
        self.full = len(claimed) == SENDERS
        if not claimed:
            return 0
        if self._threads is None:  # as many again for the attempts' look-ups
            self._threads = ThreadPoolExecutor(2 * SENDERS, thread_name_prefix="webhook")
        outcomes = list(self._threads.map(self.attempt, claimed))
        self.store.record_deliveries(token, outcomes, self.clock())
        for outcome in outcomes:
            if outcome.get("sent", True):
                DELIVERIES.labels(OUTCOMES[outcome["status"]]).inc()
        return len(claimed)

    def attempt(self, row: dict) -> dict:
        """Send one claimed delivery; what to record of it."""
        status_code, error = None, None
        started = time.monotonic()
        try:
            # getaddrinfo has no timeout of its own: a hung resolver costs a thread, never
            # the claim (which ends 15 s after the attempt's time at the latest)
            looked_up = self._threads.submit(
                target, row["url"], self.config["WEBHOOK_ALLOW_PRIVATE"]
            )
            try:
                to = looked_up.result(timeout=self.timeout)
            except TimeoutError:
                raise TimeoutError("the host's name did not resolve in time") from None
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
            # a few attempts at a time per receiver: a burst of connections would overflow its
            # listen queue, and each dropped connection waits a second for its next SYN
            # WEBHOOK_TIMEOUT counts the look-up and the sending, not the wait for a turn; a
            # turn comes early enough that the sending ends within the claim
            spent = time.monotonic() - started
            gate = self._receivers.setdefault((to[1], to[0].port), threading.Semaphore(PER_HOST))
            turn_by = started + self.lease - self.timeout - 1
            if not gate.acquire(timeout=max(0, turn_by - time.monotonic())):
                # never sent: back in the queue as it was, due now; no attempt is spent on
                # our own queue (a slow receiver would otherwise fail deliveries it never saw)
                return {
                    **row,
                    "status": "pending",
                    "status_code": row["last_status_code"],
                    "error": row["last_error"],
                    "next_attempt_at": self.clock(),
                    "sent": False,
                }
            try:
                status_code = post(*to, body.encode(), headers, max(0.1, self.timeout - spent))
            finally:
                gate.release()
            if not 200 <= status_code < 300:
                followed = " (redirects are not followed)" if 300 <= status_code < 400 else ""
                error = f"answered {status_code}{followed}"
        except ValueError as exc:  # the address rules
            error = f"refused: {exc}"
        except OSError as exc:  # ssl.SSLError too
            error = (str(exc) or type(exc).__name__)[:200]
        attempts, now = row["attempts"] + 1, self.clock()
        outcome = {**row, "attempts": attempts, "status_code": status_code, "error": error}
        if error is None:
            return {**outcome, "status": "succeeded", "next_attempt_at": now}
        if attempts > len(self.schedule):
            return {**outcome, "status": "failed", "next_attempt_at": now}
        delay = self.schedule[attempts - 1]
        return {**outcome, "status": "pending", "next_attempt_at": now + delay}

    def prune(self, now: float) -> None:
        """Retention: events and finished deliveries older than EVENT_RETENTION_DAYS go."""
        before = now - self.config["EVENT_RETENTION_DAYS"] * 86_400
        self.store.prune_events(iso(before), before)
        self.pruned_at = now


# The worker of each app in this process (a fork's child starts its own: the pid differs)
_workers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def ensure(owner, config: dict) -> Deliverer:
    """The running worker of `owner` (an app's services) in this process, started if need be;
    it stops when `owner` is collected or stop_for(owner) is called."""
    with _lock:
        worker = _workers.get(owner)
        if worker is None or worker.pid != os.getpid():
            worker = _workers[owner] = Deliverer(config).start()
            weakref.finalize(owner, worker.stop)
    return worker


def stop_for(owner, wait: float = 0) -> None:
    """Stop the worker of `owner` in this process, if it runs."""
    with _lock:
        worker = _workers.pop(owner, None)
    if worker is not None and worker.pid == os.getpid():
        worker.stop(wait)


def wake() -> None:
    """A change was committed in this process: its workers look for work now (the seam for
    the in-process event notification; without a call, they find it within POLL_SECONDS)."""
    for worker in list(_workers.values()):
        worker.wakeup.set()


def _after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # another thread may have held the parent's at the fork


os.register_at_fork(after_in_child=_after_fork)


def observe(store) -> None:
    """Set the backlog gauges from the database, for a scrape of /metrics."""
    backlog = store.delivery_backlog()
    PENDING.set(backlog["pending"])
    oldest = backlog["oldest"] and datetime.fromisoformat(backlog["oldest"]).timestamp()
    OLDEST.set(max(0.0, time.time() - oldest) if oldest else 0)
