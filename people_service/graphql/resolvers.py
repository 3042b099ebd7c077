"""The executable GraphQL schema: schema.graphql bound to resolvers calling the service layer."""

from collections import defaultdict, namedtuple
from functools import cache, partial, wraps
from operator import itemgetter
from pathlib import Path

from ariadne import (
    EnumType,
    MutationType,
    ObjectType,
    QueryType,
    load_schema_from_path,
    make_executable_schema,
)

from .. import service
from ..errors import Forbidden, InvalidArgument
from ..web.caller import caller_summary

query = QueryType()
mutation = MutationType()
person = ObjectType("Person")
message = ObjectType("Message")
# PersonSort values arrive as the service's sort items ("-name"): REST and GraphQL share rules
_SORTS = {key.upper(): key for key in ("id", "name", "age")}
person_sort = EnumType(
    "PersonSort", {**_SORTS, **{f"{name}_DESC": f"-{key}" for name, key in _SORTS.items()}}
)


def path_key(path) -> tuple:
    """A response path without list indices: ('people', 'friends') for people[3].friends."""
    return tuple(key for key in path.as_list() if isinstance(key, str))


class Batches:
    """Loads a field for all objects at one response path at once; each answer once a request."""

    def __init__(self):
        self._objects: dict[tuple, list[dict]] = defaultdict(list)  # response path -> objects
        self._answers: dict[str, dict] = defaultdict(dict)  # field -> {key: value}
        self._seen: dict[tuple, set] = {}  # response path -> keys whose objects are in

    def forget(self) -> None:
        """Drop the answers loaded so far: the data is about to change."""
        for kept in (self._objects, self._answers, self._seen):
            kept.clear()

    def register(self, path, objects) -> None:
        """Note objects that a resolver at `path` returned."""
        self._objects[path_key(path)].extend(objects)

    def load(self, info, obj: dict, field: str, key_of, fetch):
        """`field` (name and arguments) of `obj`; `fetch(keys) -> {key: value}` loads many."""
        here, key, answers = path_key(info.path), key_of(obj), self._answers[field]
        keys = [key]
        if here not in self._seen:  # the first object here: load the whole level
            self._seen[here] = set()
            keys = list(dict.fromkeys([*map(key_of, self._objects.get(here[:-1], ())), key]))
        wanted = sorted({key for key in keys if key not in answers}, key=int)
        if wanted:
            found = fetch(wanted)
            answers.update((key, found.get(key)) for key in wanted)
        seen, objects = self._seen[here], self._objects[here]
        for other in keys:  # their answers are the objects of the next level
            if other not in seen:
                seen.add(other)
                value = answers[other]
                objects.extend(value if isinstance(value, list) else [value] * (value is not None))
        return answers[key]


Context = namedtuple("Context", "store caller batches")  # what one request's resolvers share


def guarded(root, field: str, scope: str):
    """Binds a root field that needs `scope` (else FORBIDDEN); a mutation drops loaded answers."""

    def decorate(resolver):
        @root.field(field)
        @wraps(resolver)
        def wrapper(_, info, **kwargs):
            if scope not in info.context.caller.scopes:
                raise Forbidden(f"This needs the scope '{scope}'.")
            if root is mutation:
                info.context.batches.forget()
            return resolver(info, **kwargs)

        return resolver  # as it was: another guarded() can bind it to one more field

    return decorate


# A root field returning one object needs no registering with the batches: a field of it
# loads for that object alone either way.
@guarded(query, "person", "read")
def resolve_person(info, id=None, name=None):
    if (id is None) == (name is None):
        raise InvalidArgument("Give exactly one of the arguments id and name.")
    store = info.context.store
    return service.get_person(store, id) if id is not None else service.find_person(store, name)


@guarded(query, "people", "read")
def resolve_people(info, **args):
    # name, city, country, min_age, max_age, sort, limit and offset, checked by the service
    found = service.people_details(info.context.store, **args)
    info.context.batches.register(info.path, found)
    return found


@guarded(query, "message", "read")
def resolve_message(info, id):
    return service.get_message(info.context.store, info.context.caller.viewer, id)


@query.field("me")
def resolve_me(_, info):
    return caller_summary(info.context.caller)


@person.field("friends")
def resolve_friends(obj, info, limit=None):
    count = service.list_field_limit(limit)
    fetch = partial(service.friends_of, info.context.store, limit=count)
    return info.context.batches.load(info, obj, f"friends:{count}", itemgetter("id"), fetch)


@person.field("messages")
def resolve_messages(obj, info, limit=None):
    count = service.list_field_limit(limit)
    ctx = info.context
    fetch = partial(service.messages_of, ctx.store, ctx.caller.viewer, limit=count)
    return ctx.batches.load(info, obj, f"messages:{count}", itemgetter("id"), fetch)


@message.field("person")
def resolve_message_person(obj, info):
    fetch = partial(service.people_by_ids, info.context.store)
    return info.context.batches.load(info, obj, "person", itemgetter("person_id"), fetch)


@guarded(mutation, "createPerson", "write")
def resolve_create_person(info, input):
    return service.create_person(info.context.store, input)[0]


@guarded(mutation, "updatePerson", "write")
def resolve_update_person(info, id, input):
    return service.update_person(info.context.store, id, input)


@guarded(mutation, "deletePerson", "write")
def resolve_delete_person(info, id):
    service.delete_person(info.context.store, id)
    return id


@guarded(mutation, "addFriend", "write")
@guarded(mutation, "removeFriend", "write")
def resolve_friendship(info, id, friend_id):
    change = service.add_friend if info.field_name == "addFriend" else service.remove_friend
    return change(info.context.store, id, friend_id)


@guarded(mutation, "sendMessage", "write")
def resolve_send_message(info, **data):  # person_id and content, both required
    return service.send_message(info.context.store, info.context.caller.viewer, data)


@cache
def sdl() -> str:
    """The schema's SDL text, as written (at the repository root; the package links to it)."""
    return load_schema_from_path(Path(__file__).with_name("schema.graphql"))


@cache
def executable_schema():
    bindables = [query, mutation, person, message, person_sort]
    return make_executable_schema(sdl(), *bindables, convert_names_case=True)
