"""REST resources for messages, which are private to their sender."""

from flask import Blueprint, request, url_for

from .. import schemas, service
from ..web import get_store
from ..web.caller import current_caller, required
from ..web.jsonio import json_body, json_response
from . import shapes
from .openapi import doc
from .params import strict_query
from .people import REPLAYED, idempotent

bp = Blueprint("messages", __name__)
strict_query(bp)
OUT = shapes.MessageOutSchema


@bp.post("/message")
@required
@doc(
    "Send a message to a person; the sender is the caller",
    body=schemas.MessageSchema,
    headers=["Idempotency-Key"],
    ok={201: ("Sent (or a replay: Idempotent-Replayed).", OUT, ["Location", REPLAYED])},
    errors=[404],
    tag="messages",
)
def send_message():
    data = json_body()
    viewer, store = current_caller().viewer, get_store()
    status, message, replayed = idempotent(
        store, "POST /message", data, lambda: (201, service.send_message(store, viewer, data))
    )
    location = url_for("messages.get_message", message_id=message["id"])
    return json_response(message, status, {"Location": location, **replayed})


@bp.get("/message/<id:message_id>")
@required
@doc(
    "Get a message the caller sent (admins: any message)",
    ok={200: ("The message.", OUT, [])},
    tag="messages",
)
def get_message(message_id):
    return json_response(service.get_message(get_store(), current_caller().viewer, message_id))


@bp.get("/person/<id:person_id>/messages")
@required
@doc(
    "The caller's messages to a person, newest first",
    query=schemas.PageSchema,
    ok={200: ("A page of messages.", OUT(many=True), [])},
    tag="messages",
)
def list_messages(person_id):
    viewer, args = current_caller().viewer, request.args.to_dict()
    return json_response(service.list_messages(get_store(), viewer, person_id, **args))
