"""Per-request batching of GraphQL field loads, one store call per field and level of a query."""

from collections import defaultdict


def path_key(path) -> tuple:
    """A response path without list indices: ('people', 'friends') for people[3].friends."""
    return tuple(key for key in path.as_list() if isinstance(key, str))


class Batches:
    """Loads a field for every object at one response path in one call, once per request."""

    def __init__(self):
        self._objects: dict[tuple, list[dict]] = defaultdict(list)
        self._answers: dict[str, dict] = {}
        # (path, field) -> keys of the objects whose answers are registered at that path
        self._covered: dict[tuple, set] = {}

    def forget(self) -> None:
        """Drop the answers loaded so far: the data is about to change."""
        self._answers.clear()

    def register(self, path, objects) -> None:
        """Note objects that a resolver at `path` returned."""
        self._objects[path_key(path)].extend(objects)

    def load(self, info, obj: dict, field: str, key_of, fetch):
        """`field` (name and arguments) of `obj`; `fetch(keys) -> {key: value}` loads many."""
        here, key = path_key(info.path), key_of(obj)
        answers = self._answers.setdefault(field, {})
        covered = self._covered.setdefault((here, field), set())
        if key in answers and key in covered:
            return answers[key]
        keys = {key_of(other) for other in self._objects.get(here[:-1], ())} | {key}
        if key not in answers:
            wanted = sorted(keys - answers.keys(), key=int)
            found = fetch(wanted)
            answers.update((wanted_key, found.get(wanted_key)) for wanted_key in wanted)
        if key not in covered:  # their answers are the objects of the next level
            for value in map(answers.get, keys - covered):
                if isinstance(value, list):
                    self._objects[here].extend(value)
                elif value is not None:
                    self._objects[here].append(value)
            covered |= keys
        return answers[key]
