"""The OpenAPI 3.1 document, generated from the routes and the marshmallow schemas."""

import re
from importlib.metadata import PackageNotFoundError, version

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from marshmallow import fields

from .. import schemas
from . import shapes

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
    spec.components.schema("Problem", schema=shapes.ProblemSchema)
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
    return spec.to_dict()
