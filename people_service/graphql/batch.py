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

    Resolvers `register` the objects they return under their response path. When a field of
    one of those objects is resolved, `load` fetches it for all of them at once, caches the
    answers and registers what came back, so the next level batches too. graphql-core resolves
    a list item by item, depth first; without this, each item would cost a statement.
    """

    def __init__(self):
        self._objects: dict[tuple, list[dict]] = defaultdict(list)
        self._cache: dict[tuple, dict] = {}

    def register(self, path, objects) -> None:
        """Note objects that a resolver at `path` returned."""
        self._objects[path_key(path)].extend(objects)

    def load(self, info, obj: dict, field: str, key_of, fetch):
        """The value of `field` for `obj`; `fetch(keys) -> {key: value}` gets many at once."""
        parent = path_key(info.path.prev)
        results = self._cache.setdefault((parent, field), {})
        key = key_of(obj)
        if key not in results:
            keys = {key_of(other) for other in self._objects.get(parent, ())}
            keys.add(key)
            wanted = sorted(keys - results.keys(), key=int)
            found = fetch(wanted)
            for wanted_key in wanted:
                results[wanted_key] = found.get(wanted_key)
            returned = []
            for value in found.values():
                if isinstance(value, list):
                    returned.extend(value)
                elif value is not None:
                    returned.append(value)
            self.register(info.path, returned)
        return results.get(key)
