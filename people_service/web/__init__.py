"""The HTTP layer's request path, in order.

1. `wsgi_middleware`: what must precede Flask (method override, trusted proxy, unframed
   bodies, `Retry-After` only on 429 and 503).
2. `start_request`: request id, framing, a CORS preflight's answer, the caller authenticated
   once (`g.caller`), and the view's price (`g.cost`).
3. flask-limiter's own check (web/ratelimit.py), reading what step 2 left.
4. The view.
5. `finish_request`: headers, one access line, metrics.
6. `end_request`: events the request committed wake the webhook worker and the streams.
"""

import ipaddress
import logging
import re
import time
import uuid
from io import BytesIO

from flask import current_app, g, request
from werkzeug.exceptions import LengthRequired, NotFound, RequestEntityTooLarge
from werkzeug.middleware.proxy_fix import ProxyFix
from werkzeug.routing import RequestRedirect

from .. import logs
from ..config import ConfigError, trusted_proxies
from ..errors import BadRequest, Unavailable
from ..runtime import Runtime, Runtimes, take_logs
from ..store import Store, open_store

log = logging.getLogger("people_service")
access_log = logging.getLogger(logs.ACCESS)
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:/+=@-]{1,128}$")
OVERRIDABLE = frozenset({"PUT", "PATCH", "DELETE"})
# Endpoints that need neither a caller nor a rate limit (flask-limiter exempts them too)
UNCHARGED = frozenset({"ops.health", "assets.asset", "assets.favicon"})
RETRY_STATUSES = ("429", "503")  # the answers that say when to retry


def services(app=None) -> Runtimes:
    """What `app` (default: the current one) shares: its runtimes, its limiter, its pages."""
    return (app or current_app).extensions["people_service"]


def get_runtime() -> Runtime:
    """This process's runtime; Unavailable (503) while the database cannot be opened."""
    try:
        return services().get()
    except ConfigError as exc:
        log.warning("%s", exc)
        raise Unavailable("The database cannot be opened now.") from None


def get_store() -> Store:
    return get_runtime().store


def database_state() -> str:
    """'ok', or what is wrong with the database, also while no runtime can be made."""
    try:
        return get_store().check()
    except Unavailable:
        store = open_store(current_app.config["DATABASE"])
        try:
            state = store.check()
        finally:
            store.close()
        return "unreadable" if state == "ok" else state


def wsgi_middleware(app, config):
    """POST with X-HTTP-Method-Override: PUT|PATCH|DELETE becomes that method; X-Forwarded-For
    counts from TRUSTED_PROXY only; a body without Content-Length is not read (411)."""
    networks = trusted_proxies(config["TRUSTED_PROXY"])
    proxied = ProxyFix(app, x_for=1, x_proto=1)

    def middleware(environ, start_response):
        override = environ.get("HTTP_X_HTTP_METHOD_OVERRIDE")
        if override is not None and environ.get("REQUEST_METHOD") == "POST":
            method = override.strip().upper()
            if method in OVERRIDABLE:
                environ["REQUEST_METHOD"] = method
            else:
                environ["people_service.bad_override"] = override[:40]
        if "HTTP_TRANSFER_ENCODING" in environ and not environ.get("CONTENT_LENGTH"):
            # gunicorn passes chunked bodies on unread: tiny chunks would cost far more than
            # their size, so such a body is never read (waitress and proxies set the length)
            environ["people_service.unframed"], environ["wsgi.input"] = True, BytesIO()

        def respond(status, headers, exc_info=None):
            # flask-limiter adds its window's Retry-After to every limited answer, rounded
            # down: only a 429 or 503 keeps one, the app's own if it set one, else at least 1
            retry = status[:3] in RETRY_STATUSES
            own = environ.get("people_service.retry_after") if retry else None
            headers = [
                (k, own or _at_least_one(v) if k == "Retry-After" else v)
                for k, v in headers
                if retry or k != "Retry-After"
            ]
            return start_response(status, headers, exc_info)

        if networks and _trusted(environ.get("REMOTE_ADDR"), networks):
            return proxied(environ, respond)
        return app(environ, respond)

    return middleware


