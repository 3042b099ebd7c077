"""The /graphql endpoint: GraphQL over HTTP around ariadne's graphql_sync, persisted queries."""

import hashlib
import json
import logging
import re
from collections import namedtuple
from functools import partial

from ariadne import graphql_sync, unwrap_graphql_error
from flask import Blueprint, current_app, g, render_template, request
from graphql import GraphQLError, GraphQLSyntaxError, OperationType, get_operation_ast, validate
from graphql.pyutils import snake_to_camel
from werkzeug.wrappers import Response

from .. import errors
from ..errors import BadRequest, QueryTooComplex, ServiceError, UnsupportedMediaType
from ..schemas import sentence
from ..web import get_store, ratelimit
from ..web.caller import authenticate
from ..web.jsonio import dump_json, json_body, parse_json
from ..web.negotiation import HTML, negotiate
from ..web.pages import content_security_policy, html_response, source_of, vendor_url
from ..web.problems import bounded_errors, error_parts, graphql_code, with_headers
from . import meter
from .resolvers import Batches, Context, executable_schema, sdl

bp = Blueprint("graphql", __name__)
log = logging.getLogger("people_service.graphql")
QUIET = logging.getLogger("people_service.graphql.ariadne")  # format_error logs what matters
QUIET.setLevel(logging.CRITICAL + 1)
GRAPHQL_RESPONSE, JSON = "application/graphql-response+json", "application/json"
MAX_ERRORS = 10  # graphql-core's messages about variables and validation can print whole inputs
# Apollo's automatic persisted queries: documents kept in all, per caller, the largest kept
PERSISTED_KEEP, PERSISTED_KEEP_PER_CALLER, PERSISTED_MAX_BYTES = 1000, 100, 32 * 1024
# `error` is the view's to answer; `to_store` the hash of a query sent with its text
Prepared = namedtuple("Prepared", "data document operation cost charge error to_store")


def utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def asks_for_explorer() -> bool:
    return request.method != "POST" and not request.args.keys() & {"query", "extensions"}


def read_request() -> dict:
    """The request's query, variables, operationName and extensions, checked for their types."""
    if request.method != "POST":
        data = {key: request.args.get(key) for key in ("query", "operationName")}
        for key in ("variables", "extensions"):  # JSON texts
            data[key] = parse_json(request.args[key]) if request.args.get(key) else None
    elif request.mimetype == "application/graphql":
        if request.mimetype_params.get("charset", "utf-8").lower() not in ("utf-8", "utf8"):
            raise UnsupportedMediaType("application/graphql bodies must be UTF-8.")
        data = {"query": request.get_data(as_text=True)}
    elif isinstance(data := json_body((JSON, "application/graphql")), list):
        raise BadRequest("Batched requests (a JSON array) are not supported; send one object.")
    elif not isinstance(data, dict):
        raise BadRequest("The body must be a JSON object with a 'query'.")
    query, extensions = data.get("query"), data.get("extensions")
    by_hash = query is None and isinstance(extensions, dict) and "persistedQuery" in extensions
    if not by_hash and (not isinstance(query, str) or not query.strip()):
        raise BadRequest("The request needs a 'query' string.")
    for key, kind in (("variables", dict), ("operationName", str), ("extensions", dict)):
        if data.get(key) is not None and not isinstance(data[key], kind):
            what = "a string" if kind is str else "a JSON object"
            raise BadRequest(f"'{key}' must be {what}.")
    data["operationName"] = data.get("operationName") or None  # `?operationName=`: none given
    return data


def persisted_digest(data: dict) -> str | None:
    """The SHA-256 of an automatic persisted query, or None; BadRequest if malformed."""
    if (persisted := (data.get("extensions") or {}).get("persistedQuery")) is None:
        return None
    version = persisted.get("version") if isinstance(persisted, dict) else None
    if type(version) is not int or version != 1:  # JSON's true is not 1
        raise BadRequest("Persisted queries: only version 1 is supported.")
    digest = persisted.get("sha256Hash")
    if not isinstance(digest, str) or not re.fullmatch("[0-9a-f]{64}", digest):
        raise BadRequest("'sha256Hash' must be a SHA-256 in 64 lowercase hex digits.")
    if data.get("query") is not None and hashlib.sha256(utf8(data["query"])).hexdigest() != digest:
        raise BadRequest("'sha256Hash' is not the SHA-256 of the query.")
    return digest


def prepared() -> Prepared:
    """This request read, parsed and priced once (kept in `g`); an error is kept, not raised."""
    if "graphql" not in g:
        g.graphql = prepare()
    return g.graphql


def prepare() -> Prepared:
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
        sent = json.dumps(variables, ensure_ascii=False, separators=(",", ":"), default=str)
        size = meter.kib(len(utf8(text))) + (meter.kib(len(utf8(sent))) if variables else 0)
        too_much = (
            "The query {}, more than the {} your rate limit ({}) allows in a whole window, so it "
            "can never run. Ask for fewer (smaller limits), split the query, or use a key with a "
            "larger limit."
        )
        by_size = f"is charged {size} for its size (a unit per KiB of document and variables)"
        if size > window:
            raise QueryTooComplex(too_much.format(by_size, window, limit))
        if len(utf8(text)) > meter.MAX_QUERY_BYTES:
            raise QueryTooComplex(f"The query is longer than {meter.MAX_QUERY_BYTES // 1024} KiB.")
        document = meter.parse_document(text)
        operation = get_operation_ast(document, data["operationName"])
        if request.method != "POST" and operation and operation.operation != OperationType.QUERY:
            error = errors.MethodNotAllowed("Mutations must be sent with POST.")
            raise with_headers(error, {"Allow": "POST"})
        config = current_app.config
        limits = config["GRAPHQL_MAX_DEPTH"], config["GRAPHQL_MAX_ALIASES"]
        cost, why, problem = meter.price(document, operation, variables, *limits)
        if cost > config["GRAPHQL_MAX_COST"]:
            raise QueryTooComplex(
                f"The query {why}; the limit is {config['GRAPHQL_MAX_COST']}. "
                "Ask for fewer (smaller limits) or split the query."
            )
        if cost > window:
            raise QueryTooComplex(too_much.format(why, window, limit))
        error = problem and QueryTooComplex(problem)  # priced, then refused
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
    found = validate(executable_schema(), g.graphql.document, rules, MAX_ERRORS, hide_suggestions)
    for error in found:  # an aborted validation's last one too
        error.extensions = {"code": "GRAPHQL_VALIDATION_FAILED", **(error.extensions or {})}
    return found


