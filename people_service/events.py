"""Events: what changed, recorded in the change's own transaction (SPEC 11c)."""

import threading

PERSON = "The person as GET /person/{id} answers it, after the change."
FRIENDSHIP = '{"person_id": "1", "friend_id": "2"}: the path\'s id, and the other.'
TYPES = {  # each type and its `data`
    "person.created": PERSON,
    "person.updated": PERSON,
    "person.deleted": '{"id": "17"}',
    "friendship.created": FRIENDSHIP,
    "friendship.deleted": FRIENDSHIP,
    "message.created": "The message as POST /message answers it.",
}
_pending = threading.local()  # whether this thread's transaction made deliveries due


def record(store, event_type: str, data: dict, sender_id: str | None = None) -> dict:
    """Write one event inside the caller's open transaction; returns it as clients see it."""
    assert event_type in TYPES, event_type
    event = store.insert_event(event_type, data, sender_id)
    made_due()
    return event


def made_due() -> None:
    _pending.value = True


def committed(store) -> bool:
    """Whether this thread's ended transaction made deliveries due (events, a retry, an enable)."""
    pending, _pending.value = getattr(_pending, "value", False), False
    return pending
