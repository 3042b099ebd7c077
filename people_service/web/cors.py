"""Cross-origin requests from the pages of other sites (flask-cors), off unless CORS_ORIGINS."""

import re

from flask import current_app, request
from flask_cors import CORS

from ..config import cors_origins

# what a browser app may send: the credentials, JSON bodies and the conditional/idempotent writes
ALLOW_HEADERS = (
    "Authorization Content-Type Idempotency-Key If-Match If-None-Match X-API-Key "
    "X-HTTP-Method-Override X-Request-ID"
).split()
# what its scripts may read beyond the CORS-safelisted response headers
EXPOSE_HEADERS = (
    "ETag Idempotent-Replayed Link Location Retry-After WWW-Authenticate X-RateLimit-Limit "
    "X-RateLimit-Remaining X-RateLimit-Reset X-Request-ID X-Total-Count"
).split()
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
MAX_AGE = 600  # seconds a browser may reuse a preflight's answer


def answer_preflight():
    """Answer the preflight of a known route before authentication and the rate limit."""
    headers = request.headers
    preflight = "Origin" in headers and "Access-Control-Request-Method" in headers
    if request.method == "OPTIONS" and request.url_rule is not None and preflight:
        return current_app.make_default_options_response()  # 204 (lifecycle.App)
    return None


def vary_on_origin(response):
    # flask-cors says so only when it knows more than one origin
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
        # a string would be taken for a regex ("[" of IPv6): each origin matches only itself
        origins="*" if anyone else [re.compile(re.escape(o) + r"\Z", re.I) for o in origins],
        # with *, every answer says `Access-Control-Allow-Origin: *`, the same for everyone
        send_wildcard=anyone,
        always_send=anyone,
        methods=METHODS,
        allow_headers=ALLOW_HEADERS,
        expose_headers=EXPOSE_HEADERS,
        max_age=MAX_AGE,
        supports_credentials=False,  # credentials travel in headers, never in cookies
    )
