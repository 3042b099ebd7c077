"""The event feed: pages of events after a cursor, and the same as a server-sent event stream."""

import json
import threading
import time
from collections import Counter

from marshmallow import Schema, ValidationError, fields

from . import schemas
from .errors import InvalidArgument, ServiceError
from .events import TYPES

CURSOR_PATTERN = r"^(0|[1-9][0-9]{0,17})$"  # an event id, or 0; at most PostgreSQL's bigint
CURSOR = schemas.full_match(CURSOR_PATTERN, "Must be an event id: a whole number, 0 or more.")
TYPE = "(" + "|".join(name.replace(".", r"\.") for name in TYPES) + ")"
TYPES_PATTERN = f"^{TYPE}(,{TYPE})*$"
UNKNOWN_TYPE = f"Unknown event type. Use a comma list of {', '.join(TYPES)}."
BATCH, BACKLOG = 100, 1000  # events a stream reads per query; sends from a cursor, at most
POLL_SECONDS, CHECK_SECONDS = 1.25, 5.0  # an idle stream queries, and checks its caller


class FeedQuerySchema(Schema):  # other names are refused before (rest.openapi.takes)
    after = fields.String(
        validate=CURSOR,
        metadata={"pattern": CURSOR_PATTERN, "description": "The last event id you saw."},
    )
    limit = schemas.Count(1, 1000, load_default=100)
    type = fields.String(
        validate=schemas.full_match(TYPES_PATTERN, UNKNOWN_TYPE),
        metadata={"pattern": TYPES_PATTERN, "description": UNKNOWN_TYPE.split(". ")[1]},
    )


class Pruned(ServiceError):
    status, graphql_code = 410, "BAD_REQUEST"
    default_detail = "Events after this cursor were removed (EVENT_RETENTION_DAYS); start anew."


def parse_query(args: dict) -> dict:
    """`after` (None when absent), `limit` and `types` (a tuple, empty for every type)."""
    query = schemas.load(FeedQuerySchema(), args, error=InvalidArgument)
    after, types = query.get("after"), query.get("type")
    types = tuple(dict.fromkeys(types.split(","))) if types else ()
    return {"after": after and int(after), "limit": query["limit"], "types": types}


def parse_last_event_id(value: str) -> int:
    """The Last-Event-ID header as a cursor; InvalidArgument naming the header."""
    try:
        return int(CURSOR(value.strip()))
    except ValidationError as error:
        rule = error.messages[0]
        raise InvalidArgument(f"Last-Event-ID: {rule}", errors={"Last-Event-ID": [rule]}) from None


def check_kept(store, after: int | None) -> None:
    if after is not None and after < store.events_pruned_through():
        raise Pruned()


def list_events(store, viewer, after: int | None, limit: int, types=()) -> tuple[list, bool]:
    """Up to `limit` events after the cursor that `viewer` may see, and whether more follow."""
    found = store.events_after(after or 0, limit + 1, types, viewer.filter)
    check_kept(store, after)  # after the read: a removal during it shows in the setting
    return found[:limit], len(found) > limit


def sse(event: dict) -> str:
    data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return f"id: {event['id']}\nevent: {event['type']}\ndata: {data}\n\n"


def stream(store, viewer, cursor, types: tuple, config: dict, streams, allowed):
    """Server-sent events after `cursor` (None: from now) and heartbeats, then `retry:`."""
    # a client that left is noticed at the second write after it: within 20 s (SPEC 12b)
    from_cursor, heartbeat = cursor is not None, min(config["EVENT_HEARTBEAT_SECONDS"], 9)
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
            cursor, sent, written = int(found[-1]["id"]), sent + len(found), now
            yield "".join(map(sse, found))
            if from_cursor and sent >= BACKLOG:
                break
            if len(found) == BATCH:
                continue
        elif now - written >= heartbeat:
            yield ":\n\n"
            written = now
        from_cursor = False  # caught up: what comes from now on is live
        if now >= deadline:
            break
        streams.wait(seen, min(deadline, written + heartbeat, now + POLL_SECONDS) - now)
    yield "retry: 1000\n\n"


class Streams:
    """A process's stream slots (an owner holds at most half), their wake-ups and their end."""

    def __init__(self, limit: int):
        self.limit, self.share, self.held = limit, max(1, limit // 2), Counter()
        self.changed, self.commits, self.ended = threading.Condition(), 0, False

    def open(self, owner: str) -> bool:
        with self.changed:
            if self.ended or self.held.total() >= self.limit or self.held[owner] >= self.share:
                return False
            self.held[owner] += 1
            return True

    def release(self, owner: str) -> None:
        with self.changed:
            self.held -= Counter([owner])

    def notify(self) -> None:
        with self.changed:
            self.commits += 1
            self.changed.notify_all()

    def end(self) -> None:
        self.ended = True
        self.notify()

    def wait(self, seen: int, timeout: float) -> None:
        with self.changed:
            self.changed.wait_for(lambda: self.commits != seen or self.ended, max(0, timeout))
