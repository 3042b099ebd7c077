"""REST resources for people, their friendships and their messages (private to their sender)."""

from urllib.parse import urlencode

from flask import Blueprint, request, url_for
from werkzeug.http import generate_etag
from werkzeug.wrappers import Response

from .. import idempotency, schemas, service
from ..web import get_store
from ..web.caller import current_caller, required
from ..web.jsonio import PATCH_TYPES, dump_json, json_body, json_response
from .openapi import MessageOutSchema as Message
from .openapi import PersonEntrySchema, PersonMergeSchema, PersonOutSchema, PersonReplaceSchema, api

bp = Blueprint("people", __name__)
REPLAYED = "Idempotent-Replayed"
PERSON = {200: ("The person.", PersonOutSchema, "ETag")}
DONE = {204: ("Done.", None)}
PAGE = ("X-Total-Count", "Link")
LINK_PARAMETERS = (*service.FILTERS, "sort")  # kept in the Link header, after limit and offset


def resource(route, **doc):
    """A view of `route` (say bp.get(rule)) that needs credentials, documented by api(**doc)."""
    return lambda view: route(required(api(**doc)(view)))


def if_match():
    """If-Match and If-None-Match as a precondition on a write's current person, or None."""
    match, none_match = "If-Match" in request.headers, "If-None-Match" in request.headers
    if not match and not none_match:
        return None
    tags, other_tags = request.if_match, request.if_none_match  # parsed before the write lock

    def holds(current: dict | None) -> bool:
        if current is None:  # a create: If-Match has nothing to match, If-None-Match holds
            return not match
        etag = generate_etag(dump_json(current))  # the hash add_etag() gives the answer
        return not (
            match and not tags.contains(etag) or none_match and other_tags.contains_weak(etag)
        )

    return holds


def idempotent(what: str, data, action):
    """`action() -> (status, body)` run once per Idempotency-Key; (status, body, headers)."""
    key, found = request.headers.get("Idempotency-Key"), idempotency.fingerprint(what, data)
    status, body, replayed = idempotency.idempotent(
        get_store(), current_caller().key, key, found, action
    )
    return status, body, {REPLAYED: "true"} if replayed else {}


def person_response(person: dict, status: int = 200, headers=None) -> Response:
    response = json_response(person, status, headers)
    response.add_etag()
    if status == 201:
        response.headers["Location"] = url_for("people.get_person", person_id=person["id"])
    return response


def paged_response(entries: list, total: int, query: dict) -> Response:
    """A page, with X-Total-Count and a Link header to the next and previous pages."""
    path = url_for(request.endpoint, **request.view_args)  # under the server's mount prefix
    limit, offset, given = query["limit"], query["offset"], request.args
    asked = [(name, given[name]) for name in LINK_PARAMETERS if given.get(name)]
    pages = (
        ("next", offset + limit, offset + limit < total),
        ("prev", max(0, offset - limit), offset > 0),
    )
    # commas stay readable in `sort` (a sub-delimiter, allowed in a query)
    links = [
        f'<{path}?{urlencode([("limit", limit), ("offset", to), *asked], safe=",")}>; rel="{rel}"'
        for rel, to, shown in pages
        if shown
    ]
    return json_response(
        entries,
        headers={"X-Total-Count": str(total), **({"Link": ", ".join(links)} if links else {})},
    )


# `/people/` is the list too: werkzeug's slash redirect would build its URL from the Host header
@resource(
    bp.get("/people", strict_slashes=False),
    query=schemas.PeopleQuerySchema,
    ok={200: ("A page of people.", PersonEntrySchema(many=True), *PAGE)},
)
def list_people():
    """List people (id and name): filtered, sorted (by id unless `sort` says otherwise), paged"""
    return paged_response(*service.list_people(get_store(), **request.args.to_dict()))


@resource(
    bp.get("/person/<id:person_id>"),
    headers=["If-None-Match"],
    ok={**PERSON, 304: ("Not modified since the ETag given.", None, "ETag")},
)
def get_person(person_id):
    """Get a person's details"""
    return person_response(service.get_person(get_store(), person_id)).make_conditional(request)


