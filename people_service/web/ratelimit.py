"""Rate limits through flask-limiter: one budget per caller (key, user or address) for the API."""

import hashlib
import math
import time

from flask import current_app, g, request
from flask_limiter import ApplicationLimit, Limiter
from limits import parse_many

from ..config import ConfigError
from ..errors import RateLimited, ServiceError
from ..store import redacted
from ..store.counters import default_uri  # also registers the sqlite:// scheme with limits
from .caller import peek_caller
from .jsonio import json_body
from .problems import with_headers

STRATEGY = "sliding-window-counter"  # a refused hit is charged nothing
SCOPE = "global"  # flask-limiter's scope of application limits: one budget across endpoints
# The login handshake's body: a username (64 characters) and a password (1,024), escaped.
HANDSHAKE_MAX_BODY = 16 * 1024


def client_address() -> str:
    return request.remote_addr or "unknown"


def storage_uri(config) -> str:
    """RATE_LIMIT_STORAGE; unset or a bare sqlite://, the counters file beside the database."""
    configured = config["RATE_LIMIT_STORAGE"]
    return configured if configured not in ("", "sqlite://") else default_uri(config["DATABASE"])


def handshake_key() -> str:
    """The handshake's counter: the client address and the username, hashed."""
    try:
        data = json_body() if request.is_json else request.form
    except ServiceError:
        data = None  # the view answers the bad body; the address is still charged
    username = data.get("username") if hasattr(data, "get") else None
    identity = f"{client_address()}\0{str(username or '')[:200]}"
    return "login:" + hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def caller_limit(caller) -> str:
    """The caller's own limit, else the default; read on every request so changes apply."""
    config = current_app.config
    if caller is None:
        return config["ANONYMOUS_RATE_LIMIT"]
    return caller.rate_limit or config["RATE_LIMIT"]


def budget() -> tuple[int, str]:
    """The most one request of this caller can cost (its smallest window), and its limit."""
    limit = caller_limit(peek_caller())
    return min(item.amount for item in parse_many(limit)), limit


