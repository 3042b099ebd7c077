"""Credentials: API keys, users, passwords, tokens and usage; REST, GraphQL and the CLI call it."""

import hashlib
import hmac
import logging
import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass
from types import SimpleNamespace

import jwt
from werkzeug.security import generate_password_hash

from . import schemas
from .errors import BadRequest, NotFound, ServiceError
from .passwords import DEFAULT_METHOD, check_password, dummy_hash, names_its_context
from .service import Viewer
from .store import iso

log = logging.getLogger("people_service")
KEY_PREFIX = "ps_"
ISSUER = "people-service"


@dataclass(frozen=True)
class Caller:
    """An authenticated caller: an API key or a user with a token."""

    kind: str  # "api_key" or "user"
    id: int
    name: str
    scopes: frozenset
    rate_limit: str | None  # its own limit; None: the default

    @property
    def key(self) -> str:
        """The caller's identity for rate limits, usage and message ownership."""
        return f"{self.kind}:{self.id}"

    @property
    def viewer(self) -> Viewer:
        return Viewer(self.key, self.name, "admin" in self.scopes)


def _scopes(scopes: list[str]) -> str:
    return " ".join(scope for scope in schemas.SCOPES if scope in scopes)


def hash_key(key: str) -> str:
    """Keys are random enough that a fast hash is safe; only the hash is stored."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _new_key() -> tuple[str, str, str]:
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    return key, key[:8], hash_key(key)


def create_key(store, name: str, scopes="read,write", rate_limit: str | None = None) -> str:
    """A new API key (returned once, never stored in clear); a taken name is Conflict."""
    given = {"name": name, "scopes": scopes, "rate_limit": rate_limit}
    checked = schemas.load(schemas.key_request_schema, given, error=BadRequest)
    key, prefix, digest = _new_key()
    store.insert_key(
        {**checked, "prefix": prefix, "key_hash": digest, "scopes": _scopes(checked["scopes"])}
    )
    return key


def check_field(kind: str, field: str, value) -> None:
    """Check one field of a new key or user by the rule create_key or create_user applies."""
    schema = {"key": schemas.KeyRequestSchema, "user": schemas.UserRequestSchema}[kind]
    schemas.load(schema(only=(field,)), {field: value}, error=BadRequest)


def revoke_key(store, name: str) -> None:
    """Refuse a key from now on, in every process; raises NotFound for no such active key."""
    if not store.revoke_key(name):
        raise NotFound(f"No active API key named '{name}'.")


def rotate_key(store, name: str) -> str:
    """A new secret for an active key (returned once); its name, limits and usage stay."""
    key, prefix, digest = _new_key()
    if not store.rotate_key(name, prefix, digest):
        raise NotFound(f"No active API key named '{name}'.")
    return key


def delete_key(store, name: str) -> None:
    """Forget a key, revoked or not (it is refused from now on); NotFound if there is none."""
    if not store.delete_key(name):
        raise NotFound(f"No API key named '{name}'.")


def caller_from_key(store, key: str) -> Caller | None:
    """The caller an API key stands for, or None for an unknown or revoked key."""
    if not key.startswith(KEY_PREFIX) or len(key) > 128:
        return None
    digest = hash_key(key)
    row = store.key_by_hash(digest)
    if row is None or not hmac.compare_digest(row["key_hash"], digest):
        return None
    return Caller(
        "api_key", row["id"], row["name"], frozenset(row["scopes"].split()), row["rate_limit"]
    )


def create_user(
    store,
    username: str,
    password: str,
    scopes="read,write",
    rate_limit: str | None = None,
    method: str = DEFAULT_METHOD,
) -> None:
    """A login for the token handshake (password hashed by `method`); a taken name is Conflict."""
    given = {"username": username, "password": password, "scopes": scopes, "rate_limit": rate_limit}
    checked = schemas.load(schemas.user_request_schema, given, error=BadRequest)
    password = check_new_password(checked.pop("password"), checked["username"])
    hashed = generate_password_hash(password, method)
    store.insert_user({**checked, "password_hash": hashed, "scopes": _scopes(checked["scopes"])})


def check_new_password(password: str, username: str) -> str:
    """`password` if `username` may have it; BadRequest naming the rule it breaks."""
    checked = schemas.load(schemas.password_schema, {"password": password}, error=BadRequest)
    if names_its_context(checked["password"], username):
        raise BadRequest.of_field(
            "password", "Must not contain the username or the service's name."
        )
    return checked["password"]


def change_password(store, username: str, password: str, method: str = DEFAULT_METHOD) -> None:
    """A new password; tokens issued before it stop working at once, in every process."""
    password = check_new_password(password, username)
    if not store.set_password(username, generate_password_hash(password, method)):
        raise NotFound(f"No user named '{username}'.")


def set_disabled(store, username: str, disabled: bool) -> None:
    """Disable a user (no logins; its tokens stop working at once, in every process), or let it
    log in again (tokens from before the disable stay invalid)."""
    if not store.set_disabled(username, disabled):
        raise NotFound(f"No {'enabled' if disabled else 'disabled'} user named '{username}'.")


def delete_user(store, username: str) -> None:
    """Forget a user; its tokens stop working at once."""
    if not store.delete_user(username):
        raise NotFound(f"No user named '{username}'.")


def login(store, username: str, password: str, method: str = DEFAULT_METHOD) -> dict | None:
    """The user row for a correct username and password, else None, in similar time."""
    user = store.user_by_name(username) if schemas.is_username(username) else None
    if user is None:
        check_password(dummy_hash(method), password)
        return None
    if not check_password(user["password_hash"], password) or user["disabled_at"]:
        return None  # a disabled user hears exactly what a wrong password hears
    return user


def issue_token(user: dict, secret: str, ttl: int) -> dict:
    """A bearer token for a user who logged in, as the handshake answers it."""
    now = int(time.time())
    claims = {
        "sub": user["username"],
        "scope": user["scopes"],
        "iat": now,
        "exp": now + ttl,
        "iss": ISSUER,
        # the user's token generation: a new password or a disable moves it on
        "gen": user["token_generation"],
        # the user's row (never reused): a new user of a deleted one's name starts at gen 0
        "uid": user["id"],
    }
    token = jwt.encode(claims, secret, algorithm="HS256")
    return {"access_token": token, "token_type": "Bearer", "expires_in": ttl}


def caller_from_token(store, token: str, secret: str) -> Caller | None:
    """The user a token stands for; None when it is invalid, expired, or its user is gone,
    disabled or has a new password since (read on every request: any process's change counts)."""
    try:
        claims = jwt.decode(
            token,
            secret,
            algorithms=["HS256"],
            issuer=ISSUER,
            options={"require": ["exp", "iat", "sub", "iss", "scope", "gen", "uid"]},
            leeway=5,
        )
    except jwt.InvalidTokenError:
        return None
    if not isinstance(claims["scope"], str) or not schemas.is_username(claims["sub"]):
        return None  # signed by us, yet not what we issue: a lone surrogate cannot be a name
    user = store.user_by_name(claims["sub"])
    if user is None or user["disabled_at"] or claims["gen"] != user["token_generation"]:
        return None
    if claims["uid"] != user["id"]:
        return None  # issued to an earlier user of this name
    # a token never grants more than its user has now
    scopes = frozenset(claims["scope"].split()) & frozenset(user["scopes"].split())
    return Caller("user", user["id"], user["username"], scopes, user["rate_limit"])


def load_secret(config: dict, store) -> str:
    """SECRET_KEY, else the one the store keeps (beside the SQLite file, or in PostgreSQL)."""
    secret = str(config.get("SECRET_KEY") or store.stored_secret())
    if len(secret.encode()) < 32:
        raise ValueError("the stored secret is shorter than 32 bytes")
    return secret


def summary(usage, caller: Caller, default_limit: str) -> dict:
    """What /me and GraphQL's `me` say about a caller; the request count is exact."""
    count, last_used = usage.exact(caller.kind, caller.id)
    return {
        "kind": caller.kind,
        "name": caller.name,
        "scopes": _scopes(caller.scopes).split(),
        "rate_limit": caller.rate_limit or default_limit,
        "request_count": count,
        "last_used": last_used,
    }


class UsageTracker:
    """Counts requests per caller without a database write on every request; one per process
    (its lock and flushing thread are never used across a fork)."""

    def __init__(self, store, interval: float = 5.0):
        self.store, self.interval = store, interval
        self._mine = SimpleNamespace(
            counts=Counter(),  # (kind, id) -> requests not yet written
            last={},  # (kind, id) -> time of the last of them
            lock=threading.Lock(),  # guards counts and last
            flush_lock=threading.Lock(),  # a flush and an exact read never interleave
            stop=threading.Event(),
            thread=None,
        )

    @property
    def _thread(self) -> threading.Thread | None:
        return self._mine.thread

    def hit(self, caller) -> None:
        """Count one request of `caller` (anything with .kind and .id)."""
        ident, mine = (caller.kind, caller.id), self._mine
        with mine.lock:
            mine.counts[ident] += 1
            mine.last[ident] = time.time()  # formatted when written: this runs on every request
            if mine.thread is None:
                mine.thread = threading.Thread(target=self._run, name="usage-flush", daemon=True)
                mine.thread.start()

    def _run(self) -> None:
        while not self._mine.stop.wait(self.interval):
            try:
                self.flush()
            except Exception:  # never the end of counting: the next round tries again
                log.exception("usage flush failed")

    def flush(self) -> None:
        """Write the pending counts; on failure they are kept for the next flush."""
        mine = self._mine
        with mine.flush_lock:
            with mine.lock:
                counts, last, mine.counts, mine.last = mine.counts, mine.last, Counter(), {}
            if not counts:
                return
            try:
                self.store.add_usage({ident: (n, iso(last[ident])) for ident, n in counts.items()})
            except Exception as exc:
                # a busy or unreachable database is expected under load: a line, no traceback
                expected = isinstance(exc, ServiceError)
                log.warning(
                    "could not flush usage counts; will retry: %s", exc, exc_info=not expected
                )
                with mine.lock:
                    mine.counts.update(counts)
                    mine.last = {**last, **mine.last}

    def exact(self, kind: str, ident: int) -> tuple[int, str | None]:
        """Stored plus pending request count, and the last use."""
        mine = self._mine
        with mine.flush_lock:
            stored = self.store.usage(kind, ident) or {"request_count": 0, "last_used": None}
            with mine.lock:
                count, stamp = mine.counts[kind, ident], mine.last.get((kind, ident))
        last = max(stored["last_used"] or "", iso(stamp) if stamp else "") or None
        return stored["request_count"] + count, last

    def stop(self) -> None:
        """Stop this process's flushing thread and write what is pending."""
        mine = self._mine
        mine.stop.set()
        if mine.thread is not None and mine.thread is not threading.current_thread():
            mine.thread.join(timeout=self.interval + 5)
        self.flush()
