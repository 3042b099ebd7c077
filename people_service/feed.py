"""The event feed: pages of events after a cursor, and the same as a server-sent event stream."""

import json
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator

from marshmallow import EXCLUDE, Schema, ValidationError, fields

from . import events, schemas
from .errors import InvalidArgument, ServiceError
from .service import Viewer

# an event id, or 0 (before the first); at most PostgreSQL's bigint
CURSOR_PATTERN = r"^(0|[1-9][0-9]{0,17})$"
CURSOR = schemas.full_match(CURSOR_PATTERN, "Must be an event id: a whole number, 0 or more.")
TYPE = "(" + "|".join(re.escape(name) for name in events.TYPES) + ")"
TYPES_PATTERN = f"^{TYPE}(,{TYPE})*$"
TYPES_RULE = f"Use a comma list of {', '.join(events.TYPES)}."
BATCH = 100  # events a stream reads per query
BACKLOG = 1000  # already written events a stream from a cursor sends before it ends
RETRY_MS = 1000  # the `retry:` hint a stream ends with: reconnect a second later
# an idle stream looks for other processes' events and checks its caller: one query a second
POLL_SECONDS, CHECK_SECONDS = 1.25, 5.0


class FeedQuerySchema(Schema):
    class Meta:
        unknown = EXCLUDE

    after = fields.String(
        validate=CURSOR,
        metadata={
            "description": "Events with a larger id than this one (the last id you saw); "
            "without it, from the oldest event kept. The stream starts after Last-Event-ID, "
            "else after this, else from now.",
            "example": "1234",
            "pattern": CURSOR_PATTERN,  # as written: `full_match` ends it with Python's \Z
        },
    )
    limit = schemas.Count(1, 1000, load_default=100)
    type = fields.String(
        validate=schemas.full_match(TYPES_PATTERN, f"Unknown event type. {TYPES_RULE}"),
        metadata={
            "pattern": TYPES_PATTERN,
            "description": f"Only events of these types. {TYPES_RULE}",
            "example": "person.created,person.deleted",
        },
    )


feed_query_schema = FeedQuerySchema()


class Pruned(ServiceError):
    """`after` is older than the events kept: some event after it was removed."""

    default_detail = (
        "Events after this cursor were removed (EVENT_RETENTION_DAYS); start again without "
        "`after` and catch up from the data itself."
    )


def parse_query(args: dict) -> dict:
    """`after` (None when absent), `limit` and `type` (a tuple, empty for every type);
    InvalidArgument naming the parameter."""
    query = schemas.load(feed_query_schema, args, error=InvalidArgument)
    after, types = query.get("after"), query.get("type")
    return {
        "after": None if after is None else int(after),
        "limit": query["limit"],
        "types": tuple(dict.fromkeys(types.split(","))) if types else (),
    }


def parse_last_event_id(value: str) -> int:
    """The Last-Event-ID header as a cursor; InvalidArgument naming the header."""
    try:
        return int(CURSOR(value.strip()))
    except ValidationError as error:
        rule = error.messages[0]
        raise InvalidArgument(f"Last-Event-ID: {rule}", errors={"Last-Event-ID": [rule]}) from None


def check_kept(store, after: int | None) -> None:
    """Pruned when events after `after` were removed (None: from the oldest kept, always fine)."""
    if after is not None and after < store.events_pruned_through():
        raise Pruned()


def list_events(store, viewer: Viewer, after: int | None, limit: int, types=()) -> tuple:
    """Up to `limit` events after the cursor that `viewer` may see, by id, and whether more
    follow. Pruned for a cursor older than the events kept."""
    found = store.events_after(after or 0, limit + 1, tuple(types), viewer.filter)
    check_kept(store, after)  # after the read: a removal during it shows in the setting
    return found[:limit], len(found) > limit


def sse(event: dict) -> str:
    """One event as a server-sent event: id, event type and the event's JSON on one line."""
    data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return f"id: {event['id']}\nevent: {event['type']}\ndata: {data}\n\n"


def stream(
    store, viewer: Viewer, cursor: int | None, types: tuple, config: dict, streams, allowed
) -> Iterator[str]:
    """The events after `cursor` (None: from now) as they are committed, for
    EVENT_STREAM_SECONDS, a comment at least every EVENT_HEARTBEAT_SECONDS (a client that left
    is noticed at the next write), then a `retry:` hint. Ends when `allowed()` (the caller
    checked again) is False, after BACKLOG events written before it from a cursor, and at once
    when `streams` end."""
    from_cursor, heartbeat = cursor is not None, config["EVENT_HEARTBEAT_SECONDS"]
    cursor = store.latest_event_id() if cursor is None else cursor
    written = checked = time.monotonic()
    deadline, sent = written + config["EVENT_STREAM_SECONDS"], 0
    yield f": events after {cursor}\n\n"  # the headers go out now, whatever happens next
    while not streams.ended:
        seen = streams.commits  # read before the query: a commit after it ends the wait
        found = store.events_after(cursor, BATCH, types, viewer.filter)
        now = time.monotonic()
        if found or now - checked >= CHECK_SECONDS:
            if not allowed():  # after the query: nothing committed after a revocation goes
                break
            checked = now
        if found:
            cursor, sent = int(found[-1]["id"]), sent + len(found)
            yield "".join(map(sse, found))
            written = time.monotonic()
            if from_cursor and sent >= BACKLOG:
                break
            if len(found) == BATCH:
                continue
        from_cursor = False  # caught up: what comes from now on is live
        if now >= deadline:
            break
        streams.wait(seen, min(deadline, written + heartbeat, now + POLL_SECONDS) - now)
        if time.monotonic() - written >= heartbeat:
            yield ":\n\n"
            written = time.monotonic()
    yield f"retry: {RETRY_MS}\n\n"


class Streams:
    """A process's stream slots (one owner holds at most half, at least one), the wake-up of
    its streams when this process commits, and their stop signal."""

    def __init__(self, limit: int):
        self.limit, self.share = limit, max(1, limit // 2)
        self.held: Counter = Counter()
        self.changed = threading.Condition()
        self.commits, self.ended = 0, False

    def open(self, owner: str) -> bool:
        """Take a slot for `owner`; False beyond its share or when all are taken."""
        with self.changed:
            if self.ended or self.held.total() >= self.limit or self.held[owner] >= self.share:
                return False
            self.held[owner] += 1
            return True

    def release(self, owner: str) -> None:
        with self.changed:
            self.held[owner] -= 1
            if self.held[owner] <= 0:
                del self.held[owner]

    def notify(self) -> None:
        """This process committed events: waiting streams look now."""
        with self.changed:
            self.commits += 1
            self.changed.notify_all()

    def end(self) -> None:
        """End every open stream at once (the server stops; clients resume)."""
        with self.changed:
            self.ended = True
            self.changed.notify_all()

    def wait(self, seen: int, timeout: float) -> None:
        """Until a commit after `seen`, the end, or `timeout` seconds."""
        with self.changed:
            self.changed.wait_for(lambda: self.commits != seen or self.ended, max(0, timeout))