def init_app(app, *, unlimited=frozenset(), handshake=frozenset()) -> Limiter:
    """Charge every routed request but `unlimited` ones to its caller (`handshake` ones: per
    address, and per address and username); a view's `rate_limit_cost()` prices its request."""
    config = app.config
    prefix = config["RATE_LIMIT_PREFIX"]
    ids = [prefix] if prefix else []  # what flask-limiter puts before a counter's key

    def caller():
        return None if request.endpoint in handshake else peek_caller()

    def key() -> str:  # never empty: an empty key would be unlimited
        found = caller()
        return found.key if found else "addr:" + client_address()

    def limit() -> str:
        return caller_limit(caller())

    def measure():
        return getattr(current_app.view_functions.get(request.endpoint), "rate_limit_cost", None)

    def cost() -> int:
        if "rate_limit_cost" not in g:
            g.rate_limit_cost = 1
            view_cost = measure()
            if view_cost is not None and caller() is not None:
                try:
                    g.rate_limit_cost = view_cost()
                except ServiceError:  # the view raises it again (a query too complex): never
                    g.rate_limit_cost = None  # raised here, flask-limiter would take it for a
                    # storage failure; the request is charged nothing
                price = g.rate_limit_cost
                if price is None or short(limit(), key(), cost=price) is not None:
                    # refused after it was measured (too complex, or more than is left): the
                    # measuring counts in the caller's window of refused queries
                    short(config["ANONYMOUS_RATE_LIMIT"], "refused:" + key(), charge=True)
                g.rate_limit_cost = g.rate_limit_cost or 0
        return g.rate_limit_cost

    def refusal_detail() -> str:
        breached = limiter.current_limit
        spent = g.get("rate_limit_cost", 1)
        if breached is None or measure() is None or caller() is None:
            return f"Rate limit exceeded ({breached.limit if breached else limit()})."
        return (
            f"This query costs {spent}, and the rate limit ({breached.limit}) has "
            f"{breached.remaining} left; retry after the Retry-After seconds, or ask for less."
        )

    def short(written: str, counter: str, scope=SCOPE, charge=False, cost=1):
        """The first window of `written` without room for `cost`, or None; `charge`: take it."""
        room = limiter.limiter.hit if charge else limiter.limiter.test
        windows = parse_many(written)
        return next((i for i in windows if not room(i, *ids, counter, scope, cost=cost)), None)

    def refusal(item, counter: str, detail: str, scope: str = SCOPE) -> RateLimited:
        reset, remaining = limiter.limiter.get_window_stats(item, *ids, counter, scope)
        headers = {"Retry-After": str(max(1, math.ceil(reset - time.time())))}
        if scope == SCOPE:  # else flask-limiter's headers describe the address's window
            headers["X-RateLimit-Limit"] = str(item.amount)
            headers["X-RateLimit-Remaining"] = str(remaining)
            headers["X-RateLimit-Reset"] = str(math.ceil(reset))
        return with_headers(RateLimited(detail), headers)

    def check_graphql() -> None:
        # before the query is measured: flask-limiter would test and charge in one pass
        found = caller() if measure() is not None else None
        if found is None:
            return
        try:
            item = short(limit(), found.key)
            if item is not None:
                detail = f"Rate limit exceeded ({item}): nothing is left for a query."
                raise refusal(item, found.key, detail)
            refused = "refused:" + found.key
            item = short(current_app.config["ANONYMOUS_RATE_LIMIT"], refused)
        except RateLimited:
            raise
        except Exception:
            return  # the storage is down: flask-limiter's hook falls back to memory
        if item is not None:
            detail = f"Too many queries refused as too complex ({item}); retry later."
            raise refusal(item, refused, detail)

    def check_handshake() -> None:
        # after the address's limit, so its refusals never use up the username's logins
        if request.endpoint not in handshake:
            return
        request.max_content_length = HANDSHAKE_MAX_BODY  # 413 beyond
        counter = handshake_key()
        try:
            item = short(config["AUTH_RATE_LIMIT"], counter, "login", charge=True)
        except Exception:
            return  # the storage is down; the address's limit still holds (in memory)
        if item is not None:
            raise refusal(item, counter, f"Too many logins ({item}).", "login")

    def keep_own_retry(response):
        """Before flask-limiter adds its headers: the Retry-After the answer already had."""
        response.own_retry_after = response.headers.get("Retry-After")
        return response

    def only_refusals_retry(response):
        """After flask-limiter's headers: its Retry-After on 429 only, else the answer's own."""
        if response.status_code != 429:
            own = getattr(response, "own_retry_after", None)
            if own is None:
                response.headers.pop("Retry-After", None)
            else:
                response.headers["Retry-After"] = own
        return response

    try:
        limiter = Limiter(
            key,
            storage_uri=storage_uri(config),
            strategy=STRATEGY,
            headers_enabled=True,
            key_prefix=prefix,
            application_limits=[ApplicationLimit(limit, cost=cost, error_message=refusal_detail)],
            in_memory_fallback_enabled=True,  # the storage down: count per process meanwhile
        )
        app.after_request(only_refusals_retry)
        app.before_request(check_graphql)
        limiter.init_app(app)
        app.after_request(keep_own_retry)  # runs before flask-limiter's (Flask: reverse order)
    except Exception as exc:  # an unusable file or URL is the operator's to fix
        shown = redacted(config["RATE_LIMIT_STORAGE"])
        shown = repr(shown) if shown else "(unset: the counters file beside the database)"
        raise ConfigError(f"cannot use RATE_LIMIT_STORAGE {shown}: {exc}") from None
    limiter.request_filter(lambda: request.endpoint in unlimited)
    app.before_request(check_handshake)
    return limiter
