"""The /graphql endpoint, following the GraphQL-over-HTTP specification."""

from __future__ import annotations

import logging
from functools import lru_cache

from ariadne import graphql_sync
from ariadne.explorer import ExplorerGraphiQL, ExplorerPlayground
from flask import Blueprint, current_app, g, request
from graphql import GraphQLError, OperationType, get_operation_ast, validate
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response

from ..errors import (
    BadRequest,
    MethodNotAllowed,
    NotAcceptable,
    NotFound,
    ServiceError,
    UnsupportedMediaType,
    graphql_code,
)
from ..web import get_store, services
from ..web.caller import authenticate
from ..web.jsonio import dump_json, json_body, parse_json
from ..web.problems import bounded_errors, error_parts
from . import rules
from .batch import Batches
from .executor import LeafExecutor
from .resolvers import Context
from .schema import executable_schema, sdl

log = logging.getLogger("people_service.graphql")
# ariadne logs every error with a traceback; ours are formatted and logged in format_error
quiet = logging.getLogger("people_service.graphql.ariadne")
quiet.propagate = False
quiet.setLevel(logging.CRITICAL)

bp = Blueprint("graphql", __name__)

GRAPHQL_RESPONSE = "application/graphql-response+json"
JSON = "application/json"
PLAYGROUND_CDN = "https://cdn.jsdelivr.net/npm/graphql-playground-react@1.7.28/build"


# -- request parsing ----------------------------------------------------------------------


def response_type() -> str:
    """The media type of the answer, from Accept (406 when neither JSON type is acceptable)."""
    if not request.headers.get("Accept"):
        return JSON
    accept = request.accept_mimetypes
    if any(value == GRAPHQL_RESPONSE and quality > 0 for value, quality in accept):
        return GRAPHQL_RESPONSE
    if accept[JSON] > 0:
        return JSON
    raise NotAcceptable(f"This endpoint answers {JSON} or {GRAPHQL_RESPONSE}.")


def request_data() -> dict:
    """The GraphQL request (query, variables, operationName) of this HTTP request, once."""
    if "graphql_request" not in g:
        g.graphql_request = _read_request()
    return g.graphql_request


def _read_request() -> dict:
    if request.method == "GET":
        args = request.args
        variables = args.get("variables")
        extensions = args.get("extensions")
        data = {
            "query": args.get("query"),
            "operationName": args.get("operationName") or None,
            "variables": parse_json(variables) if variables else None,
            "extensions": parse_json(extensions) if extensions else None,
        }
    elif request.mimetype == "application/graphql":
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
    query = data.get("query")
    if not isinstance(query, str) or not query.strip():
        raise BadRequest("The request needs a 'query' string.")
    if data.get("variables") is not None and not isinstance(data["variables"], dict):
        raise BadRequest("'variables' must be a JSON object.")
    if data.get("operationName") is not None and not isinstance(data["operationName"], str):
        raise BadRequest("'operationName' must be a string.")
    if data.get("extensions") is not None and not isinstance(data["extensions"], dict):
        raise BadRequest("'extensions' must be a JSON object.")
    return data


def checked_document():
    """(document, cost, error) of this request, once: the limiter and the view both need it.

    `error` is the parse error (document None) or the limit the document breaks.
    """
    if "graphql_checked" not in g:
        data = request_data()
        config = current_app.config
        limits_of = (config["GRAPHQL_MAX_DEPTH"], config["GRAPHQL_MAX_COST"])
        variables = data.get("variables")
        if variables:
            g.graphql_checked = _check(
                data["query"], data.get("operationName"), variables, *limits_of
            )
        else:  # the usual GET: the same text always measures the same
            g.graphql_checked = _check_cached(data["query"], data.get("operationName"), *limits_of)
    return g.graphql_checked


def _check(text: str, operation_name, variables, max_depth: int, max_cost: int):
    try:
        document = rules.parse_document(text)
    except GraphQLError as error:
        return None, 1, error
    schema = executable_schema()
    try:
        cost = rules.check(schema, document, operation_name, variables, max_depth, max_cost)
    except rules.TooComplex as error:
        return document, 1, error
    return document, cost, None


@lru_cache(maxsize=512)
def _check_cached(text: str, operation_name, max_depth: int, max_cost: int):
    return _check(text, operation_name, None, max_depth, max_cost)


def estimate_cost() -> int:
    """What the rate limit charges: the query's estimated cost (1 when it will be refused)."""
    try:
        return checked_document()[1]
    except (ServiceError, HTTPException):
        return 1  # a malformed request: the view answers it


# -- execution ------------------------------------------------------------------------------


def _code(error: GraphQLError) -> str:
    if error.extensions and error.extensions.get("code"):
        return error.extensions["code"]
    if error.path is None:
        return "BAD_USER_INPUT" if error.message.startswith("Variable") else "BAD_REQUEST"
    return "INTERNAL_SERVER_ERROR"


