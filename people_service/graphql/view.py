"""The /graphql endpoint, following the GraphQL-over-HTTP specification."""

from __future__ import annotations

import logging
from functools import lru_cache

from ariadne import graphql_sync
from flask import Blueprint, current_app, g, request
from graphql import GraphQLError, OperationType, get_operation_ast, specified_rules, validate
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
from ..web import get_store, ratelimit
from ..web.caller import authenticate
from ..web.jsonio import dump_json, json_body, parse_json
from ..web.negotiation import HTML, negotiate
from ..web.problems import bounded_errors, error_parts, graphql_code, with_headers
from . import parsing, rules
from .batch import Batches
from .executor import LeafExecutor
from .explorer import explorer_response
from .resolvers import LIST_LIMITS, Context
from .schema import executable_schema, sdl

log = logging.getLogger("people_service.graphql")
# ariadne logs every error with a traceback; ours are formatted and logged in format_error
quiet = logging.getLogger("people_service.graphql.ariadne")
quiet.propagate = False
quiet.setLevel(logging.CRITICAL)

bp = Blueprint("graphql", __name__)

GRAPHQL_RESPONSE = "application/graphql-response+json"
JSON = "application/json"


# -- request parsing ----------------------------------------------------------------------


def response_type() -> str:
    """The media type of the answer, from Accept (406 when neither JSON type is acceptable).

    `*/*` and no Accept at all get application/json, as the GraphQL-over-HTTP specification
    asks for the time being; parameters such as `charset=utf-8` do not spoil a match.
    """
    media = negotiate((JSON, GRAPHQL_RESPONSE))
    if media is None:
        raise NotAcceptable(f"This endpoint answers {JSON} or {GRAPHQL_RESPONSE}.")
    return media


def reads_url() -> bool:
    """GET and HEAD take the request from the URL, run only queries and answer alike."""
    return request.method in ("GET", "HEAD")


def request_data() -> dict:
    """The GraphQL request (query, variables, operationName) of this HTTP request, once."""
    if "graphql_request" not in g:
        g.graphql_request = _read_request()
    return g.graphql_request


def _read_request() -> dict:
    if reads_url():
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
    query = data.get("query")
    if not isinstance(query, str) or not query.strip():
        raise BadRequest("The request needs a 'query' string.")
    if data.get("variables") is not None and not isinstance(data["variables"], dict):
        raise BadRequest("'variables' must be a JSON object.")
    if data.get("operationName") is not None and not isinstance(data["operationName"], str):
        raise BadRequest("'operationName' must be a string.")
    if data.get("operationName") == "":  # as `?operationName=` by GET: no name given
        data["operationName"] = None
    if data.get("extensions") is not None and not isinstance(data["extensions"], dict):
        raise BadRequest("'extensions' must be a JSON object.")
    return data


def check_limits(schema, document, data: dict, budget) -> tuple[tuple, int]:
    """(errors, cost) of the request's document against every limit; see rules.Meter."""
    config = current_app.config
    limits = {
        "max_depth": config["GRAPHQL_MAX_DEPTH"],
        "max_aliases": config["GRAPHQL_MAX_ALIASES"],
        "max_cost": config["GRAPHQL_MAX_COST"],
        "budget": rules.Budget(*budget),
    }
    variables = data.get("variables")
    if variables:
        name = data.get("operationName")
        return rules.check_limits(
            schema, document, variables, name, list_limits=LIST_LIMITS, **limits
        )
    # the usual GET: the same text, operation and limits always measure the same
    return _check_limits_cached(data["query"], data.get("operationName"), **limits)


@lru_cache(maxsize=512)
def _check_limits_cached(text: str, operation_name, **limits) -> tuple[tuple, int]:
    document = parsing.parse_document(text)
    return rules.check_limits(
        executable_schema(), document, None, operation_name, list_limits=LIST_LIMITS, **limits
    )


# -- execution ------------------------------------------------------------------------------


def _code(error: GraphQLError) -> str:
    if error.extensions and error.extensions.get("code"):
        return error.extensions["code"]
    if error.path is None:
        # graphql-core's errors about variables, the last one saying it stopped counting them
        about_variables = error.message.startswith(("Variable", "Too many errors processing"))
        return "BAD_USER_INPUT" if about_variables else "BAD_REQUEST"
    return "INTERNAL_SERVER_ERROR"


def graphql_names(errors):
    """Field messages keyed by the names GraphQL gives the fields (min_age: minAge), as the
    service checks arguments and inputs under their Python names."""
    if isinstance(errors, dict):
        return {_camel(key): graphql_names(value) for key, value in errors.items()}
    if isinstance(errors, list):
        return [graphql_names(item) for item in errors]
    return errors