def _at_least_one(seconds: str) -> str:
    return str(max(1, int(seconds))) if seconds.lstrip("-").isdigit() else seconds


def _trusted(address: str | None, networks: list) -> bool:
    try:
        return any(ipaddress.ip_address(address or "") in network for network in networks)
    except ValueError:
        return False


def start_request():
    """The one hook before the limiter: framing, the caller and the request's price."""
    from . import caller, pages

    req = request._get_current_object()
    g.started = time.perf_counter()
    given = req.headers.get("X-Request-ID")
    g.request_id = given if given and _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
    logs.request_id.set(g.request_id)
    if "people_service.unframed" in req.environ:
        raise LengthRequired("Send the body with a Content-Length (chunked bodies are not read).")
    if req.max_content_length is not None and (req.content_length or 0) > req.max_content_length:
        raise RequestEntityTooLarge()  # whether or not the view reads the body
    if isinstance(req.routing_exception, RequestRedirect):
        raise NotFound()  # a slash redirect would be built from the Host header
    bad = req.environ.get("people_service.bad_override")
    if bad is not None:
        raise BadRequest(f"X-HTTP-Method-Override must be PUT, PATCH or DELETE, not '{bad}'.")
    if pages.is_preflight():
        return current_app.make_default_options_response()  # never charged
    if req.endpoint in UNCHARGED or req.endpoint is None or req.method == "OPTIONS":
        if current_app.config["TAKE_LOGS"]:  # no runtime here: a process's first 404 is logged
            take_logs()
        return None  # Flask answers OPTIONS itself
    runtime = get_runtime()
    g.caller = caller.identify(runtime)
    if g.caller is not None:
        runtime.usage.hit(g.caller)  # once per request, before /me reads it
    view = current_app.view_functions[req.endpoint]
    prepare = getattr(view, "prepare", None)
    if prepare is not None:
        prepare()
    price = getattr(view, "rate_limit_cost", None)
    g.cost = max(1, price() or 1) if price is not None and g.caller is not None else 1
    return None


def finish_request(response):
    """The one hook after the view: request id and security headers, the access line, metrics."""
    from . import metrics, pages

    req, headers = request._get_current_object(), response.headers
    request_id = g.get("request_id") or uuid.uuid4().hex
    status = response.status_code
    if status in (204, 304):  # no body: werkzeug's default type does not apply
        headers.pop("Content-Type", None)
    elif status == 200 and req.method == "OPTIONS" and not response.content_length:
        response.status_code = status = 204  # Flask's automatic OPTIONS answer, with Allow
        headers.pop("Content-Type", None)
    headers["X-Request-ID"] = request_id
    headers["X-Content-Type-Options"] = "nosniff"
    pages.secure(response)
    caller = g.get("caller")
    if caller is not None and "Cache-Control" not in headers:
        headers["Cache-Control"] = "private, no-cache"  # one caller's data: revalidate (ETag)
    elapsed = time.perf_counter() - g.get("started", time.perf_counter())
    if access_log.isEnabledFor(logging.INFO):
        access_log.info(
            f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime())} {request_id} "
            f"{caller.name if caller else '-'} {logs.logged_url(req.method)} "
            f"{logs.logged_url(req.path, req.query_string)} {status} {elapsed * 1000:.1f}ms"
        )
    if current_app.config["METRICS"]:
        metrics.record(req, status, elapsed, g.get("graphql_operation"))
    return response


def end_request(error=None) -> None:
    """The teardown (never raises): what the request committed wakes this process's workers."""
    runtime = services().made()
    if runtime is not None:
        try:
            runtime.committed()
        except Exception:
            log.exception("waking the webhook worker and the streams failed")
    logs.request_id.set("-")
