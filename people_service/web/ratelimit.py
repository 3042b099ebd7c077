"""Rate limits through flask-limiter: one budget per caller (key, user or address), a view's
price from its `rate_limit_cost`, and the login's limits per address and per username."""

import functools
import hashlib

from flask import current_app, g, request
from flask_limiter import Limit, Limiter
from limits import parse_many

from ..config import ConfigError
from ..store import redacted
from ..store.counters import default_uri  # also registers the sqlite:// scheme with limits
from . import UNCHARGED

SCOPE = "global"  # one budget across endpoints


def storage_uri(config) -> str:
    """RATE_LIMIT_STORAGE; unset or a bare sqlite://, the counters file beside the database."""
    configured = config["RATE_LIMIT_STORAGE"]
    return configured if configured not in ("", "sqlite://") else default_uri(config["DATABASE"])


def caller_limit() -> str:
    """The caller's own limit, else the default; read on every request so changes apply."""
    caller, config = g.get("caller"), current_app.config
    if caller is None:
        return config["ANONYMOUS_RATE_LIMIT"]
    return caller.rate_limit or config["RATE_LIMIT"]


def budget() -> tuple[int, str]:
    """The most one request of this caller can cost (its smallest window), and its limit."""
    limit = caller_limit()
    return min(item.amount for item in parse_many(limit)), limit


@functools.lru_cache(maxsize=256)
def _windows(limit: str) -> int:
    return len(parse_many(limit))


def client_address_key() -> str:
    return "addr:" + (request.remote_addr or "unknown")


def caller_key() -> str:  # never empty: an empty key would be unlimited
    caller = g.get("caller")
    return caller.key if caller else client_address_key()


def login_key() -> str:
    """The login's second counter: the client address and the username (read by the view's
    `prepare`), hashed."""
    identity = f"{client_address_key()}\0{g.get('login_username', '')[:200]}"
    return "login:" + hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def request_cost() -> int:
    """What start_request priced this request at (1 when it did not)."""
    return g.get("cost", 1)


def init_app(app, logins) -> Limiter:
    """Charge every request but UNCHARGED ones to its caller's budget; the `logins` blueprint
    to its address (with anonymous requests) and to its address and username."""
    config = app.config

    def refusal_detail() -> str:
        breached = limiter.current_limit
        view = current_app.view_functions.get(request.endpoint)
        if getattr(view, "rate_limit_cost", None) is None or g.get("caller") is None:
            return f"Rate limit exceeded ({breached.limit})."
        return (
            f"This query costs {request_cost()}, and the rate limit ({breached.limit}) has "
            f"{breached.remaining} left; retry after the Retry-After seconds, or ask for less."
        )

    def caller_limits(several: bool) -> Limit:
        return Limit(
            # the caller's limit in one of the two, by whether it has several windows
            lambda: limit if (_windows(limit := caller_limit()) > 1) == several else "",
            key_function=caller_key,
            scope=SCOPE,
            shared=True,
            cost=request_cost,
            error_message=refusal_detail,
            # several windows: tested together up front, charged once the answer is not a
            # refusal, so that a refusal by one window costs nothing in the others
            deduct_when=(lambda response: response.status_code != 429) if several else None,
        )

    try:
        limiter = Limiter(
            caller_key,
            default_limits=[caller_limits(False), caller_limits(True)],
            storage_uri=storage_uri(config),
            strategy="sliding-window-counter",  # a refused hit is charged nothing
            headers_enabled=True,
            key_prefix=config["RATE_LIMIT_PREFIX"],
            in_memory_fallback_enabled=True,  # the storage down: count per process meanwhile
        )
        limiter.init_app(app)
    except Exception as exc:  # an unusable file or URL is the operator's to fix
        shown = redacted(config["RATE_LIMIT_STORAGE"])
        shown = repr(shown) if shown else "(unset: the counters file beside the database)"
        raise ConfigError(f"cannot use RATE_LIMIT_STORAGE {shown}: {exc}") from None
    limiter.request_filter(lambda: request.endpoint in UNCHARGED)
    # the address's limit first: its refusals never use up the username's logins
    limiter.shared_limit(
        lambda: config["ANONYMOUS_RATE_LIMIT"], scope=SCOPE, key_func=client_address_key
    )(logins)
    limiter.limit(
        lambda: config["AUTH_RATE_LIMIT"],
        key_func=login_key,
        scope="login",
        error_message=lambda: f"Too many logins ({limiter.current_limit.limit}).",
    )(logins)
    return limiter
