"""Per-request plumbing of every blueprint: request ids, method override and the access log."""

import logging
import re
import time
import uuid

from flask import Flask, g, has_request_context, request
from werkzeug.exceptions import NotFound, RequestEntityTooLarge
from werkzeug.middleware.proxy_fix import ProxyFix
from werkzeug.routing import RequestRedirect
from werkzeug.wrappers import Response

from .. import logs
from ..errors import BadRequest
from . import services
from .pages import secure

access_log = logging.getLogger("people_service.access")

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:/+=@-]{1,128}$")
OVERRIDABLE = frozenset({"PUT", "PATCH", "DELETE"})


def method_override(app):
    """WSGI middleware: POST with X-HTTP-Method-Override: PUT|PATCH|DELETE becomes that method."""

    def middleware(environ, start_response):
        override = environ.get("HTTP_X_HTTP_METHOD_OVERRIDE")
        if override is not None and environ.get("REQUEST_METHOD") == "POST":
            method = override.strip().upper()
            if method in OVERRIDABLE:
                environ["REQUEST_METHOD"] = method
            else:
                environ["people_service.bad_override"] = override[:40]
        return app(environ, start_response)

    return middleware


def start_request() -> None:
    state, req = g._get_current_object(), request._get_current_object()
    state.started = time.perf_counter()
    given = req.headers.get("X-Request-ID")
    state.request_id = given if given and _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
    limit = req.max_content_length
    if limit is not None and (req.content_length or 0) > limit:
        # refused whether or not the view reads the body, as the server refuses larger ones
        raise RequestEntityTooLarge()
    if isinstance(req.routing_exception, RequestRedirect):
        # werkzeug would answer 308 to an absolute URL built from the Host header (a slash
        # redirect): the path is simply not one of ours
        raise NotFound()
    bad = req.environ.get("people_service.bad_override")
    if bad is not None:
        raise BadRequest(f"X-HTTP-Method-Override must be PUT, PATCH or DELETE, not '{bad}'.")


def finish_request(response: Response) -> Response:
    state, req = g._get_current_object(), request._get_current_object()
    request_id = state.get("request_id") or uuid.uuid4().hex
    headers = response.headers
    if response.status_code in (204, 304):  # no body: werkzeug's default type does not apply
        headers.pop("Content-Type", None)
    headers["X-Request-ID"] = request_id
    headers["X-Content-Type-Options"] = "nosniff"
    if headers.get("Content-Type", "").startswith("text/html"):
        secure(response)  # the pages: a Content-Security-Policy, no framing
    caller = state.get("caller")
    if caller is not None and "Cache-Control" not in headers:
        # data for one caller: caches may keep it only privately, and must revalidate (ETag)
        headers["Cache-Control"] = "private, no-cache"
    if access_log.isEnabledFor(logging.INFO):
        elapsed = (time.perf_counter() - state.get("started", time.perf_counter())) * 1000
        # the caller only if this request authenticated one: a look-up would count a use
        access_log.info(
            f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime())} {request_id} "
            f"{caller.name if caller else '-'} {logs.logged_url(req.method)} "
            f"{logs.logged_url(req.path, req.query_string)} {response.status_code} {elapsed:.1f}ms"
        )
    return response


def stamp_request_id(record: logging.LogRecord) -> bool:
    """A log filter: the request id on every record, so an error line leads to its access line."""
    record.request_id = g.get("request_id", "-") if has_request_context() else "-"
    return True


def trusted_proxy(app, proxies: str):
    """WSGI middleware: werkzeug's ProxyFix (X-Forwarded-For, -Proto), for trusted proxies only."""
    trusted = {address.strip() for address in proxies.split(",") if address.strip()}
    fixed = ProxyFix(app, x_for=1, x_proto=1)

    def middleware(environ, start_response):
        chosen = fixed if environ.get("REMOTE_ADDR") in trusted else app
        return chosen(environ, start_response)

    return middleware


class App(Flask):
    """Flask, with answers to OPTIONS that carry no body: 204 with Allow."""

    def make_default_options_response(self) -> Response:
        response = super().make_default_options_response()
        response.status_code = 204
        return response


def init_app(app) -> None:
    if not logs.operator_configured():
        # a WSGI server may configure logging after loading the app: decide at the first request
        app.before_request(logs.take_over)
    # a request ended: its database connection goes back to the store's pool
    app.teardown_request(lambda error=None: services().store.release())
    app.wsgi_app = method_override(app.wsgi_app)
    if app.config["TRUSTED_PROXY"]:
        app.wsgi_app = trusted_proxy(app.wsgi_app, app.config["TRUSTED_PROXY"])
    app.before_request(start_request)
    app.after_request(finish_request)
