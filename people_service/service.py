"""The operations on people, friendships and messages: validation, rules and transactions."""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass

from marshmallow import ValidationError

from . import schemas
from .errors import (
    BadRequest,
    Invalid,
    InvalidArgument,
    NotFound,
    PreconditionFailed,
    ServiceError,
)

IDEMPOTENCY_TTL = 24 * 3600
_ID = re.compile(schemas.ID_PATTERN)


@dataclass(frozen=True)
class Viewer:
    """Who asks: messages are private to `sender_id` unless `admin`."""

    sender_id: str
    name: str
    admin: bool = False

    @property
    def filter(self) -> str | None:
        return None if self.admin else self.sender_id


# -- validation helpers ---------------------------------------------------------------------


def flatten(errors, prefix: str = "") -> list[str]:
    """Marshmallow's nested messages as 'address.city: message' lines."""
    if isinstance(errors, dict):
        lines = []
        for key, value in errors.items():
            name = prefix if key == "_schema" else f"{prefix}.{key}" if prefix else str(key)
            lines.extend(flatten(value, name))
        return lines
    if isinstance(errors, list):
        return [line for item in errors for line in flatten(item, prefix)]
    return [f"{prefix}: {errors}" if prefix else str(errors)]


def validated(schema, data, *, error=Invalid) -> dict:
    try:
        return schema.load(data)
    except ValidationError as exc:
        raise error("Invalid " + "; ".join(flatten(exc.messages)), errors=exc.messages) from None


def parse_id(value, what: str = "person") -> int:
    """An id as the store knows it; anything that is not an id is simply not found."""
    text = str(value)
    if isinstance(value, bool) or not _ID.match(text):
        raise NotFound(f"No {what} with id '{text[:40]}'.")
    return int(text)


def page(limit=None, offset=None) -> tuple[int, int]:
    """Checked paging arguments (strings from a URL or ints from GraphQL)."""
    args = {k: v for k, v in (("limit", limit), ("offset", offset)) if v is not None}
    loaded = validated(schemas.page_schema, args, error=InvalidArgument)
    return loaded["limit"], loaded["offset"]


def friends_limit(limit) -> int:
    """A checked friends(limit:) or messages(limit:), 0 to 100 (default 10)."""
    if type(limit) is int and 0 <= limit <= 100:
        return limit  # the common case, resolved once per object of a GraphQL list
    args = {} if limit is None else {"limit": limit}
    return validated(schemas.friends_limit_schema, args, error=InvalidArgument)["limit"]


# -- people ---------------------------------------------------------------------------------


def person_out(row: dict) -> dict:
    """A stored row in the shape clients see."""
    return {
        "id": str(row["id"]),
        "name": row["name"],
        "age": row["age"],
        "email": row["email"],
        "address": {"street": row["street"], "city": row["city"], "country": row["country"]},
    }


def _columns(person: dict) -> dict:
    address = person.get("address") or {}
    return {
        "name": person["name"],
        "age": person.get("age"),
        "email": person.get("email"),
        "street": address.get("street"),
        "city": address.get("city"),
        "country": address.get("country"),
    }


def person_json(person: dict) -> bytes:
    """A person as the compact UTF-8 JSON the API sends (stored text is always valid UTF-8)."""
    return json.dumps(person, ensure_ascii=False, separators=(",", ":")).encode()


def etag_of(body: bytes) -> str:
    """A strong ETag of a representation."""
    return '"' + hashlib.blake2b(body, digest_size=10).hexdigest() + '"'


def person_etag(person: dict) -> str:
    """The ETag of a person: a hash of exactly the JSON the API sends for it."""
    return etag_of(person_json(person))


def _check_if_match(person: dict, if_match: str | None) -> None:
    if if_match is None:
        return
    tags = [tag.strip() for tag in if_match.split(",")]
    if "*" not in tags and person_etag(person) not in tags:
        raise PreconditionFailed()


