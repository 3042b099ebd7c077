"""The OpenAPI 3.1 document, built by apispec from what each view declares with @api, and the
query parameters each view takes (their names; the values are the service's to check)."""

import functools
import re
from importlib.metadata import PackageNotFoundError, version

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from flask import current_app, request
from marshmallow import Schema, fields, validate
from werkzeug.routing import BaseConverter

from .. import schemas
from ..errors import BadRequest
from ..web import UNCHARGED

PROBLEMS = "An RFC 9457 problem document; `errors` has the messages per field (422)."
STRING, INTEGER = {"type": "string"}, {"type": "integer"}
RATE_HEADERS = ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"]
HEADERS = {  # every response header the service sends
    **dict.fromkeys(["X-Request-ID", "WWW-Authenticate", "ETag", "Location", "Link"], STRING),
    **dict.fromkeys([*RATE_HEADERS, "Retry-After", "X-Total-Count"], INTEGER),
    "Idempotent-Replayed": {**STRING, "enum": ["true"]},
}
HEADER_PARAMETERS = {  # request headers a view may name (any text is an entity tag: no match)
    "If-Match": STRING,
    "If-None-Match": STRING,
    "Last-Event-ID": {**STRING, "pattern": "^(0|[1-9][0-9]{0,17})$"},
    "Idempotency-Key": {**STRING, "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7e]+$"},
}
SHOWN = 10  # names listed in one answer: a hostile query string cannot make it large


def check_query(takes: frozenset) -> None:
    """400 for a query parameter given twice or not in `takes`."""
    args = request.args
    if repeated := [name[:40] for name, values in args.lists() if len(values) > 1][:SHOWN]:
        raise BadRequest(
            f"Query parameter {', '.join(map(repr, repeated))} given more than once; "
            "give each parameter once.",
            errors=dict.fromkeys(repeated, ["Given more than once."]),
        )
    if unknown := [name[:40] for name in args if name not in takes][:SHOWN]:
        raise BadRequest(
            f"Unknown query parameter{'s' * (len(unknown) > 1)} {', '.join(map(repr, unknown))}; "
            f"{request.path} takes {', '.join(sorted(takes)) or 'no query parameters'}.",
            errors=dict.fromkeys(unknown, ["Unknown parameter."]),
        )


def takes(schema: type[Schema] | None = None):
    """A view that refuses query parameters not in `schema`, and repeated ones (400)."""
    names = frozenset(schema().load_fields if schema else ())

    def mark(view):
        @functools.wraps(view)
        def checked(*args, **kwargs):
            check_query(names)
            return view(*args, **kwargs)

        checked.query_names = names
        return checked

    return mark


def check_options() -> None:
    """Flask answers OPTIONS without the view: check the query string as its view would."""
    if request.method == "OPTIONS":
        names = getattr(current_app.view_functions.get(request.endpoint), "query_names", None)
        if names is not None:
            check_query(names)


def api(*, ok: dict, query=None, body=None, headers=(), auth=True, **more):
    """Document a view (its docstring is the summary): `ok` maps statuses to (text, schema,
    *headers); `query` is what it takes (see takes); `more`: description, tag, body_type."""

    def mark(view):
        view = takes(query)(view)
        view.apidoc = dict(ok=ok, query=query, body=body, headers=headers, auth=auth, **more)
        return view

    return mark


def _operation(view, rule, method: str) -> dict:
    meta, path_id = view.apidoc, {**STRING, "pattern": schemas.ID_PATTERN}
    parameters = [
        {"in": "path", "name": name, "required": True, "schema": path_id}
        for name in sorted(rule.arguments)
    ] + ([{"in": "query", "schema": meta["query"]}] if meta["query"] else [])
    parameters += [
        {"in": "header", "name": name, "schema": HEADER_PARAMETERS[name]}
        for name in meta["headers"]
    ]
    every = ["X-Request-ID", *([] if rule.endpoint in UNCHARGED else RATE_HEADERS)]
    problem = (PROBLEMS, "Problem", "Retry-After", *(["WWW-Authenticate"] * meta["auth"]))
    responses = {}
    for status, (text, schema, *names) in {**meta["ok"], "default": problem}.items():
        # apispec makes header names into references
        responses[str(status)] = {"description": text, "headers": {n: n for n in every + names}}
        if schema is not None:
            media_type = "application/problem+json" if status == "default" else "application/json"
            responses[str(status)]["content"] = {media_type: {"schema": schema}}
    post = "_post" if method == "POST" and "PATCH" in rule.methods else ""  # POST /person/{id}
    operation = {
        "operationId": view.__name__ + post,
        "summary": view.__doc__,
        "tags": [meta.get("tag", rule.endpoint.split(".")[0])],
        "responses": responses,
        "security": [{"ApiKey": []}, {"Bearer": []}] if meta["auth"] else [],
        **({"parameters": parameters} if parameters else {}),
        **({"description": meta["description"]} if "description" in meta else {}),
    }
    if meta["body"] is not None:
        content = {meta.get("body_type", "application/json"): {"schema": meta["body"]}}
        operation["requestBody"] = {"required": True, "content": content}
    return operation


