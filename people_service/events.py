"""Events: what changed, recorded in the change's own transaction (SPEC 11c), and the wake-up
of whoever waits for new ones in this process (the feed's streams)."""

import os
import threading

TYPES = (
    "person.created",
    "person.updated",
    "person.deleted",
    "friendship.created",
    "friendship.deleted",
    "message.created",
)

_recorded = threading.local()
_changed = threading.Condition()
_commits = 0  # transactions with events this process committed: what a waiter compares
_closing = threading.Event()


def record(store, event_type: str, data: dict, sender_id: str | None = None) -> dict:
    """Write one event inside the caller's open transaction; returns it as clients see it."""
    assert event_type in TYPES, event_type
    event = store.insert_event(event_type, data, sender_id)
    _recorded.pending = True  # committed()... once the caller's transaction has ended
    return event


def committed() -> bool:
    """Call after a transaction ended: if it recorded events, wake this process's waiters now
    (other processes' events are found by polling); whether it had."""
    global _commits
    if not getattr(_recorded, "pending", False):
        return False
    _recorded.pending = False
    with _changed:
        _commits += 1
        _changed.notify_all()
    return True


def commits() -> int:
    """A mark to pass to wait(): read it before looking for new events."""
    return _commits


def wait(seen: int, timeout: float) -> None:
    """Block until this process commits events after the mark `seen`, it stops serving, or
    `timeout` seconds pass."""
    with _changed:
        _changed.wait_for(lambda: _commits > seen or _closing.is_set(), timeout)


def closing() -> bool:
    """Whether this process is stopping: streams end, waiters stop waiting."""
    return _closing.is_set()


def close_streams() -> None:
    """The server stops: end every stream of this process at once (clients resume)."""
    _closing.set()
    with _changed:
        _changed.notify_all()


def _after_fork() -> None:
    global _changed
    _changed = threading.Condition()  # another thread may have held the parent's at the fork
    _closing.clear()


os.register_at_fork(after_in_child=_after_fork)
