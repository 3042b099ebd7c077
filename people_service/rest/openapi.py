"""The OpenAPI 3.1 document, built from the routes and their schemas; the query strings allowed."""

import functools
import re
from importlib.metadata import PackageNotFoundError, version

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from flask import Blueprint, current_app, request
from marshmallow import Schema, fields, validate
from werkzeug.routing import BaseConverter

from .. import schemas
from ..errors import BadRequest
from ..web.caller import authenticate, check_scope

ERROR_TEXT = {
    400: "The request is malformed (a parameter, header or JSON syntax).",
    401: "Credentials are missing or invalid.",
    403: "The credentials lack the scope.",
    404: "No such person or message.",
    409: "Another person has this email.",
    412: "If-Match does not match the current ETag.",
    413: "The body is larger than MAX_BODY_BYTES.",
    415: "The body is not JSON.",
    422: "The body breaks the rules; `errors` has the messages per field.",
    429: "Over the rate limit; retry after Retry-After seconds.",
    431: "The request's headers are too large.",
    500: "An unexpected failure; the detail says nothing more.",
    503: "The database is unavailable, or logins are busy; retry after Retry-After seconds.",
    507: "The database is full; nothing was written. Reads still work.",
}
# Statuses any operation can answer (a bad override or parameter, too large, a failure)
ALWAYS = {400, 413, 431, 500, 503}
# A view's first method of these is named as the view, others get a suffix (update_person_post)
METHOD_ORDER = ("GET", "PUT", "PATCH", "DELETE", "POST")
# any text: what is not an entity tag of the person matches nothing
ETAGS = {"type": "string", "examples": ["*", '"5cfe64247a3194e1aef01f703986f715572b8d1d"']}
HEADER_PARAMS = {
    "If-Match": (ETAGS, "Only change the person if its ETag is one of these (or `*`)."),
    "If-None-Match": (ETAGS, "Answer 304 if the person's ETag is one of these."),
    "Idempotency-Key": (
        {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7e]+$"},
        "Retrying with the same key and body within 24 h replays the answer.",
    ),
}


def doc(
    summary: str,
    *,
    ok: dict,
    description: str | None = None,
    query=None,
    body=None,
    # one media type: client generators make code that fails for several
    body_type: str = "application/json",
    headers=(),
    errors=(),
    auth: bool = True,
    tag: str = "people",
):
    """Describe a view for the OpenAPI document: `ok` maps statuses to (text, schema, headers)."""
    meta = dict(locals())

    def mark(view):
        view.apidoc = meta
        return view

    return mark


def _header(kind: str, description: str, **schema) -> dict:
    return {"schema": {"type": kind, **schema}, "description": description}


RESPONSE_HEADERS = {
    "X-Request-ID": _header(
        "string",
        "The request's id: the client's X-Request-ID if it was one of letters, digits and "
        "`._:/+=@-` (1-128), else a new one. The access log names it.",
    ),
    "X-RateLimit-Limit": _header("integer", "Requests the caller may make in the current window."),
    "X-RateLimit-Remaining": _header("integer", "Requests left in the current window."),
    "X-RateLimit-Reset": _header("integer", "When the window resets, in seconds since the epoch."),
    "Retry-After": _header("integer", "Seconds to wait before trying again."),
    "WWW-Authenticate": _header("string", "How to authenticate: an API key or a bearer token."),
    "ETag": _header("string", "The person's current version."),
    "Location": _header("string", "The URL of what was created."),
    "X-Total-Count": _header("integer", "Matches in all."),
    "Link": _header(
        "string", 'The next and previous pages: `</people?limit=10&offset=10>; rel="next"`.'
    ),
    "Idempotent-Replayed": _header(
        "string",
        "`true` when this is the saved answer to an earlier request with the same Idempotency-Key.",
        enum=["true"],
    ),
}
RATE_HEADERS = ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")
# Headers of error answers beyond the ones every answer carries.
ERROR_HEADERS = {401: ("WWW-Authenticate",), 429: ("Retry-After",), 503: ("Retry-After",)}


def _operation(meta: dict, operation_id: str, method: str, path_params: list, limited: bool):
    def headers(names) -> dict:
        every = ("X-Request-ID", *(RATE_HEADERS if limited else ()), *names)
        return {name: {"$ref": f"#/components/headers/{name}"} for name in every}

    auth, body, params = meta["auth"], meta["body"] is not None, meta["headers"]
    implied = {
        401: auth,
        403: auth,
        507: auth and method != "GET",
        429: limited,
        415: body,
        422: body or "Idempotency-Key" in params,  # the key was used with another body
        404: bool(path_params),
        412: "If-Match" in params,
    }
    statuses = {status for status, applies in implied.items() if applies}
    statuses |= ALWAYS | set(meta["errors"])
    operation: dict = {"operationId": operation_id, "summary": meta["summary"]}
    operation["tags"] = [meta["tag"]]
    if meta["description"]:
        operation["description"] = meta["description"]
    id_schema = {"type": "string", "pattern": schemas.ID_PATTERN}
    parameters: list = [
        {"in": "path", "name": name, "required": True, "schema": id_schema} for name in path_params
    ]
    if meta["query"] is not None:
        parameters.append({"in": "query", "schema": meta["query"]})
    for name in params:
        schema, text = HEADER_PARAMS[name]
        parameters.append({"in": "header", "name": name, "schema": schema, "description": text})
    if parameters:
        operation["parameters"] = parameters
    if body:
        content = {meta["body_type"]: {"schema": meta["body"]}}
        operation["requestBody"] = {"required": True, "content": content}
    responses = operation["responses"] = {}
    for status, (text, schema, names) in meta["ok"].items():
        responses[str(status)] = {"description": text, "headers": headers(names)}
        if schema is not None:
            responses[str(status)]["content"] = {"application/json": {"schema": schema}}
    for status in sorted(statuses - set(meta["ok"])):
        responses[str(status)] = {
            "description": ERROR_TEXT[status],
            "headers": headers(ERROR_HEADERS.get(status, ())),
            "content": {"application/problem+json": {"schema": "Problem"}},
        }
    operation["security"] = [{"ApiKey": []}, {"Bearer": []}] if auth else []
    return operation


