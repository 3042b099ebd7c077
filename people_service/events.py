"""Events: what changed, recorded in the change's own transaction (SPEC 11c), and the wake-up
of whoever waits for new ones (the feed's streams, webhook delivery)."""

import logging
import os
import threading
import time
import weakref

from .errors import ServiceError

log = logging.getLogger("people_service")

TYPES = (
    "person.created",
    "person.updated",
    "person.deleted",
    "friendship.created",
    "friendship.deleted",
    "message.created",
)
# How often a process asks the database for the newest event while someone waits: other
# processes and instances commit events this process is not told about
POLL_SECONDS = 1.0
IDLE_POLLS = 30  # polls nobody waited for, after which the poller thread ends until needed


def record(store, event_type: str, data: dict, sender_id: str | None = None) -> dict:
    """Write one event inside the caller's open transaction; returns it as clients see it."""
    assert event_type in TYPES, event_type
    event = store.insert_event(event_type, data, sender_id)
    _recorded.pending = True  # committed()... once the caller's transaction has ended
    return event


class Watch:
    """The newest committed event id of one store, as this process knows it, and a condition
    to wait on until it grows. One per store and process; its poller thread runs one cheap
    query a second while anyone waits, however many wait."""

    def __init__(self, store):
        self.store = store
        self.pid = os.getpid()
        self.changed = threading.Condition()
        self.waiters = 0
        self.latest = 0
        self.poller: threading.Thread | None = None
        self.poll()

    def poll(self) -> int:
        """Ask the database for the newest event id; wakes the waiters when it grew."""
        try:
            latest = self.store.latest_event_id()
        except ServiceError as error:  # the database is away for now: ask again later
            log.warning("cannot read the newest event: %s", error)
            return self.latest
        with self.changed:
            if latest > self.latest:
                self.latest = latest
                self.changed.notify_all()
        return latest

    def wait(self, seen: int, timeout: float) -> bool:
        """Wait until an event newer than `seen` is committed (True), the timeout passes or
        this process stops serving (False)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            self.waiters += 1
            try:
                if self.poller is None:
                    self.poller = threading.Thread(target=self._run, name="events", daemon=True)
                    self.poller.start()
                while self.latest <= seen and not _closing.is_set():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self.changed.wait(left)
                return self.latest > seen
            finally:
                self.waiters -= 1

    def _run(self) -> None:
        idle = 0
        while True:
            time.sleep(POLL_SECONDS)
            with self.changed:
                idle = 0 if self.waiters else idle + 1
                if idle > IDLE_POLLS:  # nobody has waited for a while: the thread ends
                    self.poller = None
                    return
            if not idle:  # nobody waits: no query
                self.poll()


_lock = threading.Lock()
_watches: "weakref.WeakKeyDictionary[object, Watch]" = weakref.WeakKeyDictionary()
_closing = threading.Event()
_recorded = threading.local()


def watch(store) -> Watch:
    """The watch of `store` in this process, made on first use (never one from before a fork)."""
    found = _watches.get(store)
    if found is None or found.pid != os.getpid():
        with _lock:
            found = _watches.get(store)
            if found is None or found.pid != os.getpid():
                found = _watches[store] = Watch(store)
    return found


def wait_for_new(store, seen: int, timeout: float) -> bool:
    """Block until an event with an id above `seen` is committed (in any process or instance),
    at most `timeout` seconds; False on timeout or when the process stops serving."""
    return watch(store).wait(seen, timeout)


def committed(store) -> bool:
    """Call after a transaction ended: if it recorded events, wake this process's waiters now
    rather than at the next poll; whether it had."""
    if not getattr(_recorded, "pending", False):
        return False
    _recorded.pending = False
    found = _watches.get(store)
    if found is not None and found.pid == os.getpid() and found.waiters:
        found.poll()
    return True


def closing() -> bool:
    """Whether this process is stopping: streams end, waiters stop waiting."""
    return _closing.is_set()


def close_streams() -> None:
    """The server stops: end every stream of this process at once (clients resume)."""
    _closing.set()
    for found in list(_watches.values()):
        with found.changed:
            found.changed.notify_all()


def _after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # another thread may have held the parent's at the fork
    _closing.clear()


os.register_at_fork(after_in_child=_after_fork)
