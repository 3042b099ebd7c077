"""The OpenAPI 3.1 document, built by apispec from the schemas each view names with @api, and the
query parameters each view takes, checked by webargs (names here, values in the service)."""

import functools
import re
from importlib.metadata import PackageNotFoundError, version

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from flask import current_app, request
from marshmallow import RAISE, Schema, fields, validate
from webargs.flaskparser import FlaskParser
from werkzeug.routing import BaseConverter

from .. import schemas
from ..errors import BadRequest
from ..web import UNCHARGED

PROBLEMS = (
    "An RFC 9457 problem document. 400: a parameter, header or JSON syntax is malformed. "
    "401: credentials are missing or invalid. 403: the credentials lack the scope. "
    "404: no such resource. 409: another person has this email. 410: events after this cursor "
    "were removed (EVENT_RETENTION_DAYS). 412: If-Match does not match the current ETag. "
    "413: the body is larger than MAX_BODY_BYTES. 415: the body is not JSON. 422: the body "
    "breaks the rules; `errors` has the messages per field. 429: over the rate limit. "
    "431: the headers are too large. 500: an unexpected failure. 503: the database is "
    "unavailable, or logins are busy. 507: the database is full; nothing was written."
)
RATE_HEADERS = ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"]
STRING, INTEGER = {"type": "string"}, {"type": "integer"}
HEADERS = {  # every response header the service sends: (schema, description)
    "X-Request-ID": (
        STRING,
        "The request's id: the client's X-Request-ID if it was one of letters, digits and "
        "`._:/+=@-` (1-128), else a new one. The access log names it.",
    ),
    "X-RateLimit-Limit": (INTEGER, "Requests the caller may make in the current window."),
    "X-RateLimit-Remaining": (INTEGER, "Requests left in the current window."),
    "X-RateLimit-Reset": (INTEGER, "When the window resets, in seconds since the epoch."),
    "Retry-After": (INTEGER, "Seconds to wait before trying again."),
    "WWW-Authenticate": (STRING, "How to authenticate: an API key or a bearer token."),
    "ETag": (STRING, "The person's current version."),
    "Location": (STRING, "The URL of what was created."),
    "X-Total-Count": (INTEGER, "Matches in all."),
    "Link": (STRING, 'The next and previous pages: `</people?limit=10&offset=10>; rel="next"`.'),
    "Idempotent-Replayed": (
        {**STRING, "enum": ["true"]},
        "`true` when this is the saved answer to an earlier request with the same Idempotency-Key.",
    ),
}
# any text: what is not an entity tag of the person matches nothing
ETAGS = {**STRING, "examples": ["*", '"5cfe64247a3194e1aef01f703986f715572b8d1d"']}
HEADER_PARAMETERS = {  # request headers a view may name: (schema, description)
    "If-Match": (ETAGS, "Only change the person if its ETag is one of these (or `*`)."),
    "If-None-Match": (ETAGS, "Answer 304 if the person's ETag is one of these."),
    "Last-Event-ID": (
        {**STRING, "pattern": "^(0|[1-9][0-9]{0,17})$"},
        "With text/event-stream: resume after this event id (it wins over `after`).",
    ),
    "Idempotency-Key": (
        {**STRING, "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7e]+$"},
        "Retrying with the same key and body within 24 h replays the answer.",
    ),
}
SHOWN = 10  # names listed in one answer: a hostile query string cannot make it large
QUERY = "query_once"  # webargs' query location, refusing a repeated name
parser = FlaskParser(unknown=RAISE)


@parser.location_loader(QUERY)
def _each_once(req, schema) -> dict:
    repeated = [name[:40] for name, values in req.args.lists() if len(values) > 1][:SHOWN]
    if repeated:
        raise BadRequest(
            f"Query parameter {', '.join(map(repr, repeated))} given more than once; "
            "give each parameter once.",
            errors=dict.fromkeys(repeated, ["Given more than once."]),
        )
    return req.args.to_dict()


@parser.error_handler
def _unknown(error, req, schema, *, error_status_code, error_headers):
    # the schemas of `takes` have only Raw fields: an unknown name is their one error
    names = [name[:40] for name in req.args if name in error.messages[QUERY]][:SHOWN]
    takes = ", ".join(sorted(schema.fields)) or "no query parameters"
    raise BadRequest(
        f"Unknown query parameter{'s' if len(names) > 1 else ''} "
        f"{', '.join(map(repr, names))}; {req.path} takes {takes}.",
        errors=dict.fromkeys(names, ["Unknown parameter."]),
    )


def takes(schema: type[Schema] | None = None):
    """A view that refuses query parameters other than `schema`'s fields, and repeated ones
    (400); it reads their values from request.args as before, and the service checks them."""
    names = {name: fields.Raw() for name in (schema().load_fields if schema else ())}
    checked_names = Schema.from_dict(names)()

    def mark(view):
        @functools.wraps(view)
        def checked(*args, **kwargs):
            if request.query_string:
                parser.parse(checked_names, location=QUERY)
            return view(*args, **kwargs)

        checked.query_names = checked_names
        return checked

    return mark


