"""Cross-origin requests from the pages of other sites (flask-cors), off unless CORS_ORIGINS."""

from __future__ import annotations

import re

from flask import current_app, request
from flask_cors import CORS

from ..config import cors_origins

# what a browser app may send: the credentials, JSON bodies and the conditional/idempotent writes
ALLOW_HEADERS = [
    "Authorization",
    "Content-Type",
    "Idempotency-Key",
    "If-Match",
    "If-None-Match",
    "X-API-Key",
    "X-HTTP-Method-Override",
    "X-Request-ID",
]
# what its scripts may read beyond the CORS-safelisted response headers
EXPOSE_HEADERS = [
    "ETag",
    "Idempotent-Replayed",
    "Link",
    "Location",
    "Retry-After",
    "WWW-Authenticate",
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
    "X-Request-ID",
    "X-Total-Count",
]
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
# how long a browser may reuse a preflight's answer (Chromium caps it at 2 hours)
MAX_AGE = 600


def answer_preflight():
    """A preflight (OPTIONS with Access-Control-Request-Method) of a known route: answered
    here, before authentication and the rate limit, which apply to the request that follows."""
    if (
        request.method == "OPTIONS"
        and request.url_rule is not None
        and "Origin" in request.headers
        and "Access-Control-Request-Method" in request.headers
    ):
        response = current_app.make_default_options_response()
        response.status_code = 204
        return response
    return None


def vary_on_origin(response):
    """Answers differ by Origin (allowed ones get Access-Control-Allow-Origin), so a shared
    cache must not hand one origin's answer to another; flask-cors says so only when it
    knows more than one origin."""
    response.vary.add("Origin")
    return response


def init_app(app) -> None:
    """Turn CORS on for the origins of CORS_ORIGINS; register before the rate limiter."""
    origins = cors_origins(app.config["CORS_ORIGINS"])
    if not origins:
        return
    app.before_request(answer_preflight)
    anyone = origins == ["*"]
    if not anyone:
        app.after_request(vary_on_origin)
    CORS(
        app,
        # flask-cors takes a string with regex characters ([ of IPv6, say) for a pattern:
        # each origin is passed as one that matches exactly that origin
        origins="*" if anyone else [re.compile(re.escape(o) + r"\Z", re.I) for o in origins],
        # with *, every answer says `Access-Control-Allow-Origin: *`, the same for everyone;
        # otherwise only answers to an allowed Origin carry the headers
        send_wildcard=anyone,
        always_send=anyone,
        methods=METHODS,
        allow_headers=ALLOW_HEADERS,
        expose_headers=EXPOSE_HEADERS,
        max_age=MAX_AGE,
        # credentials travel in headers the client sets itself, never in cookies
        supports_credentials=False,
    )
