"""GET /events: the feed of changes as pages of JSON, or as a server-sent event stream."""

from urllib.parse import urlencode

from flask import Blueprint, current_app, request
from marshmallow import Schema, fields, validate
from werkzeug.exceptions import Gone
from werkzeug.wrappers import Response

from .. import events, feed
from ..errors import Busy, Unauthorized
from ..web import get_runtime, get_store
from ..web.caller import caller_of, current_caller, required
from ..web.jsonio import json_response
from ..web.negotiation import JSON, negotiate
from ..web.problems import with_headers
from .openapi import api

bp = Blueprint("events", __name__)

STREAM = "text/event-stream"
RETRY_AFTER = "5"  # seconds a client refused a stream waits: streams end every few minutes


class EventSchema(Schema):
    id = fields.String(required=True, metadata={"example": "1234"})
    type = fields.String(required=True, validate=validate.OneOf(events.TYPES))
    timestamp = fields.String(
        required=True, metadata={"format": "date-time", "example": "2026-11-27T10:00:00.123Z"}
    )
    data = fields.Dict(
        required=True,
        metadata={"description": "The person, message or friendship, as SPEC 11c says."},
    )


DESCRIPTION = (
    "The events after `after`, by id; follow the `next` link (or pass the last id you saw as "
    "`after`) to see every event exactly once, in id order, whichever process or instance "
    "wrote it. `message.created` events are shown only to their sender and to `admin`. "
    "An `after` older than the events kept is 410: start again without it.\n\n"
    "With `Accept: text/event-stream` the same URL streams server-sent events (`id:`, "
    "`event:`, `data:` the event's JSON) after `Last-Event-ID` (else `after`, else from now), "
    "with a comment line at least every 15 seconds, for EVENT_STREAM_SECONDS, ending with a "
    "`retry:` hint (also after 1,000 already written events: reconnect with Last-Event-ID); "
    "a process holds at most EVENT_STREAMS streams, one caller at most half of them (503 "
    "with Retry-After beyond). `limit` does not apply to a stream."
)


def _page(found: list, more: bool, query: dict):
    headers = {"Vary": "Accept"}
    if more:
        params = [("after", found[-1]["id"]), ("limit", query["limit"])]
        if query["types"]:
            params.append(("type", ",".join(query["types"])))
        path = request.script_root + request.path
        headers["Link"] = f'<{path}?{urlencode(params, safe=",")}>; rel="next"'
    return json_response(found, headers=headers)


@bp.get("/events")
@required
@api(
    query=feed.FeedQuerySchema,
    ok={200: ("The events after the cursor, by id.", EventSchema(many=True), "Link")},
    headers=["Last-Event-ID"],
    description=DESCRIPTION,
)
def list_events():
    """Follow every change: the events after a cursor, or a live stream of them"""
    query = feed.parse_query(request.args.to_dict())
    resume = request.headers.get("Last-Event-ID")  # checked whichever answer is asked for
    resume = None if resume is None else feed.parse_last_event_id(resume)
    caller, store = current_caller(), get_store()
    try:
        if negotiate((JSON, STREAM)) == STREAM:
            return _stream(store, caller, query, resume)
        found = feed.list_events(store, caller.viewer, *map(query.get, ("after", "limit", "types")))
        return _page(*found, query)
    except feed.Pruned as error:
        raise Gone(error.detail) from None


def _stream(store, caller, query, resume: int | None):
    cursor = resume if resume is not None else query["after"]
    feed.check_kept(store, cursor)
    streams = get_runtime().streams
    if not streams.open(caller.key):
        raise with_headers(
            Busy(
                "No event stream is free for you in this process (EVENT_STREAMS; one caller "
                "holds at most half of them); retry later, or poll GET /events with after."
            ),
            {"Retry-After": RETRY_AFTER},
        )
    allowed, config = _checker(get_runtime(), request.headers), current_app.config
    body = feed.stream(store, caller.viewer, cursor, query["types"], config, streams, allowed)
    # no cache or proxy may buffer or keep it
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no", "Vary": "Accept"}
    response = Response(body, mimetype=STREAM, headers=headers)
    response.call_on_close(lambda: streams.release(caller.key))  # even before it started
    return response


def _checker(runtime, headers):
    """Whether the request's credentials still stand for a caller with the scope read."""

    def allowed() -> bool:
        try:
            caller = caller_of(runtime, headers)
        except Unauthorized:
            return False
        return caller is not None and "read" in caller.scopes

    return allowed