def check_options() -> None:
    """Flask answers OPTIONS without the view: check the query string as its view would."""
    if request.method == "OPTIONS" and request.query_string:
        names = getattr(current_app.view_functions.get(request.endpoint), "query_names", None)
        if names is not None:
            parser.parse(names, location=QUERY)


def api(*, ok: dict, query=None, body=None, headers=(), auth=True, **more):
    """Document a view (its docstring is the summary): `ok` maps statuses to (text, schema,
    *headers); it takes `query`'s parameters (see takes). `more`: `description`, `tag`,
    `body_type` (one media type: client generators fail on several)."""
    meta = {"ok": ok, "query": query, "body": body, "headers": headers, "auth": auth, **more}

    def mark(view):
        view = takes(query)(view)
        view.apidoc = meta
        return view

    return mark


def _operation(view, rule, method: str) -> dict:
    meta, path_id = view.apidoc, {**STRING, "pattern": schemas.ID_PATTERN}
    parameters = [
        {"in": "path", "name": name, "required": True, "schema": path_id}
        for name in sorted(rule.arguments)
    ] + ([{"in": "query", "schema": meta["query"]}] if meta["query"] else [])
    for name in meta["headers"]:
        schema, text = HEADER_PARAMETERS[name]
        parameters.append({"in": "header", "name": name, "schema": schema, "description": text})
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
    }
    if parameters:
        operation["parameters"] = parameters
    if "description" in meta:
        operation["description"] = meta["description"]
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
    for name, (schema, text) in HEADERS.items():
        spec.components.header(name, {"schema": schema, "description": text})
    spec.components.schema("Problem", schema=ProblemSchema)
    for rule in app.url_map.iter_rules():
        view = app.view_functions[rule.endpoint]
        if hasattr(view, "apidoc"):
            methods = sorted(rule.methods - {"HEAD", "OPTIONS"})
            operations = {method.lower(): _operation(view, rule, method) for method in methods}
            spec.path(re.sub(r"<id:(\w+)>", r"{\1}", rule.rule), operations=operations)
    from .webhooks import openapi_webhooks  # it imports this module

    return {**spec.to_dict(), "webhooks": openapi_webhooks()}


class AddressOutSchema(Schema):
    street = fields.String(required=True, allow_none=True)
    city = fields.String(required=True, allow_none=True)
    country = fields.String(required=True, allow_none=True)


class PersonEntrySchema(Schema):
    id = fields.String(required=True, metadata={"example": "17"})
    name = fields.String(required=True)


class PersonOutSchema(PersonEntrySchema):
    age = fields.Integer(required=True, allow_none=True)
    email = fields.String(required=True, allow_none=True)
    address = fields.Nested(AddressOutSchema, required=True)


class MessageOutSchema(Schema):
    id = fields.String(required=True)
    person_id = fields.String(required=True)
    content = fields.String(required=True)
    sender = fields.String(required=True)
    created_at = fields.DateTime(required=True, metadata={"example": "2026-11-22T03:44:24.123Z"})


class TokenSchema(Schema):
    access_token = fields.String(required=True)
    token_type = fields.String(required=True, metadata={"example": "Bearer"})
    expires_in = fields.Integer(required=True, metadata={"example": 3600})


class CallerSchema(Schema):
    kind = fields.String(required=True, validate=validate.OneOf(["api_key", "user"]))
    name = fields.String(required=True)
    scopes = fields.List(fields.String(), required=True)
    rate_limit = fields.String(required=True)
    request_count = fields.Integer(required=True)
    last_used = fields.DateTime(required=True, allow_none=True)


class HealthSchema(Schema):
    status = fields.String(required=True, validate=validate.OneOf(["ok", "unavailable"]))
    database = fields.String(
        required=True,
        validate=validate.OneOf(["ok", "missing", "read-only", "unreadable", "unreachable"]),
    )


class ProblemSchema(Schema):
    type = fields.String(required=True, metadata={"example": "about:blank"})
    title = fields.String(required=True, metadata={"example": "Unprocessable Entity"})
    status = fields.Integer(required=True, metadata={"example": 422})
    detail = fields.String(required=True)
    errors = fields.Dict(
        metadata={
            "description": "Field messages, nested the way the body nests fields (422); "
            "at most 50 messages.",
            "example": {"address": {"city": ["Longer than maximum length 200."]}},
        }
    )
    errors_omitted = fields.Integer(
        metadata={"description": "How many field messages were left out of `errors`."}
    )


# PUT and PATCH bodies may repeat the path's id (the service checks and drops it)
PATH_ID = {"description": "The id of the path, repeated; any other id is refused (422)."}


class PersonReplaceSchema(schemas.PersonSchema):
    id = schemas.id_field(metadata=PATH_ID)


class PersonMergeSchema(schemas.PersonPatchSchema):
    id = schemas.id_field(metadata=PATH_ID)


class IdConverter(BaseConverter):
    """Path ids are ASCII digits without sign or leading zero, and fit SQLite's integers."""

    regex = schemas.ID_PATTERN.strip("^$")
