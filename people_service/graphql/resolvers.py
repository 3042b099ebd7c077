"""The executable GraphQL schema: schema.graphql bound to resolvers calling the service layer."""

from collections import defaultdict, namedtuple
from functools import cache, partial
from pathlib import Path

import ariadne

from .. import service
from ..errors import Forbidden, InvalidArgument
from ..web.caller import caller_summary

query, mutation = ariadne.QueryType(), ariadne.MutationType()
person, message = ariadne.ObjectType("Person"), ariadne.ObjectType("Message")
SORTS = {key.upper(): key for key in ("id", "name", "age")}
# values arrive as the service's sort items ("-name"): REST and GraphQL share the rules
person_sort = ariadne.EnumType(
    "PersonSort", SORTS | {f"{k}_DESC": f"-{v}" for k, v in SORTS.items()}
)
Context = namedtuple("Context", "store caller batches")  # what one request's resolvers share


def path_of(info) -> tuple:
    return tuple(key for key in info.path.as_list() if isinstance(key, str))  # no list indices


class Batches:
    """Loads a field for all objects at one response path at once; each answer once a request."""

    def __init__(self):
        self.objects = defaultdict(list)  # response path -> objects
        self.answers = defaultdict(dict)  # field and arguments -> {key: value}
        self.seen = defaultdict(set)  # response path -> keys whose objects are in

    forget = __init__  # the data is about to change

    def load(self, info, obj: dict, key: str, field: str, fetch):
        """`field` of `obj` (by `obj[key]`); `fetch(keys) -> {key: value}` loads many at once."""
        here, answers, keys = path_of(info), self.answers[field], [obj[key]]
        if here not in self.seen:  # the first object here: load the whole level
            keys = list(dict.fromkeys([*(o[key] for o in self.objects[here[:-1]]), obj[key]]))
        seen, objects = self.seen[here], self.objects[here]
        if wanted := sorted({k for k in keys if k not in answers}, key=int):
            found = fetch(wanted)
            answers.update((k, found.get(k)) for k in wanted)
        for other in keys:  # their answers are the objects of the next level
            if other not in seen:
                seen.add(other)
                value = answers[other]
                objects.extend(value if isinstance(value, list) else [value] * (value is not None))
        return answers[obj[key]]


def guarded(scope: str, resolver):
    """`resolver(context, **arguments)` as a root field that needs `scope` (else FORBIDDEN)."""

    def resolve(_, info, **kwargs):
        ctx = info.context
        if scope not in ctx.caller.scopes:
            raise Forbidden(f"This needs the scope '{scope}'.")
        if scope == "write":
            ctx.batches.forget()  # the data is about to change
        found = resolver(ctx, **kwargs)
        if isinstance(found, list):  # the first level of the batches
            ctx.batches.objects[path_of(info)].extend(found)
        return found

    return resolve


def find_person(ctx, id=None, name=None):
    if (id is None) == (name is None):
        raise InvalidArgument("Give exactly one of the arguments id and name.")
    store = ctx.store
    return service.get_person(store, id) if id is not None else service.find_person(store, name)


READS = {  # the service checks the arguments
    "person": find_person,
    "people": lambda ctx, **args: service.people_details(ctx.store, **args),
    "message": lambda ctx, id: service.get_message(ctx.store, ctx.caller.viewer, id),
}
WRITES = {
    "createPerson": lambda ctx, input: service.create_person(ctx.store, input)[0],
    "updatePerson": lambda ctx, id, input: service.update_person(ctx.store, id, input),
    "deletePerson": lambda ctx, id: service.delete_person(ctx.store, id) or id,
    "addFriend": lambda ctx, id, friend_id: service.add_friend(ctx.store, id, friend_id),
    "removeFriend": lambda ctx, id, friend_id: service.remove_friend(ctx.store, id, friend_id),
    "sendMessage": lambda ctx, **data: service.send_message(ctx.store, ctx.caller.viewer, data),
}
for field, resolver in READS.items():
    query.set_field(field, guarded("read", resolver))
for field, resolver in WRITES.items():
    mutation.set_field(field, guarded("write", resolver))
query.set_field("me", lambda _, info: caller_summary(info.context.caller))


@person.field("friends")
@person.field("messages")
@message.field("person")
def resolve_batched(obj, info, limit=None):
    """A field of many objects, one store call per response path (no N+1)."""
    ctx, name = info.context, info.field_name
    if name == "person":
        fetch = partial(service.people_by_ids, ctx.store)
        return ctx.batches.load(info, obj, "person_id", name, fetch)
    count, viewer = service.list_field_limit(limit), [ctx.caller.viewer] * (name == "messages")
    fetch = partial(getattr(service, f"{name}_of"), ctx.store, *viewer, limit=count)
    return ctx.batches.load(info, obj, "id", f"{name}:{count}", fetch)


@cache
def sdl() -> str:
    return ariadne.load_schema_from_path(Path(__file__).with_name("schema.graphql"))


@cache
def executable_schema():
    bindables = [query, mutation, person, message, person_sort]
    return ariadne.make_executable_schema(sdl(), *bindables, convert_names_case=True)
