"""The /graphql endpoint, following the GraphQL-over-HTTP specification."""

import hashlib
import logging
import re

from ariadne import unwrap_graphql_error
from flask import Blueprint, current_app, g, render_template, request
from graphql import GraphQLError, OperationType, get_operation_ast, specified_rules, validate
from graphql.pyutils import snake_to_camel
from graphql.validation.validate import ValidationAbortedError
from werkzeug.wrappers import Response

from ..errors import (
    BadRequest,
    MethodNotAllowed,
    NotAcceptable,
    NotFound,
    ServiceError,
    UnsupportedMediaType,
)
from ..schemas import sentence
from ..web import get_store, ratelimit, services
from ..web.caller import authenticate
from ..web.jsonio import dump_json, json_body, parse_json
from ..web.negotiation import HTML, negotiate
from ..web.pages import asset_url, content_security_policy, html_response, source_of, vendor_url
from ..web.problems import bounded_errors, error_parts, graphql_code, with_headers
from . import parsing
from .executor import LeafExecutor
from .meter import NoIntrospection, introspective, limits_of
from .resolvers import Batches, Context, executable_schema, sdl

bp = Blueprint("graphql", __name__)
log = logging.getLogger("people_service.graphql")

GRAPHQL_RESPONSE = "application/graphql-response+json"
# Introspection answers kept per app (the explorers send one or two distinct queries).
INTROSPECTION_ANSWERS = 32
JSON = "application/json"
# Automatic persisted queries (Apollo's protocol): how many documents are kept, the largest kept
PERSISTED_KEEP = 1000
PERSISTED_MAX_BYTES = 32 * 1024
SHA256 = re.compile(r"[0-9a-f]{64}")
PERSISTED_NOT_FOUND = {
    "errors": [
        {"message": "PersistedQueryNotFound", "extensions": {"code": "PERSISTED_QUERY_NOT_FOUND"}}
    ]
}


def response_type() -> str:
    """The answer's media type from Accept (`*/*` or none: JSON); 406 if neither JSON type."""
    media = negotiate((JSON, GRAPHQL_RESPONSE))
    if media is None:
        raise NotAcceptable(f"This endpoint answers {JSON} or {GRAPHQL_RESPONSE}.")
    return media


def reads_url() -> bool:
    """GET and HEAD take the request from the URL, run only queries and answer alike."""
    return request.method in ("GET", "HEAD")


def persisted_digest(data: dict) -> str | None:
    """The SHA-256 of an automatic persisted query, or None; BadRequest if malformed."""
    persisted = (data.get("extensions") or {}).get("persistedQuery")
    if persisted is None:
        return None
    if not isinstance(persisted, dict) or persisted.get("version") != 1:
        raise BadRequest("Persisted queries: only version 1 is supported.")
    digest = persisted.get("sha256Hash")
    if not isinstance(digest, str) or not SHA256.fullmatch(digest):
        raise BadRequest("'sha256Hash' must be a SHA-256 in 64 lowercase hex digits.")
    query = data.get("query")  # None, or a string (_read_request)
    encoded = None if query is None else query.encode("utf-8", "surrogatepass")
    if encoded is not None and hashlib.sha256(encoded).hexdigest() != digest:
        raise BadRequest("'sha256Hash' is not the SHA-256 of the query.")
    return digest