def format_error(error: GraphQLError, debug: bool = False) -> dict:
    """Every error gets extensions.code; a resolver's own exception text never leaves."""
    formatted = error.formatted
    original = error.original_error
    while isinstance(original, GraphQLError) and original.original_error is not None:
        original = original.original_error
    if isinstance(original, ServiceError):
        formatted["message"] = original.detail
        extensions = {"code": original.graphql_code}
        if original.errors:
            extensions["errors"], omitted = bounded_errors(original.errors)
            if omitted:
                extensions["errors_omitted"] = omitted
    elif original is not None and not isinstance(original, GraphQLError):
        log.error("resolver failed at %s", error.path, exc_info=original)
        formatted["message"] = "Internal server error"
        extensions = {"code": "INTERNAL_SERVER_ERROR"}
    else:
        extensions = {**(error.extensions or {}), "code": _code(error)}
    formatted["extensions"] = extensions
    return formatted


@lru_cache(maxsize=512)
def _validate(schema, text: str, specified: tuple) -> tuple:
    document = rules.parse_document(text)
    return tuple(
        GraphQLError(
            error.message,
            source=error.source,
            positions=error.positions,
            extensions={"code": "GRAPHQL_VALIDATION_FAILED"},
        )
        for error in validate(schema, document, rules=specified)
    )


def cached_validator(schema, document, rules=None, max_errors=None, **kwargs):
    """Validation depends on the text only, so a known text is not validated again."""
    return list(_validate(schema, document.loc.source.body, tuple(rules or ())))


def _request_errors(messages: list[GraphQLError]) -> dict:
    return {"errors": [format_error(error) for error in messages]}


def execute(data: dict, caller) -> tuple[dict, bool]:
    """Run a GraphQL request; returns the result and whether it was a request error."""
    config = current_app.config
    schema = executable_schema()
    document, _, error = checked_document()
    if document is None:
        return _request_errors([error]), True
    if request.method == "GET":
        operation = get_operation_ast(document, data.get("operationName"))
        if operation is not None and operation.operation != OperationType.QUERY:
            raise MethodNotAllowed("Mutations must be sent with POST.", headers={"Allow": "POST"})
    if error is not None:
        return _request_errors([error]), True
    _, result = graphql_sync(
        schema,
        data,
        context_value=Context(get_store(), caller, Batches()),
        query_document=document,
        query_validator=cached_validator,
        introspection=config["INTROSPECTION"],
        error_formatter=format_error,
        logger=quiet,
        require_query=request.method == "GET",
        execution_context_class=LeafExecutor,
    )
    if "data" not in result:
        return result, True
    if result["data"] is None and all("path" not in error for error in result.get("errors", ())):
        # variables that do not fit: nothing ran, so there is no data entry
        del result["data"]
        return result, True
    return result, False


def graphql_response(body, status: int, media: str | None = None, headers=None) -> Response:
    return Response(dump_json(body), status=status, headers=headers, content_type=media or JSON)


@bp.route("/graphql", methods=["GET", "POST"])
def graphql_endpoint():
    if request.method == "GET" and "query" not in request.args:
        page = explorer_page()
        if page is not None and request.accept_mimetypes.best == "text/html":
            return Response(page, content_type="text/html; charset=utf-8")
        raise BadRequest("Send a query: GET /graphql?query={...} or POST a JSON body.")
    media = response_type()
    caller = authenticate()
    result, request_error = execute(request_data(), caller)
    if request.args.get("unwrap") == "1" and request.method == "GET" and "errors" not in result:
        return graphql_response(result["data"], 200, media)
    status = 400 if request_error and media == GRAPHQL_RESPONSE else 200
    return graphql_response(result, status, media)


graphql_endpoint.rate_cost = estimate_cost


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
    try:
        media = response_type()
    except NotAcceptable:
        media = JSON
    return graphql_response({"errors": [entry]}, status, media, headers)


def explorer_page() -> str | None:
    """The explorer's HTML, rendered once per app, with assets from EXPLORER_CDN."""
    ext = services()
    if ext.explorer is None:
        config = current_app.config
        cdn = config["EXPLORER_CDN"].rstrip("/")
        if config["EXPLORER"] == "playground":
            html = ExplorerPlayground(title="people-service").html(None)
            html = html.replace(
                "//cdn.jsdelivr.net/npm/graphql-playground-react/build", cdn or PLAYGROUND_CDN
            )
        elif config["EXPLORER"] == "graphiql":
            html = ExplorerGraphiQL(title="people-service").html(None)
            if cdn:
                html = html.replace("https://esm.sh", cdn)
        else:
            html = None
        ext.explorer = html if html is not None else ""
    return ext.explorer or None