def _camel(key):
    if not isinstance(key, str) or key.startswith("_"):  # _schema: the object as a whole
        return key
    first, *rest = key.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


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
            named = graphql_names(original.errors)
            if original.detail == sentence(original.errors):
                formatted["message"] = sentence(named)
            extensions["errors"], omitted = bounded_errors(named)
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
def _validate(schema, text: str, introspection: bool) -> tuple:
    """The specification's validation of a text; with introspection off, without suggestions
    ("Did you mean ...?") that would reveal the schema."""
    document = parsing.parse_document(text)
    specified = specified_rules if introspection else (*specified_rules, rules.NoIntrospection)
    errors = validate(
        schema,
        document,
        specified,
        max_errors=parsing.VALIDATION_ERRORS,
        hide_suggestions=not introspection,
    )
    if any(error.message == parsing.VALIDATION_ABORTED for error in errors):
        # graphql-core spent its whole work budget on this document (parsing.VALIDATION_BUDGET)
        return (parsing.TooComplex("The query is too complex to validate."),)
    return tuple(
        GraphQLError(
            error.message,
            source=error.source,
            positions=error.positions,
            extensions={"code": "GRAPHQL_VALIDATION_FAILED"},
        )
        for error in errors
    )


def validated(schema, document, rules=None, max_errors=None, **kwargs) -> list:
    """The query validator given to Ariadne: execute() has validated the document already."""
    return []


def _request_errors(messages) -> dict:
    return {"errors": [format_error(error) for error in messages]}


def prepare(data: dict) -> tuple:
    """(document, request errors, cost) of a request, measured once: parse, the limits (linear
    in the document), then the specification's validation. The cost is None for a query
    refused before it runs as too complex: it costs nothing (rate limits count such refusals
    on their own)."""
    if "graphql_prepared" not in g:
        g.graphql_prepared = _prepare(data)
    return g.graphql_prepared


def _prepare(data: dict) -> tuple:
    schema = executable_schema()
    try:
        document = parsing.parse_document(data["query"])
    except parsing.TooComplex as error:
        return None, [error], None
    except GraphQLError as error:
        return None, [error], 1
    if reads_url():
        operation = get_operation_ast(document, data.get("operationName"))
        if operation is not None and operation.operation != OperationType.QUERY:
            raise with_headers(
                MethodNotAllowed("Mutations must be sent with POST."), {"Allow": "POST"}
            )
    errors, cost = check_limits(schema, document, data, ratelimit.budget())
    if errors:
        return None, errors, None
    errors = _validate(schema, data["query"], current_app.config["INTROSPECTION"])
    if errors:
        return None, errors, None if isinstance(errors[0], parsing.TooComplex) else 1
    return document, (), cost


def rate_limit_cost() -> int | None:
    """What the rate limit charges this request (web.ratelimit asks, once authenticated)."""
    response_type()  # a request answered 406 costs 1, as any other error
    return prepare(request_data())[2]


def execute(data: dict, caller) -> tuple[dict, bool]:
    """Run a GraphQL request; returns the result and whether it was a request error."""
    config = current_app.config
    schema = executable_schema()
    document, errors, cost = prepare(data)
    if errors:
        return _request_errors(errors), True
    operation = get_operation_ast(document, data.get("operationName"))
    if operation is not None:  # counted by web.metrics once answered
        name = operation.name.value if operation.name else None
        g.graphql_operation = (name, operation.operation.value, cost)
    _, result = graphql_sync(
        schema,
        data,
        context_value=Context(get_store(), caller, Batches()),
        query_document=document,
        query_validator=validated,
        introspection=config["INTROSPECTION"],
        error_formatter=format_error,
        logger=quiet,
        require_query=reads_url(),
        execution_context_class=LeafExecutor,
        hide_suggestions=not config["INTROSPECTION"],
        max_coercion_errors=parsing.COERCION_ERRORS,  # as the Meter coerced them
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
    if request.method in ("GET", "HEAD") and "query" not in request.args:
        # a browser (it prefers HTML to both JSON types) gets the explorer, open to anyone
        page = explorer_response() if negotiate((JSON, GRAPHQL_RESPONSE, HTML)) == HTML else None
        if page is not None:
            return page
        raise BadRequest("Send a query: GET /graphql?query={...} or POST a JSON body.")
    media = response_type()
    caller = authenticate()
    result, request_error = execute(request_data(), caller)
    if request.args.get("unwrap") == "1" and reads_url() and "errors" not in result:
        return graphql_response(result["data"], 200, media)
    status = 400 if request_error and media == GRAPHQL_RESPONSE else 200
    return graphql_response(result, status, media)


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
    try:
        media = response_type()
    except NotAcceptable:
        media = JSON
    return graphql_response({"errors": [entry]}, status, media, headers)