def _read_request() -> dict:
    if reads_url():
        data = {key: request.args.get(key) for key in ("query", "operationName")}
        for key in ("variables", "extensions"):  # JSON texts
            data[key] = parse_json(request.args[key]) if request.args.get(key) else None
    elif request.mimetype == "application/graphql":
        if request.mimetype_params.get("charset", "utf-8").lower() not in ("utf-8", "utf8"):
            raise UnsupportedMediaType("application/graphql bodies must be UTF-8.")
        data = {"query": request.get_data(as_text=True)}
    elif request.mimetype == JSON:
        data = json_body()
        if isinstance(data, list):
            raise BadRequest("Batched requests (a JSON array) are not supported; send one object.")
        if not isinstance(data, dict):
            raise BadRequest("The body must be a JSON object with a 'query'.")
    else:
        raise UnsupportedMediaType(
            f"POST {JSON} (or application/graphql) to /graphql, not '{request.mimetype}'."
        )
    query, extensions = data.get("query"), data.get("extensions")
    by_hash = query is None and isinstance(extensions, dict) and "persistedQuery" in extensions
    if not by_hash and (not isinstance(query, str) or not query.strip()):
        raise BadRequest("The request needs a 'query' string.")
    for key, kind in (("variables", dict), ("operationName", str), ("extensions", dict)):
        if data.get(key) is not None and not isinstance(data[key], kind):
            raise BadRequest(f"'{key}' must be {'a string' if kind is str else 'a JSON object'}.")
    if data.get("operationName") == "":  # as `?operationName=` by GET: no name given
        data["operationName"] = None
    return data


@parsing.by_text
def validated(text: str, introspection: bool) -> tuple:
    """Validation errors of a text; without introspection, no suggestions naming the schema."""
    specified = specified_rules if introspection else (*specified_rules, NoIntrospection)
    errors = validate(
        executable_schema(),
        parsing.parse_document(text),
        specified,
        max_errors=parsing.VALIDATION_ERRORS,
        hide_suggestions=not introspection,
    )
    if len(errors) <= parsing.VALIDATION_ERRORS and any(
        isinstance(error, ValidationAbortedError) for error in errors
    ):
        # aborted before max_errors was reached: graphql-core gave up on the document itself
        return (parsing.TooComplex("The query is too complex to validate."),)
    return tuple(parsing.with_code(error, "GRAPHQL_VALIDATION_FAILED") for error in errors)


def prepared() -> tuple:
    """(request, document, executor, request errors, cost or None if too complex), once."""
    if "graphql_prepared" not in g:
        data = _read_request()
        digest = persisted_digest(data)
        if digest is not None and data.get("query") is None:
            data["query"] = get_store().get_persisted(digest)
        elif digest is not None:
            g.graphql_persist = digest  # stored once the document proves valid
        g.graphql_prepared = (data, *_prepare(data))
    return g.graphql_prepared


def _prepare(data: dict) -> tuple:
    if data["query"] is None:  # a persisted query's hash this service does not know
        return None, None, (), 1
    schema, config, name = executable_schema(), current_app.config, data.get("operationName")
    try:
        document = parsing.parse_document(data["query"])
        parsing.check_variables(data.get("variables"))
    except parsing.TooComplex as error:
        return None, None, [error], None
    except GraphQLError as error:
        return None, None, [error], 1
    operation = get_operation_ast(document, name)  # None: no such operation, nothing runs
    if reads_url() and operation is not None and operation.operation != OperationType.QUERY:
        raise with_headers(MethodNotAllowed("Mutations must be sent with POST."), {"Allow": "POST"})
    executor = LeafExecutor.build(
        schema,
        document,
        context_value=Context(get_store(), authenticate(), Batches()),
        raw_variable_values=data.get("variables") or {},
        operation_name=name,
        max_coercion_errors=parsing.COERCION_ERRORS,
        hide_suggestions=not config["INTROSPECTION"],
    )
    values = None if isinstance(executor, list) else executor.variable_values
    errors, cost = limits_of(schema, document, values, operation, config, ratelimit.budget())
    if errors:
        return None, None, errors, None
    errors = validated(data["query"], config["INTROSPECTION"])
    if errors:
        # measured before it was validated, an invalid document pays its estimate: documents
        # made to be expensive to validate cannot be sent for 1 each
        too_complex = isinstance(errors[0], parsing.TooComplex)
        return None, None, errors, None if too_complex else max(1, cost)
    if isinstance(executor, list):
        # no such operation (a bad request), or variables that do not fit (bad user input)
        code = "BAD_USER_INPUT" if operation is not None else "BAD_REQUEST"
        return document, None, [parsing.with_code(error, code) for error in executor], 1
    if not data.get("variables") and introspective(operation):
        g.graphql_answers = services().introspection  # the app's kept introspection answers
        if (data["query"], name) in g.graphql_answers:
            cost = 1  # the kept answer is reused
    return document, executor, (), cost


