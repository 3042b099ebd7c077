"""Events: what changed, recorded in the change's own transaction (SPEC 11c)."""

import threading

PERSON = "The person as GET /person/{id} answers it, after the change."
FRIENDSHIP = '{"person_id": "1", "friend_id": "2"}'  # the path's id, and the other
TYPES = {  # each type and its `data`
    "person.created": PERSON,
    "person.updated": PERSON,
    "person.deleted": '{"id": "17"}',
    "friendship.created": FRIENDSHIP,
    "friendship.deleted": FRIENDSHIP,
    "message.created": "The message as POST /message answers it.",
}
UNKNOWN_TYPE = f"Unknown event type. Use {', '.join(TYPES)}."

_recorded = threading.local()  # whether this thread's transaction recorded events


def record(store, event_type: str, data: dict, sender_id: str | None = None) -> dict:
    """Write one event inside the caller's open transaction; returns it as clients see it."""
    assert event_type in TYPES, event_type
    event = store.insert_event(event_type, data, sender_id)
    _recorded.pending = True
    return event


def made_due() -> None:
    """The caller's transaction made deliveries due without an event (a retry, a webhook
    enabled): committed() says so, so that delivery looks at once."""
    _recorded.pending = True


def committed(store) -> bool:
    """Whether this thread's transaction recorded events since the last call (call it once the
    transaction ended, to wake the process's streams and webhook delivery)."""
    pending = getattr(_recorded, "pending", False)
    _recorded.pending = False
    return pending
