"""The /graphql endpoint: GraphQL over HTTP around ariadne's graphql_sync, persisted queries."""

import hashlib
import json
import logging
import re
from collections import namedtuple
from functools import lru_cache, partial

from ariadne import graphql_sync, unwrap_graphql_error
from flask import Blueprint, current_app, g, render_template, request
from graphql import GraphQLError, GraphQLSyntaxError, OperationType, get_operation_ast, validate
from graphql.pyutils import snake_to_camel
from werkzeug.wrappers import Response

from ..errors import (
    BadRequest,
    MethodNotAllowed,
    NotAcceptable,
    NotFound,
    QueryTooComplex,
    ServiceError,
    UnsupportedMediaType,
)
from ..schemas import sentence
from ..web import get_store, ratelimit
from ..web.caller import authenticate
from ..web.jsonio import dump_json, json_body, parse_json
from ..web.negotiation import HTML, negotiate
from ..web.pages import asset_url, content_security_policy, html_response, source_of, vendor_url
from ..web.problems import bounded_errors, error_parts, graphql_code, with_headers
from . import meter
from .resolvers import Batches, Context, executable_schema, sdl

bp = Blueprint("graphql", __name__)
log = logging.getLogger("people_service.graphql")
# ariadne logs every error of every answer; format_error logs the ones a client must not see
QUIET = logging.getLogger("people_service.graphql.ariadne")
QUIET.setLevel(logging.CRITICAL + 1)

GRAPHQL_RESPONSE = "application/graphql-response+json"
JSON = "application/json"
# graphql-core's messages about variables and validation can print whole inputs
COERCION_ERRORS = VALIDATION_ERRORS = 10
# Apollo's automatic persisted queries: documents kept in all, per caller, the largest kept
PERSISTED_KEEP, PERSISTED_KEEP_PER_CALLER, PERSISTED_MAX_BYTES = 1000, 100, 32 * 1024
SHA256 = re.compile(r"[0-9a-f]{64}")
NOT_FOUND = {
    "message": "PersistedQueryNotFound",
    "extensions": {"code": "PERSISTED_QUERY_NOT_FOUND"},
}
# A request read, parsed and priced; `error` is the view's to answer, `to_store` the hash of a
# persisted query sent with its text (stored once it proves valid)
Prepared = namedtuple("Prepared", "data document operation cost charge error to_store")


def utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def reads_url() -> bool:
    """GET and HEAD take the request from the URL, run only queries and answer alike."""
    return request.method in ("GET", "HEAD")


def asks_for_explorer() -> bool:
    """A GET without a query: a browser gets the explorer, others a 400."""
    return reads_url() and "query" not in request.args and "extensions" not in request.args


def persisted_digest(data: dict) -> str | None:
    """The SHA-256 of an automatic persisted query, or None; BadRequest if malformed."""
    persisted = (data.get("extensions") or {}).get("persistedQuery")
    if persisted is None:
        return None
    version = persisted.get("version") if isinstance(persisted, dict) else None
    if type(version) is not int or version != 1:  # JSON's true is not 1
        raise BadRequest("Persisted queries: only version 1 is supported.")
    digest = persisted.get("sha256Hash")
    if not isinstance(digest, str) or not SHA256.fullmatch(digest):
        raise BadRequest("'sha256Hash' must be a SHA-256 in 64 lowercase hex digits.")
    query = data.get("query")  # None, or a string (read_request)
    if query is not None and hashlib.sha256(utf8(query)).hexdigest() != digest:
        raise BadRequest("'sha256Hash' is not the SHA-256 of the query.")
    return digest


def read_request() -> dict:
    """The request's query, variables, operationName and extensions, checked for their types."""
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


def prepared() -> Prepared:
    """This request read, parsed and priced once (kept in `g`); an error is kept, not raised."""
    if "graphql" not in g:
        g.graphql = _prepare()
    return g.graphql


