"""Bulk transfer: people in and out of the demo file's JSON format, and whole-database copies."""

import json
from pathlib import Path

from . import schemas
from .errors import Invalid, ServiceError
from .service import columns, person_out


def import_people(store, document) -> tuple[int, int]:
    """Load people in demo.json's format, ids kept, all or nothing: (people, friendships)."""
    if not isinstance(document, dict) or not isinstance(document.get("people"), list):
        raise Invalid("The file must be a JSON object with a 'people' array.")
    people, friendships = {}, []
    for entry in schemas.load(schemas.import_schema, document)["people"]:
        if (person_id := int(entry["id"])) in people:
            raise Invalid(f"Two people in the file have the id '{person_id}'.")
        people[person_id] = {"id": person_id, **columns(entry)}
        friendships.extend((person_id, int(friend)) for friend in entry["friends"])
    if any(a == b for a, b in friendships):
        raise Invalid("A person cannot befriend themselves.")
    with store.transaction():
        others = {b for _, b in friendships if b not in people}
        if unknown := sorted(b for b in others if store.get_person(b) is None):
            raise Invalid(f"Friends refer to unknown people: {', '.join(map(str, unknown[:5]))}.")
        store.import_people(list(people.values()), friendships)
    return len(people), len({tuple(sorted(pair)) for pair in friendships})


def load_demo(store) -> tuple[int, int]:
    return import_people(store, json.loads(Path(__file__).with_name("demo.json").read_bytes()))


def export_people(store) -> tuple[dict, int]:
    """Every person with address and friend ids, in the import format; and the friendship count."""
    rows, pairs = store.export_people()
    friends: dict[int, list[int]] = {}
    for a, b in pairs:
        friends.setdefault(a, []).append(b)
        friends.setdefault(b, []).append(a)
    people = [
        {**person_out(r), "friends": sorted(map(str, friends.get(r["id"], [])), key=int)}
        for r in rows
    ]
    return {"people": people}, len(pairs)


def copy_database(source, target) -> dict[str, int]:
    """Copy every table of one store into another, empty one, and check the counts match."""
    tables = source.dump()
    counts, expected = target.load(tables), {table: len(rows) for table, rows in tables.items()}
    if counts != expected:
        raise ServiceError(f"The copy does not match its source: {counts} != {expected}.")
    return counts
