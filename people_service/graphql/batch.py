"""Per-request batching of GraphQL field loads, one store call per field and level of a query."""

from __future__ import annotations

from collections import defaultdict


def path_key(path) -> tuple:
    """A response path without list indices: ('people', 'friends') for people[3].friends."""
    keys = []
    while path is not None:
        if isinstance(path.key, str):
            keys.append(path.key)
        path = path.prev
    return tuple(reversed(keys))


class Batches:
    """Loads a field for every object at the same place of a response in one call.

    Resolvers `register` the objects they return under their response path (aliases and all,
    fragments leave no trace in it). When a field of one of those objects is resolved, `load`
    fetches it for every object at that path not loaded yet, and registers what came back under
    the field's own path, so the next level batches too. Answers are kept per field and
    arguments for the whole request: an alias of a field, or a fragment spread twice, reads
    the same answers instead of asking again, so a query costs one call per field and level.

    A mutation field calls `forget` before it changes anything: answers loaded before it (by
    an earlier mutation field of the same document) would show the data as it was.

    A batch holds only the objects at the path that asked, never others at the same depth: a
    sibling `people(limit: 1000)` does not make `person(id: "1") { friends }` fetch a thousand
    people's friends. graphql-core resolves a list item by item, depth first; without this,
    each item would cost a statement.
    """

    def __init__(self):
        self._objects: dict[tuple, list[dict]] = defaultdict(list)
        self._answers: dict[str, dict] = {}
        # (path, field) -> keys of the objects whose answers are registered at that path
        self._covered: dict[tuple, set] = {}

    def forget(self) -> None:
        """Drop the answers loaded so far: the data is about to change. (Objects stay
        registered under their paths, which differ from one mutation field to the next.)"""
        self._answers.clear()

    def register(self, path, objects) -> None:
        """Note objects that a resolver at `path` returned."""
        self._objects[path_key(path)].extend(objects)

    def load(self, info, obj: dict, field: str, key_of, fetch):
        """The value of `field` (its name and arguments) for `obj`; `fetch(keys) -> {key:
        value}` gets many at once."""
        parent = path_key(info.path.prev)
        answers = self._answers.setdefault(field, {})
        key = key_of(obj)
        if key not in answers:
            keys = {key_of(other) for other in self._objects.get(parent, ())}
            keys.add(key)
            wanted = sorted(keys - answers.keys(), key=int)
            found = fetch(wanted)
            for wanted_key in wanted:
                answers[wanted_key] = found.get(wanted_key)
        here = path_key(info.path)
        covered = self._covered.setdefault((here, field), set())
        if key not in covered:
            # every object at `parent` resolves this field here: their answers are the next level
            fresh = {key_of(other) for other in self._objects.get(parent, ())}
            fresh.add(key)
            fresh -= covered
            covered |= fresh
            returned = self._objects[here]
            for fresh_key in fresh:
                value = answers.get(fresh_key)
                if isinstance(value, list):
                    returned.extend(value)
                elif value is not None:
                    returned.append(value)
        return answers.get(key)
