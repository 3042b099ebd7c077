"""GET /events: the feed of changes as pages of JSON, or as a server-sent event stream."""

from urllib.parse import urlencode

from flask import Blueprint, current_app, request
from marshmallow import Schema, fields, validate
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


class EventSchema(Schema):
    id = fields.String(required=True)
    type = fields.String(required=True, validate=validate.OneOf(events.TYPES))
    timestamp = fields.String(required=True, metadata={"format": "date-time"})
    data = fields.Dict(required=True)


DESCRIPTION = (
    "Follow `next` (or pass the last id you saw as `after`) to see every event once, in id "
    "order. With `Accept: text/event-stream` the same URL streams server-sent events after "
    "`Last-Event-ID` (else `after`, else from now), ending with a `retry:` hint (docs/events.md)."
)


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
    if negotiate((JSON, STREAM)) == STREAM:
        return _stream(store, caller, query["types"], query["after"] if resume is None else resume)
    after, limit, types = query["after"], query["limit"], query["types"]
    found, more = feed.list_events(store, caller.viewer, after, limit, types)
    headers = {"Vary": "Accept"}
    if more:
        params = {"after": found[-1]["id"], "limit": limit, "type": ",".join(types)}
        query_string = urlencode({k: v for k, v in params.items() if v}, safe=",")
        headers["Link"] = f'<{request.script_root + request.path}?{query_string}>; rel="next"'
    return json_response(found, headers=headers)


def _stream(store, caller, types: tuple, cursor: int | None):
    feed.check_kept(store, cursor)
    runtime, key = get_runtime(), caller.key
    if not runtime.streams.open(key):
        detail = "No event stream is free for you (EVENT_STREAMS, half a caller); retry later."
        raise with_headers(Busy(detail), {"Retry-After": "5"})

    def allowed() -> bool:  # the client is there, its credentials still give it read
        if gone is not None and gone():
            return False
        try:
            again = caller_of(runtime, request_headers)
        except Unauthorized:
            return False
        return again is not None and "read" in again.scopes

    request_headers, config = request.headers, current_app.config
    gone = request.environ.get("waitress.client_disconnected")  # waitress's own, documented
    body = feed.stream(store, caller.viewer, cursor, types, config, runtime.streams, allowed)
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no", "Vary": "Accept"}
    response = Response(body, mimetype=STREAM, headers=headers)
    response.call_on_close(lambda: runtime.streams.release(key))  # even before it started
    return response
