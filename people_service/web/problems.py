"""Errors as HTTP answers: any exception becomes an RFC 9457 problem document or stays hidden."""

import logging
from http import HTTPStatus

from flask import has_request_context, request
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response

from .. import errors as e
from .jsonio import dump_json

log = logging.getLogger("people_service")
# An error document stays small whatever the body was: 50,000 unknown fields are not echoed back
MAX_FIELD_ERRORS, MAX_NAME, MAX_DETAIL = 50, 100, 1000
STATUS_CODES = {401: "UNAUTHENTICATED", 403: "FORBIDDEN", 404: "NOT_FOUND", 429: "RATE_LIMITED"}
HTTP_DETAILS = {  # werkzeug's own errors (routing, body size) in one sentence
    404: "No such resource.",
    405: "The method is not allowed for this resource.",
    413: "The request body is too large.",
    431: "The request's headers are too large.",
}


def graphql_code(status: int) -> str:
    """The GraphQL `extensions.code` for an HTTP status outside the domain errors."""
    return STATUS_CODES.get(status, "BAD_REQUEST" if status < 500 else "INTERNAL_SERVER_ERROR")


def with_headers(error: e.ServiceError, headers: dict) -> e.ServiceError:
    """`error`, answered with these headers too (a challenge, Allow, a limit's Retry-After)."""
    error.http_headers = dict(headers)
    return error


def _count(node) -> int:
    node = list(node.values()) if isinstance(node, dict) else node
    return sum(map(_count, node)) if isinstance(node, list) else 1


def bounded_errors(errors: dict, limit: int = MAX_FIELD_ERRORS) -> tuple[dict, int]:
    """The first `limit` messages of nested field errors and how many are left (unknown fields
    last, so that a body stuffed with them cannot hide the message that matters)."""
    room = [limit]

    def walk(node):
        if isinstance(node, list):
            return [part for part in map(walk, node) if part]
        if not isinstance(node, dict):
            room[0] -= 1
            return node if room[0] >= 0 else None
        out = {}
        for key, value in sorted(node.items(), key=lambda item: item[1] == ["Unknown field."]):
            key = key[: MAX_NAME - 1] + "…" if isinstance(key, str) and len(key) > MAX_NAME else key
            if key not in out and (part := walk(value)):  # two long names cut alike: one
                out[key] = part
        return out

    bounded = walk(errors)
    return bounded, _count(errors) - _count(bounded)


def _problem(error: Exception) -> tuple[dict, dict]:
    """The problem document of any error, and the headers it is answered with."""
    status, errors, headers = getattr(error, "code", None), None, {}
    if isinstance(error, e.ServiceError):
        status, detail, errors = error.status, error.detail, error.errors
        # a busy database frees up in a moment, an operator's fix (a missing file) takes longer
        if isinstance(error, e.Unavailable | e.RateLimited):
            headers["Retry-After"] = "5" if type(error) is e.Unavailable else "1"
        headers |= getattr(error, "http_headers", {})
        if status == 500:  # a failure nobody foresaw (the store's, say): the operator must know
            log.error("unexpected error", exc_info=error)
    # server errors a client causes (a transfer coding nobody implements) say so; others hide
    elif isinstance(error, HTTPException) and status and (status < 500 or status == 501):
        own = error.get_response().headers
        headers = {k: v for k, v in own.items() if k not in ("Content-Type", "Content-Length")}
        detail = HTTP_DETAILS.get(status) or str(error.description or HTTPStatus(status).phrase)
    else:
        log.error("unexpected error", exc_info=getattr(error, "original_exception", None) or error)
        status, detail = 500, e.ServiceError.default_detail
    errors, omitted = bounded_errors(errors)
    if omitted:
        kept = _count(errors)
        detail = (
            f"The request breaks {kept + omitted} rules; errors has the first {kept} "
            "and errors_omitted counts the rest."
        )
    detail = detail if len(detail) <= MAX_DETAIL else detail[: MAX_DETAIL - 1] + "…"
    body = {"type": "about:blank", "title": HTTPStatus(status).phrase, "status": status}
    body |= {"detail": detail, **({"errors": errors} if errors else {})}
    return body | ({"errors_omitted": omitted} if omitted else {}), headers


def error_parts(error: Exception) -> tuple[int, str, dict | None, dict]:
    """Status, detail, field errors and headers (bounded) of any error; internals stay hidden."""
    body, headers = _problem(error)
    return body["status"], body["detail"], body.get("errors"), headers


def problem_response(error: Exception) -> Response:
    """Any error as application/problem+json, keeping headers such as Allow."""
    body, headers = _problem(error)
    if str(headers.get("Retry-After", "")).isdigit() and has_request_context():
        request.environ["people_service.retry_after"] = headers["Retry-After"]  # never lowered
    return Response(
        dump_json(body), body["status"], headers, content_type="application/problem+json"
    )