def rate_limit_cost() -> int | None:
    """What the rate limit charges this request (web.ratelimit asks, once authenticated)."""
    response_type()  # a request answered 406 costs 1, as any other error
    return prepared()[4]


def execute() -> tuple[dict, bool]:
    """Run this GraphQL request; returns the result and whether it was a request error."""
    data, document, executor, errors, cost = prepared()
    persist = g.get("graphql_persist") if document is not None else None  # a valid document
    if persist and len(data["query"].encode("utf-8", "surrogatepass")) <= PERSISTED_MAX_BYTES:
        get_store().put_persisted(persist, data["query"], PERSISTED_KEEP)
    if errors:
        return {"errors": [format_error(error) for error in errors]}, True
    operation = executor.operation  # counted by web.metrics once answered
    name = operation.name.value if operation.name else None
    g.graphql_operation = (name, operation.operation.value, cost)
    answers = g.get("graphql_answers")
    key = data["query"], data.get("operationName")
    if answers is not None and key in answers:
        return answers[key], False
    result = executor.execute_operation()
    answer = {"data": result.data}
    if result.errors:
        answer["errors"] = [format_error(error) for error in result.errors]
    if answers is not None and len(answers) < INTROSPECTION_ANSWERS:
        answers[key] = answer
    return answer, False


def graphql_names(errors):
    """The service's field messages keyed by their GraphQL names (min_age: minAge)."""
    if isinstance(errors, dict):
        # list indices and _schema (the object as a whole) stay as they are
        return {
            (snake_to_camel(key, False) if str(key)[:1].isalpha() else key): graphql_names(value)
            for key, value in errors.items()
        }
    if isinstance(errors, list):
        return [graphql_names(item) for item in errors]
    return errors


def format_error(error: GraphQLError) -> dict:
    """Every error gets extensions.code; a resolver's own exception text never leaves."""
    formatted = error.formatted
    original = unwrap_graphql_error(error)
    if isinstance(original, ServiceError):
        formatted["message"] = original.detail
        extensions = {"code": original.graphql_code}
        if original.errors:
            named = graphql_names(original.errors)
            if original.detail == sentence(original.errors):
                formatted["message"] = sentence(named)
            extensions["errors"], omitted = bounded_errors(named)
            if omitted:
                extensions["errors_omitted"] = omitted
    elif original is not None:
        log.error("resolver failed at %s", error.path, exc_info=original)
        formatted["message"] = "Internal server error"
        extensions = {"code": "INTERNAL_SERVER_ERROR"}
    else:
        extensions = dict(error.extensions or {})
        if not extensions.get("code"):
            extensions["code"] = "BAD_REQUEST" if error.path is None else "INTERNAL_SERVER_ERROR"
    formatted["extensions"] = extensions
    return formatted


# Playground's own defaults poll the schema every 2 s, each poll an introspection query charged
# to the key's rate limit; the schema reloads with the page or the refresh button instead.
PLAYGROUND_SETTINGS = {
    "schema.polling.enable": False,
    "request.credentials": "omit",
    "editor.reuseHeaders": True,
    "tracing.hideTracingResponse": True,
}