def people_query(name=None, limit=None, offset=None) -> tuple[str | None, int, int]:
    """Checked arguments of a people list: (name or None, limit, offset)."""
    given = {"name": name, "limit": limit, "offset": offset}
    args = {key: value for key, value in given.items() if value is not None}
    query = validated(schemas.people_query_schema, args, error=InvalidArgument)
    return query.get("name") or None, query["limit"], query["offset"]


def list_people(store, *, name=None, limit=None, offset=None) -> tuple[list[dict], int]:
    """A page of people (id and name) ordered by id, and how many match in all."""
    name, limit, offset = people_query(name, limit, offset)
    rows = store.list_people(name, limit, offset)
    entries = [{"id": str(row["id"]), "name": row["name"]} for row in rows]
    return entries, store.count_people(name)


def people_details(store, *, name=None, limit=None, offset=None) -> list[dict]:
    """Like list_people, with every field of each person (for GraphQL)."""
    rows = store.list_people_details(*people_query(name, limit, offset))
    return [person_out(row) for row in rows]


def get_person(store, person_id) -> dict:
    """The person with this id; raises NotFound."""
    row = store.get_person(parse_id(person_id))
    if row is None:
        raise NotFound(f"No person with id '{person_id}'.")
    return person_out(row)


def _storable(text) -> bool:
    """A string that could be stored, so that looking it up can match something."""
    if not isinstance(text, str) or "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def find_person(store, name: str) -> dict:
    """The person with exactly this name ignoring case (lowest id); raises NotFound."""
    row = store.find_person(name) if _storable(name) else None
    if row is None:
        raise NotFound(f"No person named '{str(name)[:200]}'.")
    return person_out(row)


def create_person(store, data, if_match: str | None = None) -> tuple[dict, bool]:
    """Create a person, or update one when the body names an existing id (the seed's POST).

    Returns the person and whether it was created.
    """
    if isinstance(data, dict) and "id" in data:
        update = validated(schemas.person_update_schema, data)
        return update_person(store, update.pop("id"), update, if_match), False
    person = validated(schemas.person_schema, data)
    with store.transaction():
        person_id = store.insert_person(_columns(person))
        return person_out(store.get_person(person_id)), True


def _without_path_id(data, person_id):
    """A body may repeat the id of its path (and only that id); the rest is the person."""
    if not isinstance(data, dict) or "id" not in data:
        return data
    if data["id"] != str(person_id):
        raise Invalid(
            "Invalid id: must match the id in the path.",
            errors={"id": ["Must match the id in the path."]},
        )
    return {key: value for key, value in data.items() if key != "id"}


def replace_person(store, person_id, data, if_match: str | None = None) -> dict:
    """Replace every field of a person (PUT); fields left out become null."""
    person = validated(schemas.person_schema, _without_path_id(data, person_id))
    key = parse_id(person_id)
    with store.transaction():
        current = get_person(store, key)
        _check_if_match(current, if_match)
        store.update_person(key, _columns(person))
        return person_out(store.get_person(key))