@resource(
    bp.post("/person"),
    body={"oneOf": [schemas.PersonSchema, schemas.PersonUpdateSchema]},
    headers=["Idempotency-Key", "If-Match"],
    ok={
        201: ("Created (or a replay).", PersonOutSchema, "ETag", "Location", REPLAYED),
        200: ("Updated (the body named an existing id).", PersonOutSchema, "ETag", REPLAYED),
    },
)
def create_person():
    """Create a person (or, with the id of an existing person, update it like PATCH)"""
    data, precondition = json_body(), if_match()

    def create():
        person, created = service.create_person(get_store(), data, precondition)
        return (201 if created else 200), person

    status, person, headers = idempotent("POST /person", data, create)
    return person_response(person, status, headers)


@resource(
    bp.put("/person/<id:person_id>"), body=PersonReplaceSchema, headers=["If-Match"], ok=PERSON
)
def replace_person(person_id):
    """Replace a person: fields left out become null"""
    return person_response(service.replace_person(get_store(), person_id, json_body(), if_match()))


@resource(
    bp.route("/person/<id:person_id>", methods=["PATCH", "POST"]),
    body=PersonMergeSchema,
    body_type="application/merge-patch+json",
    description="The body may also be sent as application/json.",
    headers=["If-Match"],
    ok=PERSON,
)
def update_person(person_id):
    """Change some fields of a person (JSON merge patch; null clears a field)"""
    changes = json_body(PATCH_TYPES)
    return person_response(service.update_person(get_store(), person_id, changes, if_match()))


@resource(bp.delete("/person/<id:person_id>"), headers=["If-Match"], ok=DONE)
def delete_person(person_id):
    """Delete a person with their friendships and messages"""
    service.delete_person(get_store(), person_id, if_match())
    return Response(status=204)


@resource(
    bp.get("/person/<id:person_id>/friends"),
    query=schemas.PageSchema,
    ok={200: ("A page of friends.", PersonEntrySchema(many=True), *PAGE)},
)
def list_friends(person_id):
    """A person's friends (id and name), ordered by id"""
    return paged_response(*service.list_friends(get_store(), person_id, **request.args.to_dict()))


@resource(bp.put("/person/<id:person_id>/friends/<id:friend_id>"), ok=DONE)
def add_friend(person_id, friend_id):
    """Make two people friends (mutual; idempotent)"""
    service.add_friend(get_store(), person_id, friend_id)
    return Response(status=204)


@resource(bp.delete("/person/<id:person_id>/friends/<id:friend_id>"), ok=DONE)
def remove_friend(person_id, friend_id):
    """End a friendship (also fine when there was none)"""
    service.remove_friend(get_store(), person_id, friend_id)
    return Response(status=204)


@resource(
    bp.post("/message"),
    body=schemas.MessageSchema,
    headers=["Idempotency-Key"],
    ok={201: ("Sent (or a replay: Idempotent-Replayed).", Message, "Location", REPLAYED)},
    tag="messages",
)
def send_message():
    """Send a message to a person; the sender is the caller"""
    data, viewer = json_body(), current_caller().viewer
    status, message, headers = idempotent(
        "POST /message", data, lambda: (201, service.send_message(get_store(), viewer, data))
    )
    headers["Location"] = url_for("people.get_message", message_id=message["id"])
    return json_response(message, status, headers)


@resource(bp.get("/message/<id:message_id>"), ok={200: ("The message.", Message)}, tag="messages")
def get_message(message_id):
    """Get a message the caller sent (admins: any message)"""
    return json_response(service.get_message(get_store(), current_caller().viewer, message_id))


@resource(
    bp.get("/person/<id:person_id>/messages"),
    query=schemas.PageSchema,
    ok={200: ("A page of messages.", Message(many=True))},
    tag="messages",
)
def list_messages(person_id):
    """The caller's messages to a person, newest first"""
    viewer, args = current_caller().viewer, request.args.to_dict()
    return json_response(service.list_messages(get_store(), viewer, person_id, **args))
