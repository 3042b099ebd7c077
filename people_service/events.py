"""Events: what changed, recorded in the change's own transaction (SPEC 11c)."""

TYPES = (
    "person.created",
    "person.updated",
    "person.deleted",
    "friendship.created",
    "friendship.deleted",
    "message.created",
)


def record(store, event_type: str, data: dict, sender_id: str | None = None) -> dict:
    """Write one event inside the caller's open transaction; returns it as clients see it."""
    assert event_type in TYPES, event_type
    return store.insert_event(event_type, data, sender_id)
