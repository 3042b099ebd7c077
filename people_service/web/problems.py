"""Errors as HTTP answers: any exception becomes an RFC 9457 problem document or stays hidden."""

from __future__ import annotations

import json
import logging
from http import HTTPStatus

from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response

from ..errors import ServiceError

log = logging.getLogger("people_service")

PROBLEM_JSON = "application/problem+json"


def problem(status: int, detail: str, errors: dict | None = None) -> dict:
    """An RFC 9457 problem document."""
    body = {"type": "about:blank", "title": HTTPStatus(status).phrase, "status": status}
    body["detail"] = detail
    if errors:
        body["errors"] = errors
    return body


def error_parts(error: Exception) -> tuple[int, str, dict | None, dict]:
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
    status, detail, errors, headers = error_parts(error)
    # ASCII escapes: field names echoed from a body may hold lone surrogates, which UTF-8 cannot
    body = json.dumps(problem(status, detail, errors))
    return Response(body, status=status, headers=headers, content_type=PROBLEM_JSON)


def init_app(app) -> None:
    """Make every error of the app answer problem+json."""
    app.register_error_handler(Exception, problem_response)
