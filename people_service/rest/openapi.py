"""The OpenAPI 3.1 document, generated from the routes and the marshmallow schemas."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin

from .. import schemas
from . import shapes

PROBLEM = "application/problem+json"
ERROR_TEXT = {
    400: "The request is malformed (a parameter, header or JSON syntax).",
    401: "Credentials are missing or invalid.",
    403: "The credentials lack the scope.",
    404: "No such person or message.",
    409: "Another person has this email.",
    412: "If-Match does not match the current ETag.",
    413: "The body is too large.",
    415: "The body is not JSON.",
    422: "The body breaks the rules; `errors` has the messages per field.",
    429: "Over the rate limit; see Retry-After.",
    503: "The database is unavailable; retry later.",
    507: "The database is full; nothing was written.",
}
HEADER_PARAMS = {
    "If-Match": "Only change the person if its ETag is one of these (or `*`).",
    "If-None-Match": "Answer 304 if the person's ETag is one of these.",
    "Idempotency-Key": "Retrying with the same key and body within 24 h replays the answer.",
}


def doc(
    summary: str,
    *,
    ok: dict,
    query=None,
    body=None,
    body_types=("application/json",),
    headers=(),
    errors=(),
    auth=True,
    tag="people",
    description=None,
):
    """Describe a view for the OpenAPI document.

    `ok` maps success statuses to (description, schema or None, response header names);
    `errors` lists statuses beyond the ones implied by auth, body and path parameters.
    """

    def mark(view):
        view.apidoc = {
            "summary": summary,
            "description": description,
            "ok": ok,
            "query": query,
            "body": body,
            "body_types": body_types,
            "headers": headers,
            "errors": set(errors),
            "auth": auth,
            "tag": tag,
        }
        return view

    return mark


RESPONSE_HEADERS = {
    "ETag": {"schema": {"type": "string"}, "description": "The person's current version."},
    "Location": {"schema": {"type": "string"}, "description": "The URL of what was created."},
    "X-Total-Count": {"schema": {"type": "integer"}, "description": "Matches in all."},
    "Link": {"schema": {"type": "string"}, "description": 'rel="next" / rel="prev" pages.'},
    "Idempotent-Replayed": {"schema": {"type": "string"}, "description": "`true` on a replay."},
}


def _operation(meta: dict, path_params: list[str], limited: bool) -> dict:
    statuses = set(meta["errors"])
    if meta["auth"]:
        statuses |= {401, 403}
    if limited:
        statuses.add(429)
    if meta["body"] is not None:
        statuses |= {400, 413, 415, 422}
    if meta["query"] is not None or meta["headers"]:
        statuses.add(400)
    if path_params:
        statuses.add(404)
    if "If-Match" in meta["headers"]:
        statuses.add(412)
    if meta["auth"]:
        statuses.add(503)

    operation: dict = {"summary": meta["summary"], "tags": [meta["tag"]]}
    if meta["description"]:
        operation["description"] = meta["description"]
    parameters: list = [
        {
            "in": "path",
            "name": name,
            "required": True,
            "schema": {"type": "string", "pattern": schemas.ID_PATTERN},
        }
        for name in path_params
    ]
    if meta["query"] is not None:
        parameters.append({"in": "query", "schema": meta["query"]})
    for name in meta["headers"]:
        schema = {"type": "string"}
        if name == "Idempotency-Key":
            schema.update(minLength=1, maxLength=255, pattern="^[\\x20-\\x7e]+$")
        parameters.append(
            {"in": "header", "name": name, "schema": schema, "description": HEADER_PARAMS[name]}
        )
    if parameters:
        operation["parameters"] = parameters
    if meta["body"] is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {kind: {"schema": meta["body"]} for kind in meta["body_types"]},
        }
    responses: dict = {}
    for status, (text, schema, headers) in meta["ok"].items():
        response: dict = {"description": text}
        if schema is not None:
            response["content"] = {"application/json": {"schema": schema}}
        if headers:
            response["headers"] = {name: RESPONSE_HEADERS[name] for name in headers}
        responses[str(status)] = response
    for status in sorted(statuses):
        responses[str(status)] = {
            "description": ERROR_TEXT[status],
            "content": {PROBLEM: {"schema": "Problem"}},
        }
    operation["responses"] = responses
    if meta["auth"]:
        operation["security"] = [{"ApiKey": []}, {"Bearer": []}]
    else:
        operation["security"] = []
    return operation


def build_spec(app, exempt: set[str]) -> dict:
    """The OpenAPI document of every documented route of `app`."""
    try:
        release = version("people-service")
    except PackageNotFoundError:
        release = "0"
    spec = APISpec(
        title="people-service",
        version=release,
        openapi_version="3.1.0",
        plugins=[MarshmallowPlugin()],
        info={
            "description": "People, friendships and messages over REST; the same data over "
            "GraphQL at /graphql. Errors are RFC 9457 problem documents.",
        },
    )
    spec.components.security_scheme(
        "ApiKey", {"type": "apiKey", "in": "header", "name": "X-API-Key"}
    )
    spec.components.security_scheme(
        "Bearer", {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
    )
    spec.components.schema("Problem", schema=shapes.ProblemSchema)
    paths: dict[str, dict] = {}
    for rule in app.url_map.iter_rules():
        view = app.view_functions.get(rule.endpoint)
        meta = getattr(view, "apidoc", None)
        if meta is None:
            continue
        path = rule.rule
        for name in rule.arguments:
            path = path.replace(f"<id:{name}>", "{" + name + "}")
        limited = rule.endpoint not in exempt
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            paths.setdefault(path, {})[method.lower()] = _operation(
                meta, sorted(rule.arguments), limited
            )
    for path, operations in paths.items():
        spec.path(path=path, operations=operations)
    return spec.to_dict()
