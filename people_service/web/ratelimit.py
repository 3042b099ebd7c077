"""Rate limits: one counter per caller (key id, user or address) across the API."""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from functools import lru_cache

from flask import current_app, g, request
from flask_limiter import Limiter
from limits import parse_many
from limits.storage import MemoryStorage
from limits.strategies import STRATEGIES

from ..config import ConfigError
from ..errors import RateLimited, ServiceError
from ..store.counters import default_uri  # also registers the sqlite:// scheme with limits
from .caller import peek_caller
from .jsonio import json_body
from .problems import with_headers

log = logging.getLogger("people_service")

STRATEGY = "sliding-window-counter"  # O(1) per hit, and a refused request is not charged
SCOPE = "global"
RETRY_STORAGE_SECONDS = 30
SHARED = "sqlite://"  # without a path: the counters file beside the database
# Test-then-hit of a multi-window limit holds one of these per key, so two requests of one
# caller in one process cannot both pass the test of a window that has room for one of them.
LOCK_STRIPES = 64
# The login handshake's body: a username (64 characters) and a password (1,024), escaped.
# Before this bound, a 1 MiB form of empty fields took 0.4 s to parse, without credentials.
HANDSHAKE_MAX_BODY = 16 * 1024


def client_address() -> str:
    # waitress sets REMOTE_ADDR from X-Forwarded-For only for a configured trusted proxy
    return request.remote_addr or "unknown"


def limit_key() -> str:
    """The counter a request is charged to; never empty (an empty key would be unlimited)."""
    caller = peek_caller()
    return caller.key if caller else "addr:" + client_address()


def caller_limit() -> str:
    """The caller's own limit, else the default; read on every request so changes apply."""
    caller = peek_caller()
    config = current_app.config
    if caller is None:
        return config["ANONYMOUS_RATE_LIMIT"]
    return caller.rate_limit or config["RATE_LIMIT"]


LIMIT_DETAIL = "Rate limit exceeded ({item}); retry after the Retry-After seconds."
REFUSALS_DETAIL = (
    "Too many queries refused as too complex ({item}); retry after the Retry-After seconds."
)


def refused_key(key: str) -> str:
    """The counter of a caller's refused queries."""
    return "refused:" + key


def prices_itself(endpoint: str) -> bool:
    """Whether the endpoint's view charges its own cost (GraphQL: the query's estimated cost,
    known only once the caller is authenticated and the document measured)."""
    return getattr(current_app.view_functions.get(endpoint), "prices_itself", False)


def handshake_key() -> str:
    """The handshake counts per client address and username together."""
    try:
        data = json_body() if request.is_json else request.form
    except ServiceError:
        data = None  # the view answers the bad body; the address is still charged
    username = data.get("username") if hasattr(data, "get") else None
    return f"login:{client_address()}:{str(username or '')[:200]}"


def storage_uri(configured: str, database: str) -> str:
    """The storage URI to build: `configured`, with a bare sqlite:// placed beside DATABASE and
    an unset one (decided at the first request) starting as memory://."""
    if configured == SHARED:
        return default_uri(database)
    return configured or "memory://"


@lru_cache(maxsize=256)
def parsed(limit: str):
    """'600/minute' or '10/second;500/hour' as limit items, parsed once."""
    return tuple(parse_many(limit))


