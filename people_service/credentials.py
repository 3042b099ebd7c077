"""Credentials: API keys, users, passwords, tokens, and a cache of the callers they stand for."""

from __future__ import annotations

import functools
import hashlib
import hmac
import math
import re
import secrets
import time
from dataclasses import dataclass

import jwt
from werkzeug.security import check_password_hash, generate_password_hash

from .errors import BadRequest
from .service import Viewer

SCOPES = ("read", "write", "admin")
KEY_PREFIX = "ps_"
ISSUER = "people-service"
# OWASP's floor for PBKDF2-SHA256; about 0.15 s per check here, so the handshake is throttled
PASSWORD_METHOD = "pbkdf2:sha256:600000"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")


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


def check_name(name: str, what: str = "name") -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise BadRequest(
            f"The {what} must be 1 to 64 letters, digits or . _ @ - and start with one of the"
            " first two."
        )
    return name


def parse_scopes(text) -> list[str]:
    """'read,write' or 'read write' as a checked list."""
    items = text.replace(",", " ").split() if isinstance(text, str) else list(text)
    unknown = [item for item in items if item not in SCOPES]
    if unknown or not items:
        raise BadRequest(f"Scopes must be some of {', '.join(SCOPES)}; got {text!r}.")
    return [scope for scope in SCOPES if scope in items]


# -- API keys -------------------------------------------------------------------------------


def hash_key(key: str) -> str:
    """Keys are random enough that a fast hash is safe; only the hash is stored."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def create_key(store, name: str, scopes="read,write", rate_limit: str | None = None) -> str:
    """A new API key (returned once, never stored in clear)."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    store.insert_key(
        {
            "name": check_name(name),
            "prefix": key[:8],
            "key_hash": hash_key(key),
            "scopes": " ".join(parse_scopes(scopes)),
            "rate_limit": rate_limit,
        }
    )
    return key


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


# -- users and tokens -----------------------------------------------------------------------


def create_user(
    store, username: str, password: str, scopes="read,write", rate_limit: str | None = None
) -> None:
    if not password or len(password) > 1024:
        raise BadRequest("The password must be 1 to 1024 characters.")
    store.insert_user(
        {
            "username": check_name(username, "username"),
            "password_hash": generate_password_hash(password, PASSWORD_METHOD),
            "scopes": " ".join(parse_scopes(scopes)),
            "rate_limit": rate_limit,
        }
    )


@functools.cache
def _dummy_hash() -> str:
    return generate_password_hash(secrets.token_hex(16), PASSWORD_METHOD)


def login(store, username: str, password: str) -> dict | None:
    """The user row for a correct username and password, else None (in similar time)."""
    user = store.user_by_name(username)
    if user is None:
        check_password_hash(_dummy_hash(), password)  # same cost as a real check
        return None
    if not check_password_hash(user["password_hash"], password):
        return None
    return user


def issue_token(user: dict, secret: str, ttl: int) -> str:
    now = int(time.time())
    claims = {
        "sub": user["username"],
        "scope": user["scopes"],
        "iat": now,
        "exp": now + ttl,
        "iss": ISSUER,
    }
    return jwt.encode(claims, secret, algorithm="HS256")


def caller_from_token(store, token: str, secret: str) -> tuple[Caller, int] | None:
    """The user a token stands for and when it expires; None when it is invalid, expired or the
    user is gone."""
    try:
        claims = jwt.decode(
            token,
            secret,
            algorithms=["HS256"],
            issuer=ISSUER,
            options={"require": ["exp", "iat", "sub", "iss", "scope"]},
            leeway=5,
        )
    except jwt.InvalidTokenError:
        return None
    if not isinstance(claims["scope"], str):
        return None
    user = store.user_by_name(claims["sub"])
    if user is None:
        return None
    # a token never grants more than its user has now
    scopes = frozenset(claims["scope"].split()) & frozenset(user["scopes"].split())
    return Caller("user", user["id"], user["username"], scopes, user["rate_limit"]), claims["exp"]


class CallerCache:
    """Callers of valid keys and tokens, so a request costs no database lookup to identify.

    Entries last until any credential is revoked (the store's credentials epoch changes, also
    when the CLI revokes from another process) and, for tokens, until they expire.
    """

    LIMIT = 10_000

    def __init__(self, store):
        self.store = store
        self.entries: dict[str, tuple[Caller, float]] = {}
        self.epoch: bytes | None = None

    def get(self, credential: str) -> Caller | None:
        epoch = self.store.credentials_epoch()
        if epoch is None:
            return None  # revocations cannot be seen: look every caller up
        if epoch != self.epoch:
            self.entries, self.epoch = {}, epoch
        entry = self.entries.get(credential)
        if entry is None or entry[1] <= time.time():
            return None
        return entry[0]

    def put(self, credential: str, caller: Caller, expires: float = math.inf) -> None:
        if self.epoch is None:
            return
        if len(self.entries) >= self.LIMIT:
            self.entries = {}  # a crude bound: refilled from the database as callers return
        self.entries[credential] = (caller, expires)


def load_secret(config: dict, store) -> str:
    """SECRET_KEY, else the one the store keeps (beside the SQLite file, or in PostgreSQL)."""
    secret = str(config.get("SECRET_KEY") or store.stored_secret())
    if len(secret.encode()) < 32:
        raise ValueError("the stored secret is shorter than 32 bytes")
    return secret
