"""The HTTP layer: what one app holds, ready once per process, and what every request passes.

A request, top to bottom: `wsgi_middleware` (method override, trusted proxy, unread chunked
bodies), a CORS preflight's answer (web/pages.py), `start_request` (request id, framing, the
caller authenticated once), flask-limiter's own check (web/ratelimit.py), the view,
`finish_request` (headers, one access line, metrics), `end_request` (the store's connection
back to its pool).
"""

import atexit
import ipaddress
import logging
import os
import re
import threading
import time
import uuid
import weakref
from io import BytesIO

from flask import current_app, g, request
from werkzeug.exceptions import LengthRequired, NotFound, RequestEntityTooLarge
from werkzeug.middleware.proxy_fix import ProxyFix
from werkzeug.routing import RequestRedirect

from .. import logs
from ..config import ConfigError, trusted_proxies
from ..credentials import UsageTracker, load_secret
from ..errors import BadRequest
from ..store import Store, redacted

access_log = logging.getLogger(logs.ACCESS)
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:/+=@-]{1,128}$")
OVERRIDABLE = frozenset({"PUT", "PATCH", "DELETE"})
_locks: dict[int, threading.Lock] = {}  # one per process: no lock is used across a fork
_prepared: weakref.WeakSet = weakref.WeakSet()  # apps whose usage counts are written at exit


class Services:
    """What the views of one app share. Built by create_app without opening anything: each
    process migrates the schema, reads the secret and starts counting usage on first use."""

    def __init__(self, config: dict, store: Store):
        self.config, self._store = config, store  # the store opens connections per process
        self.limiter = None  # flask-limiter's Limiter
        self.unlimited = UNCHARGED  # endpoints never rate limited
        self.explorer: str | None = None  # the explorer page, rendered once, on first use
        self.openapi: dict | None = None  # the OpenAPI document, built once, on first use
        self._here: tuple | None = None  # (process id, usage tracker, token secret)
        self.take_logs = not logs.operator_configured()  # else the operator's handlers write
        self.runtime: _Runtime | None = None  # TEMPORARY shim, see get_runtime

    def _process(self) -> tuple:
        pid = os.getpid()
        if self._here is None or self._here[0] != pid:
            with _locks.setdefault(pid, threading.Lock()):
                if self._here is None or self._here[0] != pid:
                    self._here = (pid, *self._prepare())
                    _prepared.add(self)
        return self._here

    def _prepare(self) -> tuple:
        try:
            self._store.upgrade_schema()
        except Exception as exc:  # any failure here is a configuration problem for the operator
            shown = redacted(self.config["DATABASE"])
            raise ConfigError(f"cannot open database {shown!r}: {exc}") from None
        try:
            secret = load_secret(self.config, self._store)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read or create the secret key: {exc}") from None
        return UsageTracker(self._store, self.config["USAGE_FLUSH_SECONDS"]), secret

    @property
    def store(self) -> Store:
        """The store, its schema migrated by this process (raises ConfigError)."""
        self._process()
        return self._store

    @property
    def usage(self) -> UsageTracker:
        return self._process()[1]

    @property
    def token_secret(self) -> str:  # signs and checks login tokens
        return self._process()[2]

    def close(self) -> None:
        """Write this process's pending usage counts; close its connections (idempotent)."""
        runtime = self.runtime
        if runtime is not None and runtime.pid == os.getpid():
            runtime.close()
        here = self._here
        if here is not None and here[0] == os.getpid():
            here[1].stop()
        self._store.close()


@atexit.register
def _close_all() -> None:
    for ext in list(_prepared):
        ext.close()


def services(app=None) -> Services:
    """The services of `app` (default: the app of the current request)."""
    return (app or current_app).extensions["people_service"]


def get_store() -> Store:
    return services().store


class _Runtime:
    """TEMPORARY shim until the lead's runtime.py: this process's streams and webhook worker."""

    def __init__(self, ext: Services):
        from .. import delivery, feed  # not at import: serve sets up the metrics first

        self.pid = os.getpid()
        self.streams = feed.Streams(ext.config["EVENT_STREAMS"] or 4)
        self.deliverer = delivery.Deliverer(ext.config, ext.store).start()

    def close(self) -> None:
        self.streams.end()
        self.deliverer.close()


