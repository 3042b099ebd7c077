"""Errors as HTTP answers: any exception becomes an RFC 9457 problem document or stays hidden."""

import logging
from http import HTTPStatus

from flask import has_request_context, request
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response

from .. import errors as e
from ..errors import ServiceError
from .jsonio import dump_json

log = logging.getLogger("people_service")

# An error document stays small whatever the body was: a body of 50,000 unknown fields would
# otherwise be echoed back twice (in `errors` and in `detail`), four times its own size.
MAX_FIELD_ERRORS = 50  # messages kept in `errors`; `errors_omitted` counts the rest
MAX_NAME = 100  # characters of a field name echoed back
MAX_DETAIL = 1000  # characters of `detail`
UNKNOWN_FIELD = ["Unknown field."]  # marshmallow's message for a field the schema lacks

# Headers an error's class implies: a busy database frees up in a moment, an operator's fix
# (a missing or read-only file) takes longer.
HEADERS = {e.Busy: {"Retry-After": "1"}, e.Unavailable: {"Retry-After": "5"}}
# The GraphQL code of an HTTP status that no domain error raised (routing, body size, ...).
STATUS_CODES = {401: "UNAUTHENTICATED", 403: "FORBIDDEN", 404: "NOT_FOUND", 429: "RATE_LIMITED"}
# One-sentence details of werkzeug's own errors (routing, body size)
HTTP_DETAILS = {
    404: "No such resource.",
    405: "The method is not allowed for this resource.",
    413: "The request body is too large.",
    431: "The request's headers are too large.",
}


def _nearest(table: dict, error: ServiceError, default=None):
    return next((table[cls] for cls in type(error).__mro__ if cls in table), default)


def graphql_code(status: int) -> str:
    """The GraphQL `extensions.code` for an HTTP status outside the domain errors."""
    return STATUS_CODES.get(status, "BAD_REQUEST" if status < 500 else "INTERNAL_SERVER_ERROR")


def with_headers(error: ServiceError, headers: dict) -> ServiceError:
    """`error`, answered with these headers too (a challenge, Allow, a limit's Retry-After)."""
    error.http_headers = dict(headers)
    return error


def bounded_errors(errors: dict, limit: int = MAX_FIELD_ERRORS) -> tuple[dict, int]:
    """The first `limit` messages of nested field errors, shaped as before, and how many are left
    (unknown fields last, so that a body stuffed with them cannot hide the message that matters)."""
    room = limit

    def walk(node):
        nonlocal room
        if isinstance(node, dict):
            out = {}
            for key, value in sorted(node.items(), key=lambda item: item[1] == UNKNOWN_FIELD):
                if isinstance(key, str) and len(key) > MAX_NAME:
                    key = key[: MAX_NAME - 1] + "…"
                if key not in out and (part := walk(value)):  # two long names cut alike: one
                    out[key] = part
            return out
        if isinstance(node, list):
            return [part for part in map(walk, node) if part]
        room -= 1
        return node if room >= 0 else None

    bounded = walk(errors)
    return bounded, _count(errors) - _count(bounded)


def _count(node) -> int:
    if isinstance(node, dict):
        node = list(node.values())
    return sum(map(_count, node)) if isinstance(node, list) else 1


def _parts(error: Exception) -> tuple[int, str, dict | None, dict, int]:
    if isinstance(error, ServiceError):
        status = error.status
        if status == 500:  # a failure nobody foresaw (the store's, say): the operator must know
            log.error("unexpected error", exc_info=error)
        headers = {**_nearest(HEADERS, error, {}), **getattr(error, "http_headers", {})}
        detail, errors = error.detail, error.errors
    # server errors a client causes (a transfer coding nobody implements) say so; others hide
    elif (
        isinstance(error, HTTPException) and error.code and (error.code < 500 or error.code == 501)
    ):
        status, errors = error.code, None
        own = error.get_response().headers
        headers = {k: v for k, v in own.items() if k not in ("Content-Type", "Content-Length")}
        detail = HTTP_DETAILS.get(status) or str(error.description or HTTPStatus(status).phrase)
    else:
        log.error("unexpected error", exc_info=getattr(error, "original_exception", None) or error)
        status, detail, errors, headers = 500, ServiceError.default_detail, None, {}
    errors, omitted = bounded_errors(errors)
    if omitted:
        kept = _count(errors)
        detail = (
            f"The request breaks {kept + omitted} rules; errors has the first {kept} "
            f"and errors_omitted counts the rest."
        )
    elif len(detail) > MAX_DETAIL:
        detail = detail[: MAX_DETAIL - 1] + "…"
    return status, detail, errors, headers, omitted


def error_parts(error: Exception) -> tuple[int, str, dict | None, dict]:
    """Status, detail, field errors and headers (bounded) of any error; internals stay hidden."""
    return _parts(error)[:4]


def problem_response(error: Exception) -> Response:
    """Render any error as application/problem+json, keeping headers such as Allow."""
    status, detail, errors, headers, omitted = _parts(error)
    if str(headers.get("Retry-After", "")).isdigit() and has_request_context():
        request.environ["people_service.retry_after"] = headers["Retry-After"]  # never lowered
    body = {"type": "about:blank", "title": HTTPStatus(status).phrase, "status": status}
    body["detail"] = detail
    if errors:
        body["errors"] = errors
    if omitted:
        body["errors_omitted"] = omitted
    return Response(dump_json(body), status, headers, content_type="application/problem+json")
