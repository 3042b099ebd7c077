"""REST resources for people and their friendships."""

from __future__ import annotations

from urllib.parse import urlencode

from flask import Blueprint, Response, request

from .. import schemas, service
from ..web import get_store
from ..web.caller import current_caller, required
from ..web.jsonio import PATCH_TYPES, empty_response, json_body, json_response
from .openapi import doc

bp = Blueprint("people", __name__)

PERSON = ("The person.", schemas.PersonOutSchema, ["ETag"])
NO_CONTENT = {204: ("Done.", None, [])}


def _person_response(person: dict, status: int = 200, headers=None, body: bytes | None = None):
    body = service.person_json(person) if body is None else body
    headers = dict(headers or {})
    headers["ETag"] = service.etag_of(body)
    if status == 201:
        headers["Location"] = f"/person/{person['id']}"
    return Response(body + b"\n", status, headers, content_type="application/json")


def _page_link(limit: int, offset: int, name: str | None) -> str:
    query = {"limit": limit, "offset": offset}
    if name:
        query["name"] = name
    return "/people?" + urlencode(query)


@bp.get("/people")
@required
@doc(
    "List people (id and name), ordered by id",
    query=schemas.PeopleQuerySchema,
    ok={200: ("A page of people.", schemas.PersonEntrySchema(many=True), ["X-Total-Count"])},
)
def list_people():
    args = request.args
    name, limit, offset = args.get("name"), args.get("limit"), args.get("offset")
    entries, total = service.list_people(get_store(), name=name, limit=limit, offset=offset)
    limit, offset = service.page(limit, offset)
    links = []
    if offset + limit < total:
        links.append(f'<{_page_link(limit, offset + limit, name)}>; rel="next"')
    if offset > 0:
        links.append(f'<{_page_link(limit, max(0, offset - limit), name)}>; rel="prev"')
    headers = {"X-Total-Count": str(total)}
    if links:
        headers["Link"] = ", ".join(links)
    return json_response(entries, headers=headers)


def _etag_matches(header: str, etag: str) -> bool:
    tags = [tag.strip().removeprefix("W/") for tag in header.split(",")]
    return "*" in tags or etag in tags


@bp.get("/person/<id:person_id>")
@required
@doc(
    "Get a person's details",
    headers=["If-None-Match"],
    ok={200: PERSON, 304: ("Not modified since the ETag given.", None, ["ETag"])},
)
def get_person(person_id):
    person = service.get_person(get_store(), person_id)
    body = service.person_json(person)
    etag = service.etag_of(body)
    match = request.headers.get("If-None-Match")
    if match and _etag_matches(match, etag):
        return empty_response(304, {"ETag": etag})
    return _person_response(person, body=body)


@bp.post("/person")
@required
@doc(
    "Create a person (or, with the id of an existing person, update it like PATCH)",
    body={"oneOf": [schemas.PersonSchema, schemas.PersonUpdateSchema]},
    headers=["Idempotency-Key", "If-Match"],
    ok={
        201: ("Created.", schemas.PersonOutSchema, ["ETag", "Location"]),
        200: ("Updated (the body named an existing id), or a replay.", *PERSON[1:]),
    },
    errors=[404, 409],
)
def create_person():
    data = json_body()
    store = get_store()
    if_match = request.headers.get("If-Match")

    def create():
        person, created = service.create_person(store, data, if_match)
        return (201 if created else 200), person

    status, person, replayed = service.idempotent(
        store,
        current_caller().key,
        request.headers.get("Idempotency-Key"),
        service.fingerprint("POST /person", data),
        create,
    )
    return _person_response(person, status, {"Idempotent-Replayed": "true"} if replayed else None)


@bp.put("/person/<id:person_id>")
@required
@doc(
    "Replace a person: fields left out become null",
    body=schemas.PersonSchema,
    headers=["If-Match"],
    ok={200: PERSON},
    errors=[409],
)
def replace_person(person_id):
    person = service.replace_person(
        get_store(), person_id, json_body(), request.headers.get("If-Match")
    )
    return _person_response(person)


@bp.patch("/person/<id:person_id>")
@bp.post("/person/<id:person_id>")
@required
@doc(
    "Change some fields of a person (JSON merge patch; null clears a field)",
    body=schemas.PersonPatchSchema,
    body_types=PATCH_TYPES,
    headers=["If-Match"],
    ok={200: PERSON},
    errors=[409],
)
def update_person(person_id):
    person = service.update_person(
        get_store(), person_id, json_body(PATCH_TYPES), request.headers.get("If-Match")
    )
    return _person_response(person)


@bp.delete("/person/<id:person_id>")
@required
@doc(
    "Delete a person with their friendships and messages",
    headers=["If-Match"],
    ok=NO_CONTENT,
)
def delete_person(person_id):
    service.delete_person(get_store(), person_id, request.headers.get("If-Match"))
    return empty_response()


@bp.put("/person/<id:person_id>/friends/<id:friend_id>")
@required
@doc("Make two people friends (mutual; idempotent)", ok=NO_CONTENT, errors=[422])
def add_friend(person_id, friend_id):
    service.add_friend(get_store(), person_id, friend_id)
    return empty_response()


@bp.delete("/person/<id:person_id>/friends/<id:friend_id>")
@required
@doc("End a friendship (also fine when there was none)", ok=NO_CONTENT)
def remove_friend(person_id, friend_id):
    service.remove_friend(get_store(), person_id, friend_id)
    return empty_response()
