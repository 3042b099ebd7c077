"""Rate limits: one flask-limiter counter per caller (key id, user, or address) across the API."""

from __future__ import annotations

from flask import current_app, request
from flask_limiter import Limiter

from .auth import peek_caller
from .errors import ServiceError
from .web import json_body


def client_address() -> str:
    # waitress sets REMOTE_ADDR from X-Forwarded-For only for a configured trusted proxy
    return request.remote_addr or "unknown"


def limit_key() -> str:
    """The counter a request is charged to; never empty (an empty key disables the limit)."""
    caller = peek_caller()
    return caller.key if caller else "addr:" + client_address()


def caller_limit() -> str:
    """The caller's own limit, else the default; read on every request so changes apply."""
    caller = peek_caller()
    config = current_app.config
    if caller is None:
        return config["ANONYMOUS_RATE_LIMIT"]
    return caller.rate_limit or config["RATE_LIMIT"]


def request_cost() -> int:
    """What a request costs: 1, or what its view's `rate_cost()` estimates (GraphQL)."""
    view = current_app.view_functions.get(request.endpoint or "")
    estimate = getattr(view, "rate_cost", None)
    return max(1, estimate()) if estimate else 1


def handshake_key() -> str:
    """The handshake counts per client address and username together."""
    try:
        data = json_body() if request.is_json else request.form
    except ServiceError:
        data = None  # the view answers the bad body; the address is still charged
    username = data.get("username") if hasattr(data, "get") else None
    return f"login:{client_address()}:{str(username or '')[:200]}"


def handshake_limit() -> str:
    return current_app.config["AUTH_RATE_LIMIT"]


def create_limiter(app) -> Limiter:
    """A limiter for this app, with its storage from RATE_LIMIT_STORAGE."""
    limiter = Limiter(
        limit_key,
        application_limits=[caller_limit],
        application_limits_cost=request_cost,
        storage_uri=app.config["RATE_LIMIT_STORAGE"],
        # unlike fixed-window, a refused request is not charged, and hits are O(1)
        strategy="sliding-window-counter",
        headers_enabled=True,
        key_prefix=app.config["RATE_LIMIT_PREFIX"],
        # if Redis goes away, keep serving with per-process counters rather than fail
        in_memory_fallback_enabled=True,
    )
    limiter.init_app(app)
    return limiter