def _prepare() -> Prepared:
    data, window = None, meter.CEILING
    size = meter.kib(request.content_length or len(request.query_string))
    try:
        window, limit = ratelimit.budget()
        data = read_request()
        to_store = persisted_digest(data)
        if data.get("query") is None:  # the hash alone: a lookup that only reads
            data["query"], to_store = get_store().get_persisted(to_store), None
            if data["query"] is None:
                return Prepared(data, None, None, 1, max(1, size), None, None)
        text, variables = data["query"], data.get("variables")
        meter.check_variables(variables)
        length = len(utf8(text))
        sent = json.dumps(variables, ensure_ascii=False, separators=(",", ":"), default=str)
        size = meter.kib(length) + (meter.kib(len(utf8(sent))) if variables else 0)

        def beyond_window(why: str) -> QueryTooComplex:
            return QueryTooComplex(
                f"The query {why}, more than the {window} your rate limit ({limit}) allows in a "
                "whole window, so it can never run. Ask for fewer (smaller limits), split the "
                "query, or use a key with a larger limit."
            )

        by_size = f"is charged {size} for its size (a unit per KiB of document and variables)"
        if size > window:
            raise beyond_window(by_size)
        if length > meter.MAX_QUERY_BYTES:
            raise QueryTooComplex(f"The query is longer than {meter.MAX_QUERY_BYTES // 1024} KiB.")
        document = meter.parse_document(text)
        operation = get_operation_ast(document, data.get("operationName"))
        if reads_url() and operation is not None and operation.operation != OperationType.QUERY:
            raise with_headers(
                MethodNotAllowed("Mutations must be sent with POST."), {"Allow": "POST"}
            )
        config = current_app.config
        limits = config["GRAPHQL_MAX_DEPTH"], config["GRAPHQL_MAX_ALIASES"]
        cost, why, problem = meter.price(document, operation, variables, *limits)
        if cost > config["GRAPHQL_MAX_COST"]:
            raise QueryTooComplex(
                f"The query {why}; the limit is {config['GRAPHQL_MAX_COST']}. "
                "Ask for fewer (smaller limits) or split the query."
            )
        if max(cost, size) > window:
            raise beyond_window(why if cost >= size else by_size)
        error = None if problem is None else QueryTooComplex(problem)  # priced, then refused
        return Prepared(data, document, operation, cost, max(cost, size), error, to_store)
    except Exception as error:  # the view answers it; the request pays for its size
        # unless it could never be paid (refused unparsed): a 429 would be retried forever
        return Prepared(data, None, None, 1, max(1, size) if size <= window else 1, error, None)


def rate_limit_cost() -> int:
    """What the rate limit charges (SPEC §11a, §12b); it never raises and never writes."""
    return 1 if asks_for_explorer() else prepared().charge


@meter.by_text
def validated(text: str, rules: tuple, hide_suggestions: bool) -> list:
    """graphql-core's validation errors of this request's document (the same for its text)."""
    errors = validate(
        executable_schema(),
        g.graphql.document,
        rules,
        max_errors=VALIDATION_ERRORS,
        hide_suggestions=hide_suggestions,
    )
    for error in errors:  # an aborted validation's last one too
        error.extensions = {"code": "GRAPHQL_VALIDATION_FAILED", **(error.extensions or {})}
    return errors


def execute(caller, data: dict, document, operation) -> tuple[dict, bool]:
    """Run the request through ariadne; the answer and whether it is a request error."""
    introspection = current_app.config["INTROSPECTION"]
    _, result = graphql_sync(
        executable_schema(),
        data,
        context_value=Context(get_store(), caller, Batches()),
        query_document=document,
        query_validator=lambda _schema, _document, rules, **_: validated(
            data["query"], tuple(rules), not introspection
        ),
        introspection=introspection,
        # an error of no field when the operation was found: its variables did not coerce
        error_formatter=partial(
            format_error, request_code=f"BAD_{'USER_INPUT' if operation else 'REQUEST'}"
        ),
        logger=QUIET,
        max_coercion_errors=COERCION_ERRORS,
        hide_suggestions=not introspection,
    )
    # a request error (validation, variables, no such operation): errors, no data
    request_error = result.get("data") is None and all(
        "path" not in error for error in result.get("errors", ())
    )
    if request_error:
        result.pop("data", None)
    return result, request_error


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