def merge_patch(target, patch):
    """RFC 7396 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result[key] = None  # our fields never disappear: null is "unknown"
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def update_person(store, person_id, patch, if_match: str | None = None) -> dict:
    """Change the fields a merge patch names (PATCH); null clears a field."""
    changes = validated(schemas.person_patch_schema, _without_path_id(patch, person_id))
    key = parse_id(person_id)
    with store.transaction():
        current = get_person(store, key)
        _check_if_match(current, if_match)
        merged = merge_patch(current, changes)
        store.update_person(key, _columns(merged))
        return person_out(store.get_person(key))


def delete_person(store, person_id, if_match: str | None = None) -> None:
    """Delete a person with their friendships and messages, in one transaction."""
    key = parse_id(person_id)
    with store.transaction():
        current = get_person(store, key)
        _check_if_match(current, if_match)
        store.delete_person(key)


# -- friendships ----------------------------------------------------------------------------


def _both(store, person_id, friend_id) -> tuple[int, int]:
    a, b = parse_id(person_id), parse_id(friend_id)
    for key, given in ((a, person_id), (b, friend_id)):
        if store.get_person(key) is None:
            raise NotFound(f"No person with id '{given}'.")
    return a, b


def add_friend(store, person_id, friend_id) -> dict:
    """Make two people friends (mutual, idempotent); returns the first person."""
    with store.transaction():
        a, b = _both(store, person_id, friend_id)
        if a == b:
            raise Invalid(
                "Invalid friend_id: a person cannot befriend themselves.",
                errors={"friend_id": ["A person cannot befriend themselves."]},
            )
        store.add_friendship(a, b)
    return get_person(store, a)


def remove_friend(store, person_id, friend_id) -> dict:
    """End a friendship (fine when there was none); returns the first person."""
    with store.transaction():
        a, b = _both(store, person_id, friend_id)
        store.remove_friendship(a, b)
    return get_person(store, a)


def friends_of(store, person_ids: list[str], limit) -> dict[str, list[dict]]:
    """The first `limit` friends (by id) of each person, in one store call."""
    count = friends_limit(limit)
    found = store.friends_of([int(pid) for pid in person_ids], count)
    return {str(pid): [person_out(row) for row in rows] for pid, rows in found.items()}


# -- messages -------------------------------------------------------------------------------


def message_out(row: dict) -> dict:
    return {
        "id": str(row["id"]),
        "person_id": str(row["person_id"]),
        "content": row["content"],
        "sender": row["sender"],
        "created_at": row["created_at"],
    }


def send_message(store, viewer: Viewer, data) -> dict:
    """Send a message from the caller to a person (NotFound for an unknown person)."""
    message = validated(schemas.message_schema, data)
    row = store.insert_message(
        {
            "person_id": parse_id(message["person_id"]),
            "sender_id": viewer.sender_id,
            "sender": viewer.name,
            "content": message["content"],
        }
    )
    return message_out(row)


def get_message(store, viewer: Viewer, message_id) -> dict:
    """A message the caller sent (any message for admins); others are NotFound."""
    row = store.get_message(parse_id(message_id, "message"), viewer.filter)
    if row is None:
        raise NotFound(f"No message with id '{message_id}'.")
    return message_out(row)


def list_messages(store, viewer: Viewer, person_id, *, limit=None, offset=None) -> list[dict]:
    """The caller's messages to a person, newest first."""
    count, skip = page(limit, offset)
    person = get_person(store, person_id)
    rows = store.list_messages(int(person["id"]), viewer.filter, count, skip)
    return [message_out(row) for row in rows]


def messages_of(store, viewer: Viewer, person_ids: list[str], limit) -> dict[str, list[dict]]:
    """The caller's newest `limit` messages to each person, in one store call."""
    count = friends_limit(limit)
    found = store.messages_of([int(pid) for pid in person_ids], viewer.filter, count)
    return {str(pid): [message_out(row) for row in rows] for pid, rows in found.items()}


def people_by_ids(store, person_ids: list[str]) -> dict[str, dict]:
    """People by id, in one store call (unknown ids are left out)."""
    rows = store.get_people([int(pid) for pid in person_ids])
    return {str(row["id"]): person_out(row) for row in rows}


# -- idempotency ----------------------------------------------------------------------------


def fingerprint(*parts) -> str:
    """A digest of what makes two requests the same request."""
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def check_idempotency_key(key: str) -> str:
    if not 1 <= len(key) <= 255 or not key.isprintable() or not key.isascii():
        raise BadRequest("Idempotency-Key must be 1 to 255 printable ASCII characters.")
    return key


