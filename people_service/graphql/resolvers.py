"""GraphQL resolvers: thin calls into the service layer, batched per level of the query."""

from __future__ import annotations

import functools

from ariadne import EnumType, MutationType, ObjectType, QueryType

from .. import schemas, service
from ..errors import Forbidden, InvalidArgument
from ..web.caller import caller_summary

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
# the `limit` each list field accepts: outside it the field fails before it loads anything,
# so the cost meter counts nothing below it
LIST_LIMITS = {
    "Query.people": schemas.PEOPLE_LIMITS,
    "Person.friends": schemas.LIST_FIELD_LIMITS,
    "Person.messages": schemas.LIST_FIELD_LIMITS,
}


class Context:
    """What every resolver of one request shares."""

    __slots__ = ("store", "caller", "batches")

    def __init__(self, store, caller, batches):
        self.store, self.caller, self.batches = store, caller, batches


def needs(scope: str):
    """A root field that needs a scope: without it, a FORBIDDEN field error."""

    def decorate(resolver):
        @functools.wraps(resolver)
        def wrapper(obj, info, **kwargs):
            if scope not in info.context.caller.scopes:
                raise Forbidden(f"This needs the scope '{scope}'.")
            return resolver(obj, info, **kwargs)

        return wrapper

    return decorate


def mutates(resolver):
    """A mutation field: graphql-core runs them one after another, each with its whole
    selection, so answers loaded for an earlier one are dropped before this one writes."""

    @functools.wraps(resolver)
    def wrapper(obj, info, **kwargs):
        info.context.batches.forget()
        return resolver(obj, info, **kwargs)

    return wrapper


def _returned(info, people: list[dict]) -> list[dict]:
    info.context.batches.register(info.path, people)
    return people


@query.field("person")
@needs("read")
def resolve_person(_, info, id=None, name=None):
    if (id is None) == (name is None):
        raise InvalidArgument("Give exactly one of the arguments id and name.")
    store = info.context.store
    found = service.get_person(store, id) if id is not None else service.find_person(store, name)
    return _returned(info, [found])[0]


@query.field("people")
@needs("read")
def resolve_people(_, info, **args):
    # name, city, country, min_age, max_age, sort, limit and offset, checked by the service
    found = service.people_details(info.context.store, **args)
    return _returned(info, found)


@query.field("message")
@needs("read")
def resolve_message(_, info, id):
    found = service.get_message(info.context.store, info.context.caller.viewer, id)
    return _returned(info, [found])[0]


@query.field("me")
def resolve_me(_, info):
    return caller_summary(info.context.caller)


def _by_id(obj):
    return obj["id"]


@person.field("friends")
def resolve_friends(obj, info, limit=None):
    count = service.list_field_limit(limit)
    store = info.context.store
    return info.context.batches.load(
        info, obj, f"friends:{count}", _by_id, lambda ids: service.friends_of(store, ids, count)
    )


@person.field("messages")
def resolve_messages(obj, info, limit=None):
    count = service.list_field_limit(limit)
    ctx = info.context
    return ctx.batches.load(
        info,
        obj,
        f"messages:{count}",
        _by_id,
        lambda ids: service.messages_of(ctx.store, ctx.caller.viewer, ids, count),
    )


@message.field("person")
def resolve_message_person(obj, info):
    store = info.context.store
    return info.context.batches.load(
        info,
        obj,
        "person",
        lambda msg: msg["person_id"],
        lambda ids: service.people_by_ids(store, ids),
    )


@mutation.field("createPerson")
@needs("write")
@mutates
def resolve_create_person(_, info, input):
    created, _ = service.create_person(info.context.store, input)
    return _returned(info, [created])[0]


@mutation.field("updatePerson")
@needs("write")
@mutates
def resolve_update_person(_, info, id, input):
    return _returned(info, [service.update_person(info.context.store, id, input)])[0]


@mutation.field("deletePerson")
@needs("write")
@mutates
def resolve_delete_person(_, info, id):
    service.delete_person(info.context.store, id)
    return id


@mutation.field("addFriend")
@needs("write")
@mutates
def resolve_add_friend(_, info, id, friend_id):
    return _returned(info, [service.add_friend(info.context.store, id, friend_id)])[0]


@mutation.field("removeFriend")
@needs("write")
@mutates
def resolve_remove_friend(_, info, id, friend_id):
    return _returned(info, [service.remove_friend(info.context.store, id, friend_id)])[0]


@mutation.field("sendMessage")
@needs("write")
@mutates
def resolve_send_message(_, info, person_id, content):
    ctx = info.context
    sent = service.send_message(
        ctx.store, ctx.caller.viewer, {"person_id": person_id, "content": content}
    )
    return _returned(info, [sent])[0]
