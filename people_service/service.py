"""The operations on people, friendships and messages: validation, rules and transactions."""

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

from . import events, schemas
from .errors import Invalid, InvalidArgument, NotFound, PreconditionFailed, ServiceError

# Checks the current person (None: none yet) inside a write's transaction: the HTTP If-Match.
Precondition = Callable[[dict | None], bool]
ADDRESS = ("street", "city", "country")
TEXTS = ("name", "city", "country")
FILTERS = (*TEXTS, "min_age", "max_age")


@dataclass(frozen=True)
class Viewer:  # messages are private to `sender_id` unless `admin`
    sender_id: str
    name: str
    admin: bool = False

    @property
    def filter(self) -> str | None:
        return None if self.admin else self.sender_id


def parse_id(value, what: str = "person") -> int:
    """An id as the store knows it; anything that is not an id is simply not found."""
    if not schemas.is_id(text := str(value)):
        raise NotFound(f"No {what} with id '{text[:40]}'.")
    return int(text)


def page(limit=None, offset=None) -> tuple[int, int]:
    args = {k: v for k, v in (("limit", limit), ("offset", offset)) if v is not None}
    loaded = schemas.load(schemas.page_schema, args, error=InvalidArgument)
    return loaded["limit"], loaded["offset"]


def list_field_limit(limit) -> int:
    """A checked `limit` of a list inside a person (friends, messages): 0 to 100, default 10."""
    low, high = schemas.LIST_FIELD_LIMITS
    if type(limit) is int and low <= limit <= high:
        return limit  # the common case, once per object of a GraphQL list
    args = {} if limit is None else {"limit": limit}
    return schemas.load(schemas.list_field_schema, args, error=InvalidArgument)["limit"]


def person_out(row: dict) -> dict:
    fields = {key: row[key] for key in ("name", "age", "email")}
    return {"id": str(row["id"]), **fields, "address": {key: row[key] for key in ADDRESS}}


def columns(person: dict) -> dict:
    address = person.get("address") or {}
    fields = {"name": person["name"], "age": person.get("age"), "email": person.get("email")}
    return {**fields, **{key: address.get(key) for key in ADDRESS}}


def people_query(**given) -> dict:
    """Checked arguments of a people list (None or an empty text: not given, filters nothing)."""
    args = {k: v for k, v in given.items() if v is not None and (v != "" or k not in TEXTS)}
    query = schemas.load(schemas.people_query_schema, args, error=InvalidArgument)
    return {"sort": (), **dict.fromkeys(FILTERS), **query}


def _people_args(given: dict) -> tuple[dict, tuple]:
    query = people_query(**given)
    return query, ({k: query[k] for k in FILTERS}, query["limit"], query["offset"], query["sort"])


def list_people(store, **args) -> tuple[list[dict], int, dict]:
    """A page of people (id and name), how many match in all, and the checked query."""
    query, found = _people_args(args)
    with store.snapshot():  # the page and the total agree
        rows, total = store.list_people(*found), store.count_people(found[0])
    return [{"id": str(row["id"]), "name": row["name"]} for row in rows], total, query


def people_details(store, **args) -> list[dict]:
    return [person_out(row) for row in store.list_people_details(*_people_args(args)[1])]


def get_person(store, person_id, lock: bool = False) -> dict:
    """The person with this id (`lock`: until the transaction ends); raises NotFound."""
    row = store.get_person(parse_id(person_id), lock)
    if row is None:
        raise NotFound(f"No person with id '{person_id}'.")
    return person_out(row)


def find_person(store, name) -> dict:
    """The person with exactly this name ignoring case (lowest id); raises NotFound."""
    try:
        checked = schemas.load(schemas.person_name_schema, {"name": name})["name"]
    except ServiceError:
        checked = None  # text that could not be stored cannot match anyone
    row = store.find_person(checked) if checked else None
    if row is None:
        raise NotFound(f"No person named '{str(name)[:200]}'.")
    return person_out(row)


def create_person(store, data, precondition: Precondition | None = None) -> tuple[dict, bool]:
    """The person created, or updated when the body names an id (the seed's POST); and which."""
    if isinstance(data, dict) and "id" in data:
        update = schemas.load(schemas.person_update_schema, data)
        return _merge(store, update.pop("id"), update, precondition), False
    person = schemas.load(schemas.person_schema, data)
    if precondition is not None and not precondition(None):
        raise PreconditionFailed("No person exists yet for If-Match to match; leave it out.")
    with store.transaction():
        created = person_out(store.get_person(store.insert_person(columns(person))))
        events.record(store, "person.created", created)
        return created, True


def _without_path_id(data, person_id):
    """A body may repeat the id of its path (and only that id)."""
    if not isinstance(data, dict) or "id" not in data:
        return data
    if data["id"] != str(person_id):
        raise Invalid.of_field("id", "Must match the id in the path.")
    return {key: value for key, value in data.items() if key != "id"}