def release() -> str:
    """The installed package's version."""
    try:
        return version("people-service")
    except PackageNotFoundError:
        return "0"


def build_spec(app, description: str) -> dict:
    """The OpenAPI document of every route of `app` whose view has @api."""
    plugin = MarshmallowPlugin()
    spec = APISpec(
        "people-service", release(), "3.1.0", [plugin], info={"description": description}
    )
    # `format: email` would promise RFC 5322 addresses: schemas.EMAIL_PATTERN says what is taken
    plugin.map_to_openapi_type(fields.Email, "string", None)
    spec.components.security_scheme(
        "ApiKey", {"type": "apiKey", "in": "header", "name": "X-API-Key"}
    )
    spec.components.security_scheme(
        "Bearer", {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
    )
    for name, schema in HEADERS.items():
        spec.components.header(name, {"schema": schema})
    spec.components.schema("Problem", schema=ProblemSchema)
    for rule in app.url_map.iter_rules():
        view = app.view_functions[rule.endpoint]
        if hasattr(view, "apidoc"):
            methods = sorted(rule.methods - {"HEAD", "OPTIONS"})
            operations = {method.lower(): _operation(view, rule, method) for method in methods}
            spec.path(re.sub(r"<id:(\w+)>", r"{\1}", rule.rule), operations=operations)
    from .webhooks import openapi_webhooks  # it imports this module

    return {**spec.to_dict(), "webhooks": openapi_webhooks()}


def req(field=fields.String, *args, **kwargs) -> fields.Field:
    """A field every answer has (client generators then type it as present)."""
    return field(*args, required=True, **kwargs)


class AddressOutSchema(Schema):
    street, city, country = (req(allow_none=True) for _ in range(3))


class PersonEntrySchema(Schema):
    id, name = req(), req()


class PersonOutSchema(PersonEntrySchema):
    age, email = req(fields.Integer, allow_none=True), req(allow_none=True)
    address = req(fields.Nested, AddressOutSchema)


class MessageOutSchema(Schema):
    id, person_id, content, sender = (req() for _ in range(4))
    created_at = req(fields.DateTime)


class TokenSchema(Schema):
    access_token, token_type, expires_in = req(), req(), req(fields.Integer)


class CallerSchema(Schema):
    kind, name, rate_limit = req(validate=validate.OneOf(["api_key", "user"])), req(), req()
    scopes, request_count = req(fields.List, fields.String()), req(fields.Integer)
    last_used = req(fields.DateTime, allow_none=True)


class HealthSchema(Schema):
    status = req(validate=validate.OneOf(["ok", "unavailable"]))
    database = req(
        validate=validate.OneOf(["ok", "missing", "read-only", "unreadable", "unreachable"])
    )


class ProblemSchema(Schema):
    type, title, status, detail = req(), req(), req(fields.Integer), req()
    errors, errors_omitted = fields.Dict(), fields.Integer()


# PUT and PATCH bodies may repeat the path's id (the service checks and drops it)
PATH_ID = {"description": "The id of the path, repeated; any other id is refused (422)."}


class PersonReplaceSchema(schemas.PersonSchema):
    id = schemas.id_field(metadata=PATH_ID)


class PersonMergeSchema(schemas.PersonPatchSchema):
    id = schemas.id_field(metadata=PATH_ID)


class IdConverter(BaseConverter):
    """Path ids are ASCII digits without sign or leading zero, and fit SQLite's integers."""

    regex = schemas.ID_PATTERN.strip("^$")