def _assets(explorer: str, url) -> dict:
    if explorer == "graphiql":
        return {
            "css": url("graphiql", "dist/style.css"),
            "scripts": [
                url("react", "umd/react.production.min.js"),
                url("react-dom", "umd/react-dom.production.min.js"),
                url("graphiql", "dist/index.umd.js"),
            ],
            "config": {},
        }
    package = "graphql-playground-react"
    return {
        "css": url(package, "build/static/css/index.css"),
        "favicon": url(package, "build/favicon.png"),
        "logo": url(package, "build/logo.png"),
        "scripts": [url(package, "build/static/js/middleware.js")],
        "config": {"settings": PLAYGROUND_SETTINGS},
    }


def _relative(url: str) -> str:
    """A URL relative to the page: the page, cached for all, holds no request's mount prefix."""
    return url if "//" in url else url.removeprefix(request.script_root).lstrip("/")  # //: a CDN


def explorer_response():
    """The explorer page the config names (rendered once per app)."""
    explorer, cdn = current_app.config["EXPLORER"], current_app.config["EXPLORER_CDN"]
    ext = services()
    if ext.explorer is None:  # the page holds no prefix and depends only on the config
        page = _assets(explorer, lambda package, path: _relative(vendor_url(package, path, cdn)))
        ext.explorer = render_template(
            f"{explorer}.html",
            **page,
            title="people-service",
            explorer_css=_relative(asset_url("pages/explorer.css")),
            init=_relative(asset_url(f"pages/{explorer}.js")),
        )
    # scripts from files only (this server or the CDN), styles also inline (React sets them)
    policy = content_security_policy(inline_styles=True, origin=source_of(cdn))
    return html_response(ext.explorer, policy)


def graphql_response(body, status: int, media: str, headers=None) -> Response:
    return Response(dump_json(body), status=status, headers=headers, content_type=media)


@bp.route("/graphql", methods=["GET", "POST"])
def graphql_endpoint():
    if reads_url() and "query" not in request.args and "extensions" not in request.args:
        # a browser (it prefers HTML to both JSON types) gets the explorer, open to anyone
        browser = negotiate((JSON, GRAPHQL_RESPONSE, HTML)) == HTML
        if browser and current_app.config["EXPLORER"] != "none":
            return explorer_response()
        raise BadRequest("Send a query: GET /graphql?query={...} or POST a JSON body.")
    media = response_type()
    authenticate()
    data = prepared()[0]
    if data["query"] is None:
        # HTTP 200: Apollo's clients answer it by sending the query with its hash
        return graphql_response(PERSISTED_NOT_FOUND, 200, media)
    result, request_error = execute()
    status = 400 if request_error and media == GRAPHQL_RESPONSE else 200
    if request.args.get("unwrap") == "1" and reads_url() and "errors" not in result:
        result = result["data"]  # a request error has errors: this is a 200
    response = graphql_response(result, status, media)
    if reads_url() and "persistedQuery" in (data.get("extensions") or {}):
        # a persisted GET is short and cacheable: an ETag, and 304 for a client that has it
        response.add_etag()
        response.make_conditional(request)
    return response


# the rate limit charges it the query's cost, once the caller and the document are known
graphql_endpoint.rate_limit_cost = rate_limit_cost


@bp.get("/graphql/schema.graphql")
def schema_sdl():
    authenticate()
    if not current_app.config["INTROSPECTION"]:
        raise NotFound("The schema is not published (introspection is off).")
    return Response(sdl(), content_type="text/plain; charset=utf-8")


@bp.errorhandler(Exception)
def graphql_error(error):
    """Errors of the GraphQL endpoint in GraphQL's shape, with the HTTP status they carry."""
    status, detail, field_errors, headers = error_parts(error)
    code = error.graphql_code if isinstance(error, ServiceError) else graphql_code(status)
    entry = {"message": detail, "extensions": {"code": code}}
    if field_errors:
        entry["extensions"]["errors"] = field_errors
    media = negotiate((JSON, GRAPHQL_RESPONSE)) or JSON  # JSON also for a 406
    return graphql_response({"errors": [entry]}, status, media, headers)
