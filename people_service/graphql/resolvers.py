"""GraphQL resolvers: thin calls into the service layer, batched per level of the query."""

from __future__ import annotations

from functools import partial, wraps
from operator import itemgetter
from typing import NamedTuple

from ariadne import EnumType, MutationType, ObjectType, QueryType

from .. import service
from ..errors import Forbidden, InvalidArgument
from ..web.caller import caller_summary
from .batch import Batches

query = QueryType()
mutation = MutationType()
person = ObjectType("Person")
message = ObjectType("Message")
# PersonSort values arrive as the service's sort items ("-name"), so REST and GraphQL share
# one rule and its messages
person_sort = EnumType(
    "PersonSort",
    {
        "ID": "id",
        "ID_DESC": "-id",
        "NAME": "name",
        "NAME_DESC": "-name",
        "AGE": "age",
        "AGE_DESC": "-age",
    },
)
bindables = [query, mutation, person, message, person_sort]
_ID = itemgetter("id")


class Context(NamedTuple):
    """What every resolver of one request shares."""

    store: object
    caller: object
    batches: Batches


def needs(scope: str):
    """A root field that needs a scope: without it, a FORBIDDEN field error."""

    def decorate(resolver):
        @wraps(resolver)
        def wrapper(obj, info, **kwargs):
            if scope not in info.context.caller.scopes:
                raise Forbidden(f"This needs the scope '{scope}'.")
            return resolver(obj, info, **kwargs)

        return wrapper

    return decorate


def writes(field: str):
    """A mutation field: it needs `write`. graphql-core runs mutation fields one after another,
    so answers loaded for an earlier one are dropped before this one writes."""

    def decorate(resolver):
        @mutation.field(field)
        @needs("write")
        @wraps(resolver)
        def wrapper(obj, info, **kwargs):
            info.context.batches.forget()
            return resolver(info.context, **kwargs)

        return wrapper

    return decorate


# A root field returning one object needs no registering with the batches: a field of it
# loads for that object alone either way.
@query.field("person")
@needs("read")
def resolve_person(_, info, id=None, name=None):
    if (id is None) == (name is None):
        raise InvalidArgument("Give exactly one of the arguments id and name.")
    store = info.context.store
    return service.get_person(store, id) if id is not None else service.find_person(store, name)


@query.field("people")
@needs("read")
def resolve_people(_, info, **args):
    # name, city, country, min_age, max_age, sort, limit and offset, checked by the service
    found = service.people_details(info.context.store, **args)
    info.context.batches.register(info.path, found)
    return found


@query.field("message")
@needs("read")
def resolve_message(_, info, id):
    return service.get_message(info.context.store, info.context.caller.viewer, id)


@query.field("me")
def resolve_me(_, info):
    return caller_summary(info.context.caller)


@person.field("friends")
def resolve_friends(obj, info, limit=None):
    count = service.list_field_limit(limit)
    fetch = partial(service.friends_of, info.context.store, limit=count)
    return info.context.batches.load(info, obj, f"friends:{count}", _ID, fetch)


@person.field("messages")
def resolve_messages(obj, info, limit=None):
    count = service.list_field_limit(limit)
    ctx = info.context
    fetch = partial(service.messages_of, ctx.store, ctx.caller.viewer, limit=count)
    return ctx.batches.load(info, obj, f"messages:{count}", _ID, fetch)


@message.field("person")
def resolve_message_person(obj, info):
    fetch = partial(service.people_by_ids, info.context.store)
    return info.context.batches.load(info, obj, "person", itemgetter("person_id"), fetch)


@writes("createPerson")
def resolve_create_person(ctx, input):
    return service.create_person(ctx.store, input)[0]


@writes("updatePerson")
def resolve_update_person(ctx, id, input):
    return service.update_person(ctx.store, id, input)


@writes("deletePerson")
def resolve_delete_person(ctx, id):
    service.delete_person(ctx.store, id)
    return id


@writes("addFriend")
def resolve_add_friend(ctx, id, friend_id):
    return service.add_friend(ctx.store, id, friend_id)


@writes("removeFriend")
def resolve_remove_friend(ctx, id, friend_id):
    return service.remove_friend(ctx.store, id, friend_id)


@writes("sendMessage")
def resolve_send_message(ctx, person_id, content):
    return service.send_message(
        ctx.store, ctx.caller.viewer, {"person_id": person_id, "content": content}
    )
