"""The OpenAPI 3.1 document, built by apispec from the views' marshmallow schemas, and the
query-string check that makes the documented parameters the only ones a route takes."""

import re
from collections import Counter
from importlib.metadata import PackageNotFoundError, version

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from flask import Blueprint, current_app, request
from marshmallow import Schema, fields, validate
from werkzeug.routing import BaseConverter

from .. import schemas
from ..errors import BadRequest
from ..web.caller import authenticate, check_scope, needed_scope

# Errors are one `default` answer per operation: the statuses below, as problem documents.
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
        {"type": "string", "pattern": "^(0|[1-9][0-9]{0,17})$"},
        "With text/event-stream: resume after this event id (it wins over `after`).",
    ),
    "Idempotency-Key": (
        {**STRING, "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7e]+$"},
        "Retrying with the same key and body within 24 h replays the answer.",
    ),
}


def doc(summary: str, *, ok: dict, query=None, body=None, headers=(), **more):
    """Describe a view for the OpenAPI document: `ok` maps statuses to (text, schema, headers);
    `query` is the schema of the only query parameters the view takes. `more`: `description`,
    `body_type` (one media type: client generators fail on several), `auth`, `tag`."""
    meta = {"summary": summary, "ok": ok, "query": query, "body": body, "headers": headers}
    meta |= {"body_type": "application/json", "auth": True, "tag": "people"} | more
    meta["parameters"] = frozenset(query().load_fields) if query else frozenset()

    def mark(view):
        view.apidoc = meta
        return view

    return mark


def _operation(meta: dict, path_parameters: list, limited: bool) -> dict:
    """One operation of the document: parameters, body, its answers and the problem `default`."""
    id_schema = {**STRING, "pattern": schemas.ID_PATTERN}
    parameters = [
        {"in": "path", "name": name, "required": True, "schema": id_schema}
        for name in path_parameters
    ]
    if meta["query"] is not None:
        parameters.append({"in": "query", "schema": meta["query"]})
    for name in meta["headers"]:
        schema, text = HEADER_PARAMETERS[name]
        parameters.append({"in": "header", "name": name, "schema": schema, "description": text})
    every = ["X-Request-ID", *(RATE_HEADERS if limited else [])]
    problem = ["Retry-After", *(["WWW-Authenticate"] if meta["auth"] else [])]
    answers = {**meta["ok"], "default": (PROBLEMS, "Problem", problem)}
    responses = {}
    for status, (text, schema, names) in answers.items():
        # apispec makes header names into references
        response = {"description": text, "headers": {name: name for name in every + names}}
        if schema is not None:
            media_type = "application/problem+json" if status == "default" else "application/json"
            response["content"] = {media_type: {"schema": schema}}
        responses[str(status)] = response
    operation = {"summary": meta["summary"], "tags": [meta["tag"]], "responses": responses}
    if meta.get("description"):
        operation["description"] = meta["description"]
    if parameters:
        operation["parameters"] = parameters
    if meta["body"] is not None:
        content = {meta["body_type"]: {"schema": meta["body"]}}
        operation["requestBody"] = {"required": True, "content": content}
    operation["security"] = [{"ApiKey": []}, {"Bearer": []}] if meta["auth"] else []
    return operation


def release() -> str:
    """The installed package's version (the one place that asks importlib.metadata)."""
    try:
        return version("people-service")
    except PackageNotFoundError:
        return "0"


def build_spec(app, unlimited: set[str], description: str) -> dict:
    """The OpenAPI document of every route of `app` whose view has @doc."""
    plugin = MarshmallowPlugin()
    spec = APISpec(
        title="people-service",
        version=release(),
        openapi_version="3.1.0",
        plugins=[plugin],
        info={"description": description},
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
    views = app.view_functions
    rules = [
        rule for rule in app.url_map.iter_rules() if hasattr(views.get(rule.endpoint), "apidoc")
    ]
    routes = Counter(rule.endpoint for rule in rules)  # update_person answers PATCH and POST
    paths: dict[str, dict] = {}
    for rule in rules:
        view, post = views[rule.endpoint], "_post" if routes[rule.endpoint] > 1 else ""
        operations = paths.setdefault(re.sub(r"<id:(\w+)>", r"{\1}", rule.rule), {})
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            limited = rule.endpoint not in unlimited
            operation = _operation(view.apidoc, sorted(rule.arguments), limited)
            name = view.__name__ + (post if method == "POST" else "")  # POST /person/{id}
            operations[method.lower()] = {"operationId": name, **operation}
    for path, operations in paths.items():
        spec.path(path=path, operations=operations)
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


# Bodies as the OpenAPI document describes them where the service accepts more than the
# rule's schema: PUT and PATCH may repeat the path's id (the service checks and drops it).
PATH_ID = {"description": "The id of the path, repeated; any other id is refused (422)."}


class PersonReplaceSchema(schemas.PersonSchema):
    id = schemas.id_field(metadata=PATH_ID)


class PersonMergeSchema(schemas.PersonPatchSchema):
    id = schemas.id_field(metadata=PATH_ID)


class IdConverter(BaseConverter):
    """Path ids are ASCII digits without sign or leading zero, and fit SQLite's integers."""

    regex = schemas.ID_PATTERN.strip("^$")


def accepted(view) -> frozenset[str]:
    """The query parameters a view takes: the fields of the query schema its @doc names."""
    return getattr(view, "apidoc", {}).get("parameters", frozenset())


SHOWN = 10  # names listed in one answer: a hostile query string cannot make it large


STRICT: set[str] = set()  # the blueprints whose routes refuse query parameters they don't take


def check_query() -> None:
    """Refuse unknown and repeated query parameters (400), after credentials and scope."""
    if not request.query_string or request.blueprint not in STRICT:
        return  # the common case costs nothing
    view = current_app.view_functions.get(request.endpoint)
    if getattr(view, "apidoc", {}).get("auth") and request.method != "OPTIONS":
        # 401 and 403 first, as `required` orders them: a caller without credentials or
        # scope learns nothing about the parameters
        check_scope(authenticate(), needed_scope(view))
    allowed = accepted(view)
    unknown = [name[:40] for name in request.args if name not in allowed][:SHOWN]
    if unknown:
        takes = ", ".join(sorted(allowed)) or "no query parameters"
        plural = "s" if len(unknown) > 1 else ""
        raise BadRequest(
            f"Unknown query parameter{plural} {', '.join(map(repr, unknown))}; "
            f"{request.path} takes {takes}.",
            errors={name: ["Unknown parameter."] for name in unknown},
        )
    repeated = [name for name, values in request.args.lists() if len(values) > 1]
    if repeated:
        raise BadRequest(
            f"Query parameter {', '.join(map(repr, repeated))} given more than once; "
            "give each parameter once.",
            errors={name: ["Given more than once."] for name in repeated},
        )


def strict_query(*blueprints: Blueprint) -> None:
    """Check the query string of every route of these blueprints before its view (check_query,
    which create_app runs before every view)."""
    STRICT.update(bp.name for bp in blueprints)
