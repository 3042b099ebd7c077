"""Domain errors that carry their HTTP status, and the one place that renders problem+json."""

from __future__ import annotations

import json
import logging
from http import HTTPStatus

from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response

log = logging.getLogger("people_service")

PROBLEM_JSON = "application/problem+json"


class ServiceError(Exception):
    """An error a client caused or should know about; `status` is its HTTP status."""

    status = 500
    code = "INTERNAL_SERVER_ERROR"  # GraphQL `extensions.code`
    default_detail = "Internal server error."

    def __init__(self, detail: str | None = None, *, errors: dict | None = None, headers=None):
        self.detail = detail or self.default_detail
        self.errors = errors
        self.headers = dict(headers or {})
        super().__init__(self.detail)


class BadRequest(ServiceError):
    status, code, default_detail = 400, "BAD_REQUEST", "The request is malformed."


class Unauthorized(ServiceError):
    status, code, default_detail = 401, "UNAUTHENTICATED", "Credentials are missing or invalid."


class Forbidden(ServiceError):
    status, code, default_detail = 403, "FORBIDDEN", "The credentials lack the scope for this."


class NotFound(ServiceError):
    status, code, default_detail = 404, "NOT_FOUND", "Not found."


class Conflict(ServiceError):
    status, code, default_detail = 409, "BAD_USER_INPUT", "The request conflicts with stored data."


class PreconditionFailed(ServiceError):
    status, code = 412, "BAD_REQUEST"
    default_detail = "The resource has changed since the ETag given in If-Match."


class UnsupportedMediaType(ServiceError):
    status, code, default_detail = 415, "BAD_REQUEST", "The body must be application/json."


class Invalid(ServiceError):
    """Input that parses but breaks the rules; `errors` nests messages the way the body nests."""

    status, code, default_detail = 422, "BAD_USER_INPUT", "The request body is invalid."


class Unavailable(ServiceError):
    status, code = 503, "INTERNAL_SERVER_ERROR"
    default_detail = "The database is unavailable; try again later."


class StorageFull(ServiceError):
    status, code = 507, "INTERNAL_SERVER_ERROR"
    default_detail = "The database is full; nothing was written. Reads still work."


def http_code(status: int) -> str:
    """The GraphQL `extensions.code` for an HTTP status outside the domain errors."""
    return {
        401: "UNAUTHENTICATED",
        403: "FORBIDDEN",
        404: "NOT_FOUND",
        429: "RATE_LIMITED",
    }.get(status, "BAD_REQUEST" if status < 500 else "INTERNAL_SERVER_ERROR")


def problem(status: int, detail: str, errors: dict | None = None) -> dict:
    """An RFC 9457 problem document."""
    body = {"type": "about:blank", "title": HTTPStatus(status).phrase, "status": status}
    body["detail"] = detail
    if errors:
        body["errors"] = errors
    return body


def describe(error: Exception) -> tuple[int, str, dict | None, dict]:
    """Status, detail, field errors and headers of any error; internals of others stay hidden."""
    if isinstance(error, ServiceError):
        return error.status, error.detail, error.errors, error.headers
    if isinstance(error, HTTPException) and error.code and error.code < 500:
        headers = dict(error.get_response().headers)
        headers.pop("Content-Type", None)
        headers.pop("Content-Length", None)
        return error.code, http_detail(error), None, headers
    original = getattr(error, "original_exception", None) or error
    log.error("unexpected error", exc_info=original)
    return 500, ServiceError.default_detail, None, {}


def http_detail(error: HTTPException) -> str:
    """A one-sentence detail for werkzeug's own errors (routing, body size)."""
    if error.code == 404:
        return "No such resource."
    if error.code == 405:
        return "The method is not allowed for this resource."
    if error.code == 413:
        return "The request body is too large."
    return str(error.description or HTTPStatus(error.code).phrase)


def problem_response(error: Exception) -> Response:
    """Render any error as application/problem+json, keeping headers such as Allow."""
    status, detail, errors, headers = describe(error)
    # ASCII escapes: field names echoed from a body may hold lone surrogates, which UTF-8 cannot
    body = json.dumps(problem(status, detail, errors))
    return Response(body, status=status, headers=headers, content_type=PROBLEM_JSON)


def register(app) -> None:
    """Make every error of the app answer problem+json."""
    app.register_error_handler(Exception, problem_response)