def format_error(error: GraphQLError, debug=False, request_code="BAD_REQUEST") -> dict:
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
    elif original is not None and original is not error:
        log.error("resolver failed at %s", error.path, exc_info=original)
        formatted["message"] = "Internal server error"
        extensions = {"code": "INTERNAL_SERVER_ERROR"}
    else:
        extensions = dict(error.extensions or {})
        if isinstance(error, GraphQLSyntaxError):
            extensions["code"] = "GRAPHQL_PARSE_FAILED"
        elif not extensions.get("code"):
            extensions["code"] = request_code if error.path is None else "INTERNAL_SERVER_ERROR"
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


@lru_cache(maxsize=8)
def explorer_page(explorer: str, cdn: str) -> str:
    """The explorer page; its URLs are page-relative, so one rendering serves every prefix."""
    return render_template(
        f"{explorer}.html",
        **_assets(explorer, lambda package, path: vendor_url(package, path, cdn)),
        title="people-service",
        explorer_css=asset_url("pages/explorer.css"),
        init=asset_url(f"pages/{explorer}.js"),
    )


def explorer_response():
    cdn = current_app.config["EXPLORER_CDN"]
    # scripts from files only (this server or the CDN), styles also inline (React sets them)
    policy = content_security_policy(inline_styles=True, origin=source_of(cdn))
    return html_response(explorer_page(current_app.config["EXPLORER"], cdn), policy)


def graphql_response(body, status: int, media: str, headers=None) -> Response:
    return Response(dump_json(body), status=status, headers=headers, content_type=media)


@bp.route("/graphql", methods=["GET", "POST"])
def graphql_endpoint():
    if asks_for_explorer():
        # a browser (it prefers HTML to both JSON types) gets the explorer, open to anyone
        browser = negotiate((JSON, GRAPHQL_RESPONSE, HTML)) == HTML
        if browser and current_app.config["EXPLORER"] != "none":
            return explorer_response()
        raise BadRequest("Send a query: GET /graphql?query={...} or POST a JSON body.")
    media = negotiate((JSON, GRAPHQL_RESPONSE))
    if media is None:
        raise NotAcceptable(f"This endpoint answers {JSON} or {GRAPHQL_RESPONSE}.")
    caller = authenticate()
    data, document, operation, cost, _, error, to_store = prepared()
    if error is not None and not isinstance(error, GraphQLError):
        raise error
    if data["query"] is None:  # HTTP 200: Apollo's clients then send the query with its hash
        return graphql_response({"errors": [NOT_FOUND]}, 200, media)
    if error is not None:  # a syntax error
        result, request_error = {"errors": [format_error(error)]}, True
    else:
        result, request_error = execute(caller, data, document, operation)
    if not request_error:
        name = operation.name.value if operation.name else None
        g.graphql_operation = (name, operation.operation.value, cost)  # for web.metrics
        # valid: stored, and Apollo's clients will send the hash alone
        if to_store and len(utf8(data["query"])) <= PERSISTED_MAX_BYTES:
            keep = (PERSISTED_KEEP, PERSISTED_KEEP_PER_CALLER)
            get_store().put_persisted(to_store, data["query"], caller.key, *keep)
    status = 400 if request_error and media == GRAPHQL_RESPONSE else 200
    if request.args.get("unwrap") == "1" and reads_url() and "errors" not in result:
        result = result["data"]  # a request error has errors: this is a 200
    response = graphql_response(result, status, media)
    if reads_url() and "persistedQuery" in (data.get("extensions") or {}):
        # a persisted GET is short and cacheable: an ETag, and 304 for a client that has it
        response.add_etag()
        response.make_conditional(request)
    return response


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
    if isinstance(error, QueryTooComplex) and media == JSON:
        status = 200  # a request error: under application/json, 200 with errors
    return graphql_response({"errors": [entry]}, status, media, headers)