class RateLimits:
    """Charges every routed request to its caller, with flask-limiter's storage.

    flask-limiter's Limiter builds the storage (memory:// or redis://) and the strategy.
    Its generic per-request resolution of decorated, default and application limits took a
    quarter of the CPU time of a GET /person (py-spy, bench/run.py), so its own hooks are
    switched off and this class does what this API needs: one limit per caller, charged the
    request's cost, plus the handshake's limit per address and username.

    Most requests cost 1, charged before the view runs. A view that prices itself (GraphQL)
    is charged by `charge(cost)` once it knows the cost; before it runs, a caller without a
    single unit left is refused. A refused request (429, or a query over one of its limits)
    is charged nothing in any of the caller's windows; refused queries count in a window of
    their own (see `waive`). An answer that never reached `charge` (an error) costs 1.
    """

    def __init__(self, app, *, unlimited=frozenset(), handshake=frozenset()):
        """`unlimited`: endpoints never limited; `handshake`: endpoints also limited per
        client address and username."""
        configured = app.config["RATE_LIMIT_STORAGE"]
        try:
            self.limiter = self._limiter(app, storage_uri(configured, app.config["DATABASE"]))
        except Exception as exc:  # an unusable file or URL is the operator's to fix
            shown = re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", configured)  # no password
            raise ConfigError(f"cannot use RATE_LIMIT_STORAGE {shown!r}: {exc}") from None
        # Unset, the storage is decided at the first request (choose_storage); set, the first
        # request only warns if memory:// counts for one process of several.
        self.storage_chosen = False
        self._choosing = threading.Lock()
        app.before_request(self.choose_storage)
        self.prefix = app.config["RATE_LIMIT_PREFIX"]
        self.fallback = STRATEGIES[STRATEGY](MemoryStorage())
        self.storage_failed_at = 0.0
        self.unlimited, self.handshake_endpoints = set(unlimited), set(handshake)
        self.locks = [threading.Lock() for _ in range(LOCK_STRIPES)]
        app.before_request(self.check)
        app.after_request(self.add_headers)

    @staticmethod
    def _limiter(app, uri: str) -> Limiter:
        limiter = Limiter(
            limit_key,
            storage_uri=uri,
            strategy=STRATEGY,
            key_prefix=app.config["RATE_LIMIT_PREFIX"],
        )
        # Registered beforehand, init_app builds the storage and strategy but adds no hooks
        # (it skips apps it already knows): check() below is the whole per-request work.
        app.extensions.setdefault("limiter", set()).add(limiter)
        limiter.init_app(app)
        return limiter

    def choose_storage(self) -> None:
        """Decide, once, where counters live when RATE_LIMIT_STORAGE is unset: memory:// in one
        process, the machine's shared SQLite file when the WSGI server says it runs several
        (PEP 3333's wsgi.multiprocess: gunicorn -w 2 says True, waitress False), which
        create_app could not know."""
        if self.storage_chosen:
            return
        with self._choosing:
            if self.storage_chosen:
                return
            if request.environ.get("wsgi.multiprocess"):
                self._share(current_app._get_current_object())
            self.storage_chosen = True

    def _share(self, app) -> None:
        configured = app.config["RATE_LIMIT_STORAGE"]
        if configured.startswith("memory://"):
            log.warning(
                "RATE_LIMIT_STORAGE is memory:// but several processes serve: each "
                "process counts alone, so a limit allows that many times more"
            )
            return
        if configured:
            return  # an explicit storage always wins
        try:
            self.limiter = self._limiter(app, storage_uri(SHARED, app.config["DATABASE"]))
        except Exception as exc:
            log.error("cannot open the shared rate-limit counters (%s); counting per process", exc)
        else:
            log.info(
                "several processes serve: rate-limit counters are shared through %s",
                self.limiter.storage.path,
            )

    @property
    def strategy(self):
        """The shared storage's strategy, or per-process counters while it is unreachable."""
        failed = self.storage_failed_at
        if failed and time.monotonic() - failed < RETRY_STORAGE_SECONDS:
            return self.fallback
        return self.limiter.limiter

    def _ask(self, method: str, item, key: str, cost: int) -> bool:
        """The strategy's `hit` or `test` of one window."""
        strategy = self.strategy
        try:
            return getattr(strategy, method)(item, self.prefix, key, SCOPE, cost=cost)
        except Exception:  # the storage is down: serve on with per-process counters
            if strategy is self.fallback:
                raise
            log.warning("rate-limit storage unreachable; using per-process counters for now")
            self.storage_failed_at = time.monotonic()
            return getattr(self.fallback, method)(item, self.prefix, key, SCOPE, cost=cost)

    def _short(self, items, key: str, cost: int):
        """The first window without room for `cost`, or None; charges nothing."""
        for item in items:
            if not self._ask("test", item, key, cost):
                return item
        return None

    def _charge(self, limit: str, key: str, cost: int):
        """Charge every window of `limit` or none; returns the window the headers describe
        (the one that refused, else the first) and whether the request was charged.

        One window's hit is atomic and charges nothing when it refuses. Several are tested
        first and hit only if all have room, under a per-key lock, so within a process a later
        window never refuses after an earlier one was charged. Processes sharing Redis can
        still race between test and hit: then the loser is refused by its hit and the windows
        hit before keep its charge (the caller pays once too often, never too little).
        """
        items = parsed(limit)
        if len(items) == 1:
            return items[0], self._ask("hit", items[0], key, cost)
        with self.locks[hash(key) % LOCK_STRIPES]:
            short = self._short(items, key, cost)
            if short is not None:
                return short, False
            for item in items:
                if not self._ask("hit", item, key, cost):
                    return item, False
        return items[0], True

    def check(self) -> None:
        endpoint = request.endpoint
        if endpoint is None or endpoint in self.unlimited:
            return  # unrouted requests (404, 405) and /health are not limited
        if endpoint in self.handshake_endpoints:
            return self._check_handshake()
        key, limit = limit_key(), caller_limit()
        if prices_itself(endpoint) and peek_caller() is not None:
            # a caller with nothing left is refused before its request is read or measured
            items = parsed(limit)
            short = self._short(items, key, 1)
            g.rate_limit = (short or items[0], key)
            if short is not None:
                raise self._refusal(short, key)
            refusals = parsed(current_app.config["ANONYMOUS_RATE_LIMIT"])
            short = self._short(refusals, refused_key(key), 1)
            if short is not None:
                raise self._refusal(short, refused_key(key), REFUSALS_DETAIL)
            g.rate_limit_due = (limit, key)
            return
        item, ok = self._charge(limit, key, 1)
        g.rate_limit = (item, key)
        if not ok:
            raise self._refusal(item, key)

    def _check_handshake(self) -> None:
        """The handshake's limit per address and username, whose key is in the body.

        The address is charged first, atomically, and one with nothing left is refused before
        the body is read: its refusals must not use up the username's logins, also when they
        arrive together (a test of the address, then a charge after the login's, let a
        concurrent flood through to the username). The body, a username and a password, is
        read to HANDSHAKE_MAX_BODY at most (413 beyond).
        """
        key, limit = limit_key(), caller_limit()
        item, ok = self._charge(limit, key, 1)
        g.rate_limit = (item, key)  # the headers describe the address's limit
        if not ok:
            raise self._refusal(item, key)
        request.max_content_length = HANDSHAKE_MAX_BODY
        handshake = handshake_key()
        item, ok = self._charge(current_app.config["AUTH_RATE_LIMIT"], handshake, 1)
        if not ok:
            raise self._refusal(item, handshake)

    def budget(self) -> tuple[int, str]:
        """The most one request of this caller can ever cost (its smallest window's amount),
        and its limit as written."""
        limit = caller_limit()
        return min(item.amount for item in parsed(limit)), limit

    def charge(self, cost: int) -> None:
        """Charge this request `cost` (at least 1), for a view that prices itself.

        Raises RateLimited, charging nothing, when a window has no room for it.
        """
        due = g.pop("rate_limit_due", None)
        if due is None:
            return
        limit, key = due
        item, ok = self._charge(limit, key, max(1, cost))
        g.rate_limit = (item, key)
        if not ok:
            raise self._refusal(item, key)

    def waive(self) -> None:
        """This request was refused before it ran (a limit of the query): it costs nothing.

        Measuring it took work all the same (up to a quarter of a second of CPU for 2,000
        tokens), so refusals count in a window of their own per caller, at the rate of
        requests without credentials: past it, the caller's queries get 429 unread.
        """
        due = g.pop("rate_limit_due", None)
        if due is not None:
            self._charge(current_app.config["ANONYMOUS_RATE_LIMIT"], refused_key(due[1]), 1)

    def _stats(self, item, key: str) -> dict:
        try:
            reset, remaining = self.strategy.get_window_stats(item, self.prefix, key, SCOPE)
        except Exception:
            reset, remaining = time.time() + item.get_expiry(), 0
        return {
            "X-RateLimit-Limit": str(item.amount),
            "X-RateLimit-Remaining": str(max(0, remaining)),
            "X-RateLimit-Reset": str(math.ceil(reset)),
        }

    def _refusal(self, item, key: str, detail: str = LIMIT_DETAIL) -> RateLimited:
        # Remaining stays as it is: a costly query can be refused while cheaper ones still fit
        headers = self._stats(item, key)
        wait = int(headers["X-RateLimit-Reset"]) - time.time()
        headers["Retry-After"] = str(max(1, math.ceil(wait)))
        return with_headers(RateLimited(detail.format(item=item)), headers)

    def add_headers(self, response):
        due = g.pop("rate_limit_due", None)
        if due is not None:
            # the view answered before pricing the request (an error of the request): it costs
            # 1, like any other request; the answer is made, so a refusal here changes nothing
            item, _ = self._charge(*due, 1)
            g.rate_limit = (item, due[1])
        charged = g.get("rate_limit")
        if charged is not None and "X-RateLimit-Limit" not in response.headers:
            response.headers.update(self._stats(*charged))
        return response