def get_runtime(app=None) -> _Runtime:
    """TEMPORARY shim: this process's runtime of `app` (default: the current one)."""
    ext = services(app)
    if ext.runtime is None or ext.runtime.pid != os.getpid():
        ext.store  # noqa: B018  (migrated before the worker starts; takes the lock below)
        with _locks.setdefault(os.getpid(), threading.Lock()):
            if ext.runtime is None or ext.runtime.pid != os.getpid():
                ext.runtime = _Runtime(ext)
    return ext.runtime


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
            # flask-limiter rounds the seconds left down: never 0 (a retry at once), and never
            # below an answer's own (a 503's), which it takes as its least but may round down
            least = int(environ.get("people_service.retry_after", 1))
            headers = [
                (k, str(max(least, int(v))))
                if k == "Retry-After" and v.lstrip("-").isdigit()
                else (k, v)
                for k, v in headers
            ]
            return start_response(status, headers, exc_info)

        if networks and _trusted(environ.get("REMOTE_ADDR"), networks):
            return proxied(environ, respond)
        return app(environ, respond)

    return middleware


def _trusted(address: str | None, networks: list) -> bool:
    try:
        return any(ipaddress.ip_address(address or "") in network for network in networks)
    except ValueError:
        return False


def start_request():
    """The first hook: request id, logging, framing, the caller (authenticated once)."""
    from .caller import peek_caller

    ext, state, req = services(), g._get_current_object(), request._get_current_object()
    state.started = time.perf_counter()
    given = req.headers.get("X-Request-ID")
    state.request_id = given if given and _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
    logs.request_id.set(state.request_id)
    if ext.take_logs:  # a WSGI server may set up logging after loading the app
        logs.take_over()
    if "people_service.unframed" in req.environ:
        raise LengthRequired("Send the body with a Content-Length (chunked bodies are not read).")
    if req.max_content_length is not None and (req.content_length or 0) > req.max_content_length:
        raise RequestEntityTooLarge()  # whether or not the view reads the body
    if isinstance(req.routing_exception, RequestRedirect):
        raise NotFound()  # a slash redirect would be built from the Host header
    bad = req.environ.get("people_service.bad_override")
    if bad is not None:
        raise BadRequest(f"X-HTTP-Method-Override must be PUT, PATCH or DELETE, not '{bad}'.")
    # every serving process delivers webhooks; its worker starts once this process migrated
    # the schema (`store`), never racing the migration (a new file's WAL switch needs it alone)
    ext.store  # noqa: B018
    get_runtime()
    caller = peek_caller() if req.endpoint not in (None, *UNCHARGED) else None
    if caller is not None:
        ext.usage.hit(caller)  # once per request, before /me reads it


# Endpoints that need neither a caller nor a rate limit (flask-limiter exempts them too)
UNCHARGED = frozenset({"ops.health", "assets.asset", "assets.favicon"})


def finish_request(response):
    """The last hook: request id and security headers, the access line, metrics."""
    from . import metrics, pages

    state, req, headers = g._get_current_object(), request._get_current_object(), response.headers
    request_id = state.get("request_id") or uuid.uuid4().hex
    status = response.status_code
    if status in (204, 304):  # no body: werkzeug's default type does not apply
        headers.pop("Content-Type", None)
    elif status == 200 and req.method == "OPTIONS" and not response.content_length:
        response.status_code = status = 204  # Flask's automatic OPTIONS answer, with Allow
        headers.pop("Content-Type", None)
    headers["X-Request-ID"] = request_id
    headers["X-Content-Type-Options"] = "nosniff"
    if headers.get("Content-Type", "").startswith("text/html"):
        pages.secure(response)  # the pages: a Content-Security-Policy, no framing
    caller = state.get("caller")
    if caller is not None and "Cache-Control" not in headers:
        headers["Cache-Control"] = "private, no-cache"  # one caller's data: revalidate (ETag)
    elapsed = time.perf_counter() - state.get("started", time.perf_counter())
    if access_log.isEnabledFor(logging.INFO):
        access_log.info(
            f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime())} {request_id} "
            f"{caller.name if caller else '-'} {logs.logged_url(req.method)} "
            f"{logs.logged_url(req.path, req.query_string)} {status} {elapsed * 1000:.1f}ms"
        )
    if current_app.config["METRICS"]:
        metrics.record(req, status, elapsed, state.get("graphql_operation"))
    return response


def end_request(error=None) -> None:
    """The teardown: the request's database connection goes back to the store's pool; events
    it committed wake this process's streams and webhook worker at once."""
    from .. import events

    if events.committed(services().store):
        runtime = get_runtime()
        runtime.deliverer.wake()
        runtime.streams.notify()
    logs.request_id.set("-")