def graphql_names(field_errors):
    """The service's field messages keyed by their GraphQL names (min_age: minAge)."""
    if isinstance(field_errors, dict):  # list indices and _schema stay as they are
        return {
            (snake_to_camel(k, False) if str(k)[:1].isalpha() else k): graphql_names(v)
            for k, v in field_errors.items()
        }
    if isinstance(field_errors, list):
        return [graphql_names(item) for item in field_errors]
    return field_errors


def format_error(error: GraphQLError, debug=False, request_code="BAD_REQUEST") -> dict:
    """Every error gets extensions.code; a resolver's own exception text never leaves."""
    formatted, original = error.formatted, unwrap_graphql_error(error)
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
        extensions = {"code": errors.INTERNAL}
    elif isinstance(error, GraphQLSyntaxError):
        extensions = {"code": "GRAPHQL_PARSE_FAILED"}
    else:  # validation's own code, or variables that did not coerce (request_code)
        code = request_code if error.path is None else errors.INTERNAL
        extensions = {"code": code, **(error.extensions or {})}
    return {**formatted, "extensions": extensions}


@bp.route("/graphql", methods=["GET", "POST"])
def graphql_endpoint():
    config = current_app.config
    if asks_for_explorer():  # a browser (it prefers HTML to JSON) gets the explorer, open to all
        if negotiate((JSON, GRAPHQL_RESPONSE, HTML)) == HTML and config["EXPLORER"] != "none":
            cdn = config["EXPLORER_CDN"]  # scripts from files only, styles also inline (React)
            policy = content_security_policy(inline_styles=True, origin=source_of(cdn))
            page = render_template(f"{config['EXPLORER']}.html", url=partial(vendor_url, base=cdn))
            return html_response(page, policy)
        raise BadRequest("Send a query: GET /graphql?query={...} or POST a JSON body.")
    if (media := negotiate((JSON, GRAPHQL_RESPONSE))) is None:
        raise errors.NotAcceptable(f"This endpoint answers {JSON} or {GRAPHQL_RESPONSE}.")
    caller = authenticate()
    data, document, operation, cost, _, error, to_store = prepared()
    if error is not None and not isinstance(error, GraphQLError):
        raise error
    if data["query"] is None:  # HTTP 200: Apollo's clients then send the query with its hash
        not_found = {"message": "PersistedQueryNotFound"}
        not_found["extensions"] = {"code": "PERSISTED_QUERY_NOT_FOUND"}
        return Response(dump_json({"errors": [not_found]}), content_type=media)
    if error is not None:  # a syntax error
        result = {"errors": [format_error(error)]}
    else:
        introspection = config["INTROSPECTION"]
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
            max_coercion_errors=MAX_ERRORS,
            hide_suggestions=not introspection,
        )
    # a request error (syntax, validation, variables, no such operation): errors, no data
    if request_error := result.get("data") is None and all(
        "path" not in error for error in result.get("errors", ())
    ):
        result.pop("data", None)
    else:
        name = operation.name.value if operation.name else None
        g.graphql_operation = (name, operation.operation.value, cost)  # for web.metrics
        if to_store and len(utf8(data["query"])) <= PERSISTED_MAX_BYTES:  # valid: kept
            keep = (PERSISTED_KEEP, PERSISTED_KEEP_PER_CALLER)
            get_store().put_persisted(to_store, data["query"], caller.key, *keep)
    status = 400 if request_error and media == GRAPHQL_RESPONSE else 200
    if request.args.get("unwrap") == "1" and request.method != "POST" and "errors" not in result:
        result = result["data"]
    response = Response(dump_json(result), status, content_type=media)
    if request.method != "POST" and "persistedQuery" in (data.get("extensions") or {}):
        response.add_etag()  # a persisted GET is short and cacheable
        response.make_conditional(request)
    return response


graphql_endpoint.rate_limit_cost = rate_limit_cost


@bp.get("/graphql/schema.graphql")
def schema_sdl():
    authenticate()
    if not current_app.config["INTROSPECTION"]:
        raise errors.NotFound("The schema is not published (introspection is off).")
    return Response(sdl(), content_type="text/plain; charset=utf-8")


@bp.errorhandler(Exception)
def graphql_error(error):
    status, detail, field_errors, headers = error_parts(error)
    code = getattr(error, "graphql_code", None) or graphql_code(status)
    entry = {"message": detail, "extensions": {"code": code}}
    if field_errors:
        entry["extensions"]["errors"] = field_errors
    media = negotiate((JSON, GRAPHQL_RESPONSE)) or JSON  # JSON also for a 406
    if isinstance(error, QueryTooComplex) and media == JSON:
        status = 200  # a request error: under application/json, 200 with errors
    return Response(dump_json({"errors": [entry]}), status, headers, content_type=media)