def replace_person(store, person_id, data, precondition: Precondition | None = None) -> dict:
    """PUT: fields left out become null."""
    person = schemas.load(schemas.person_schema, _without_path_id(data, person_id))
    with _locked(store, person_id, precondition) as (key, _):
        store.update_person(key, columns(person))
        return _updated(store, key)


def update_person(store, person_id, patch, precondition: Precondition | None = None) -> dict:
    """PATCH (a merge patch): null clears a field."""
    changes = schemas.load(schemas.person_patch_schema, _without_path_id(patch, person_id))
    return _merge(store, person_id, changes, precondition)


def _merge(store, person_id, changes: dict, precondition: Precondition | None) -> dict:
    with _locked(store, person_id, precondition) as (key, current):
        if changes.get("address") is not None:
            changes = {**changes, "address": {**current["address"], **changes["address"]}}
        store.update_person(key, columns({**current, **changes}))
        return _updated(store, key)


def _updated(store, key: int) -> dict:
    person = person_out(store.get_person(key))
    events.record(store, "person.updated", person)  # also when nothing changed
    return person


@contextmanager
def _locked(store, person_id, precondition: Precondition | None):
    with store.transaction():
        current = get_person(store, person_id, lock=True)
        if precondition is not None and not precondition(current):
            raise PreconditionFailed()
        yield int(current["id"]), current


def delete_person(store, person_id, precondition: Precondition | None = None) -> None:
    with _locked(store, person_id, precondition) as (key, _):
        store.delete_person(key)
        events.record(store, "person.deleted", {"id": str(key)})


def people_by_ids(store, person_ids: list[str]) -> dict[str, dict]:
    rows = store.get_people([int(pid) for pid in person_ids])
    return {str(row["id"]): person_out(row) for row in rows}


def _friendship(store, person_id, friend_id, adding: bool) -> dict:
    a, b = parse_id(person_id), parse_id(friend_id)
    with store.transaction():
        # each person locked, in id order, so two requests never wait on each other
        found = {key: store.get_person(key, lock=True) for key in sorted({a, b})}
        for key, given in ((a, person_id), (b, friend_id)):
            if found[key] is None:
                raise NotFound(f"No person with id '{given}'.")
        if adding and a == b:
            raise Invalid.of_field("friend_id", "A person cannot befriend themselves.")
        if (store.add_friendship if adding else store.remove_friendship)(a, b):
            kind = "friendship.created" if adding else "friendship.deleted"
            events.record(store, kind, {"person_id": str(a), "friend_id": str(b)})
    return get_person(store, a)


add_friend = partial(_friendship, adding=True)  # mutual, idempotent; returns the first person
remove_friend = partial(_friendship, adding=False)  # fine when there was none


def list_friends(store, person_id, *, limit=None, offset=None) -> tuple[list[dict], int, dict]:
    """A page of a person's friends (id and name), their number, and the checked page."""
    count, skip = page(limit, offset)
    with store.snapshot():
        key = int(get_person(store, person_id)["id"])
        rows, total = store.list_friends(key, count, skip), store.count_friends(key)
    entries = [{"id": str(row["id"]), "name": row["name"]} for row in rows]
    return entries, total, {"limit": count, "offset": skip}


def friends_of(store, person_ids: list[str], limit) -> dict[str, list[dict]]:
    """The first `limit` (checked by list_field_limit) friends of each person, in one call."""
    found = store.friends_of([int(pid) for pid in person_ids], limit)
    return {str(pid): [person_out(row) for row in rows] for pid, rows in found.items()}


def message_out(row: dict) -> dict:
    ids = {"id": str(row["id"]), "person_id": str(row["person_id"])}
    return {**ids, **{key: row[key] for key in ("content", "sender", "created_at")}}


def send_message(store, viewer: Viewer, data) -> dict:
    """Send a message from the caller to a person (NotFound for an unknown person)."""
    message = schemas.load(schemas.message_schema, data)
    row = {"person_id": int(message["person_id"]), "content": message["content"]}
    row |= {"sender_id": viewer.sender_id, "sender": viewer.name}
    with store.transaction():
        sent = message_out(store.insert_message(row))
        events.record(store, "message.created", sent, viewer.sender_id)
    return sent


def get_message(store, viewer: Viewer, message_id) -> dict:
    """A message the caller sent (any message for admins); others are NotFound."""
    row = store.get_message(parse_id(message_id, "message"), viewer.filter)
    if row is None:
        raise NotFound(f"No message with id '{message_id}'.")
    return message_out(row)


def list_messages(store, viewer: Viewer, person_id, *, limit=None, offset=None) -> list[dict]:
    count, skip = page(limit, offset)
    key = int(get_person(store, person_id)["id"])
    return [message_out(row) for row in store.list_messages(key, viewer.filter, count, skip)]


def messages_of(store, viewer: Viewer, person_ids: list[str], limit) -> dict[str, list[dict]]:
    """The caller's newest `limit` (checked) messages to each person, in one store call."""
    found = store.messages_of([int(pid) for pid in person_ids], viewer.filter, limit)
    return {str(pid): [message_out(row) for row in rows] for pid, rows in found.items()}