def idempotent(store, caller: str, key: str | None, request_print: str, action):
    """Run `action() -> (status, body)` once per caller and key within 24 hours.

    Returns (status, body, replayed). A key reused with another request is Invalid. The record
    and the action's writes commit together, so a concurrent retry waits and then replays.
    """
    if key is None:
        status, body = action()
        return status, body, False
    check_idempotency_key(key)
    now = time.time()
    with store.transaction():
        saved = store.get_idempotent(caller, key, now - IDEMPOTENCY_TTL)
        if saved is not None:
            if saved["fingerprint"] != request_print:
                raise Invalid(
                    "This Idempotency-Key was already used with a different request.",
                    errors={"Idempotency-Key": ["Already used with a different request."]},
                )
            return saved["status"], json.loads(saved["body"]), True
        status, body = action()
        record = {
            "caller": caller,
            "key": key,
            "fingerprint": request_print,
            "status": status,
            "body": json.dumps(body),
            "created_at": now,
        }
        store.put_idempotent(record, prune_before=now - IDEMPOTENCY_TTL)
    return status, body, False


def check_health(store) -> str:
    """'ok', or what is wrong with the database ('missing', 'read-only', 'unreadable')."""
    try:
        return store.check()
    except ServiceError:
        return "unreadable"


# -- bulk import and export -----------------------------------------------------------------


def import_people(store, document) -> tuple[int, int]:
    """Load people (with ids, addresses and friend ids) in one transaction.

    The format is that of data/demo.json and of export_people. Ids are kept, so links stay
    valid; an id or email that is already taken stops the whole import.
    """
    entries = document.get("people") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise Invalid("The file must be a JSON object with a 'people' array.")
    people, friendships, problems = [], [], {}
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            problems[index] = {"_schema": ["Invalid input type."]}
            continue
        friends = entry.get("friends", [])
        record = {key: value for key, value in entry.items() if key not in ("id", "friends")}
        try:
            person = schemas.person_schema.load(record)
        except ValidationError as exc:
            problems[index] = exc.messages
            continue
        if not isinstance(entry.get("id"), str) or not _ID.match(entry["id"]):
            problems[index] = {"id": ["Not a valid id."]}
            continue
        if not isinstance(friends, list) or not all(
            isinstance(f, str) and _ID.match(f) for f in friends
        ):
            problems[index] = {"friends": ["Must be a list of ids."]}
            continue
        person_id = int(entry["id"])
        people.append({"id": person_id, **_columns(person)})
        friendships.extend((person_id, int(friend)) for friend in friends)
    if problems:
        raise Invalid("Invalid " + "; ".join(flatten({"people": problems})), errors=problems)
    known = {person["id"] for person in people}
    with store.transaction():
        unknown = sorted(
            {b for _, b in friendships if b not in known and store.get_person(b) is None}
        )
        if unknown:
            raise Invalid(f"Friends refer to unknown people: {', '.join(map(str, unknown[:5]))}.")
        if any(a == b for a, b in friendships):
            raise Invalid("A person cannot befriend themselves.")
        store.import_people(people, friendships)
    pairs = {tuple(sorted(pair)) for pair in friendships}
    return len(people), len(pairs)


def export_people(store) -> tuple[dict, int]:
    """Every person with address and friend ids, in the import format; and the friendship count."""
    rows, pairs = store.export_people()
    friends: dict[int, list[str]] = {}
    for a, b in pairs:
        friends.setdefault(a, []).append(str(b))
        friends.setdefault(b, []).append(str(a))
    people = [
        {**person_out(row), "friends": sorted(friends.get(row["id"], []), key=int)} for row in rows
    ]
    return {"people": people}, len(pairs)


def copy_database(source, target) -> dict[str, int]:
    """Copy every table of one store into another, empty one, and check the counts match."""
    tables = source.dump()
    counts = target.load(tables)
    expected = {table: len(rows) for table, rows in tables.items()}
    if counts != expected:
        raise ServiceError(f"The copy does not match its source: {counts} != {expected}.")
    return counts