def release() -> str:
    """The installed package's version (the one place that asks importlib.metadata)."""
    try:
        return version("people-service")
    except PackageNotFoundError:
        return "0"


def build_spec(app, exempt: set[str]) -> dict:
    """The OpenAPI document of every documented route of `app`."""
    plugin = MarshmallowPlugin()
    spec = APISpec(
        title="people-service",
        version=release(),
        openapi_version="3.1.0",
        plugins=[plugin],
        info={
            "description": "People, friendships and messages over REST; the same data over "
            "GraphQL at /graphql. Errors are RFC 9457 problem documents. Every answer carries "
            "X-Request-ID; rate-limited ones X-RateLimit-Limit, -Remaining and -Reset."
        },
    )
    # `format: email` would promise RFC 5322 addresses: schemas.EMAIL_PATTERN says what is taken
    plugin.map_to_openapi_type(fields.Email, "string", None)
    spec.components.security_scheme(
        "ApiKey", {"type": "apiKey", "in": "header", "name": "X-API-Key"}
    )
    spec.components.security_scheme(
        "Bearer", {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
    )
    for name, header in RESPONSE_HEADERS.items():
        spec.components.header(name, header)
    spec.components.schema("Problem", schema=ProblemSchema)
    rules = [
        (rule, sorted(rule.methods - {"HEAD", "OPTIONS"}))
        for rule in app.url_map.iter_rules()
        if hasattr(app.view_functions.get(rule.endpoint), "apidoc")
    ]
    # a view may serve several rules (update_person: PATCH and POST): name them together
    methods_of: dict[str, list[str]] = {}
    for rule, methods in rules:
        methods_of.setdefault(rule.endpoint, []).extend(methods)
    paths: dict[str, dict] = {}
    for rule, methods in rules:
        view = app.view_functions[rule.endpoint]
        first = min(methods_of[rule.endpoint], key=METHOD_ORDER.index)
        path = paths.setdefault(re.sub(r"<id:(\w+)>", r"{\1}", rule.rule), {})
        for method in methods:
            name = view.__name__ if method == first else f"{view.__name__}_{method.lower()}"
            path[method.lower()] = _operation(
                view.apidoc, name, method, sorted(rule.arguments), rule.endpoint not in exempt
            )
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
    created_at = fields.String(
        required=True, metadata={"format": "date-time", "example": "2026-11-22T03:44:24.123Z"}
    )


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
    last_used = fields.String(required=True, allow_none=True)


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
    id = schemas.Id(metadata=PATH_ID)


class PersonMergeSchema(schemas.PersonPatchSchema):
    id = schemas.Id(metadata=PATH_ID)


class IdConverter(BaseConverter):
    """Path ids are ASCII digits without sign or leading zero, and fit SQLite's integers."""

    regex = schemas.ID_PATTERN.strip("^$")


SHOWN = 10  # names listed in one answer: a hostile query string cannot make it large


@functools.cache
def accepted(view) -> frozenset[str]:
    """The query parameters of a view: the fields of the query schema its @doc names."""
    schema = getattr(view, "apidoc", {}).get("query")
    return frozenset(schema().load_fields) if schema else frozenset()


def _check_request() -> None:
    if not request.query_string:
        return  # the common case costs nothing
    view = current_app.view_functions.get(request.endpoint)
    if getattr(view, "requires_auth", False) and request.method != "OPTIONS":
        # credentials and scope first, in the order `required` checks them: a caller
        # without them learns nothing about the parameters (401/403 before 400)
        check_scope(authenticate(), "read" if request.method in ("GET", "HEAD") else "write")
    args, allowed = request.args, accepted(view)
    unknown = [name for name in args if name not in allowed]
    if unknown:
        takes = ", ".join(sorted(allowed)) if allowed else "no query parameters"
        plural = "s" if len(unknown) > 1 else ""
        listed = ", ".join(repr(name[:40]) for name in unknown[:SHOWN])
        raise BadRequest(
            f"Unknown query parameter{plural} {listed}; {request.path} takes {takes}.",
            errors={name[:40]: ["Unknown parameter."] for name in unknown[:SHOWN]},
        )
    repeated = [name for name, values in args.lists() if len(values) > 1]
    if repeated:
        listed = ", ".join(repr(name[:40]) for name in repeated)
        raise BadRequest(
            f"Query parameter {listed} given more than once; give each parameter once.",
            errors={name: ["Given more than once."] for name in repeated},
        )


def strict_query(*blueprints: Blueprint) -> None:
    """Refuse unknown and repeated query parameters on every route of these blueprints."""
    for bp in blueprints:
        bp.before_request(_check_request)
