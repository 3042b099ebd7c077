"""Credentials: API keys, users, passwords, tokens and usage; REST, GraphQL and the CLI call it."""

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

import jwt
from werkzeug.security import generate_password_hash

from . import schemas
from .errors import BadRequest, NotFound
from .passwords import DEFAULT_METHOD, check_password, dummy_hash, names_its_context
from .service import Viewer

KEY_PREFIX = "ps_"
ISSUER = "people-service"
CLAIMS = ["exp", "iat", "sub", "iss", "scope", "gen", "uid"]


@dataclass(frozen=True)
class Caller:
    kind: str  # "api_key" or "user"
    id: int
    name: str
    scopes: frozenset
    rate_limit: str | None  # its own limit; None: the default

    @property
    def key(self) -> str:  # its identity for rate limits, usage and message ownership
        return f"{self.kind}:{self.id}"

    @property
    def viewer(self) -> Viewer:
        return Viewer(self.key, self.name, "admin" in self.scopes)


def _scopes(scopes) -> str:
    return " ".join(scope for scope in schemas.SCOPES if scope in scopes)


def hash_key(key: str) -> str:  # keys are random enough that a fast hash is safe
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _new_key() -> tuple[str, str, str]:
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    return key, key[:8], hash_key(key)


def create_key(store, name: str, scopes="read,write", rate_limit: str | None = None) -> str:
    given = {"name": name, "scopes": scopes, "rate_limit": rate_limit}
    checked = schemas.load(schemas.key_request_schema, given, error=BadRequest)
    key, prefix, digest = _new_key()
    scopes = _scopes(checked["scopes"])
    store.insert_key({**checked, "prefix": prefix, "key_hash": digest, "scopes": scopes})
    return key


def check_field(kind: str, field: str, value) -> None:
    """Check one field of a new key or user by the rule create_key or create_user applies."""
    schema = {"key": schemas.KeyRequestSchema, "user": schemas.UserRequestSchema}[kind]
    schemas.load(schema(only=(field,)), {field: value}, error=BadRequest)


def rotate_key(store, name: str) -> str:
    key, prefix, digest = _new_key()
    if not store.rotate_key(name, prefix, digest):
        raise NotFound(f"No active API key named '{name}'.")
    return key


def caller_from_key(store, key: str) -> Caller | None:
    if not key.startswith(KEY_PREFIX) or len(key) > 128:
        return None
    row = store.key_by_hash(digest := hash_key(key))
    if row is None or not hmac.compare_digest(row["key_hash"], digest):
        return None
    scopes = frozenset(row["scopes"].split())
    return Caller("api_key", row["id"], row["name"], scopes, row["rate_limit"])


def create_user(
    store, username: str, password: str, scopes="read,write", rate_limit=None, method=DEFAULT_METHOD
) -> None:
    """A login for the token handshake (password hashed by `method`); a taken name is Conflict."""
    given = {"username": username, "password": password, "scopes": scopes, "rate_limit": rate_limit}
    checked = schemas.load(schemas.user_request_schema, given, error=BadRequest)
    password = check_new_password(checked.pop("password"), checked["username"])
    hashed, scopes = generate_password_hash(password, method), _scopes(checked["scopes"])
    store.insert_user({**checked, "password_hash": hashed, "scopes": scopes})


def check_new_password(password: str, username: str) -> str:
    """`password` if `username` may have it; BadRequest naming the rule it breaks."""
    checked = schemas.load(schemas.password_schema, {"password": password}, error=BadRequest)
    if names_its_context(checked["password"], username):
        message = "Must not contain the username or the service's name."
        raise BadRequest.of_field("password", message)
    return checked["password"]


def change_password(store, username: str, password: str, method: str = DEFAULT_METHOD) -> None:
    hashed = generate_password_hash(check_new_password(password, username), method)
    if not store.set_password(username, hashed):
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
    now = int(time.time())
    claims = {"sub": user["username"], "scope": user["scopes"], "iat": now, "exp": now + ttl}
    # gen: a new password or a disable moves it on; uid: a new user of a deleted one's name
    # starts at gen 0, so a token of the old user must name the row it was issued to
    claims |= {"iss": ISSUER, "gen": user["token_generation"], "uid": user["id"]}
    token = jwt.encode(claims, secret, algorithm="HS256")
    return {"access_token": token, "token_type": "Bearer", "expires_in": ttl}


def caller_from_token(store, token: str, secret: str) -> Caller | None:
    """The user a token stands for, read on every request; None if the token is bad or old."""
    try:
        claims = jwt.decode(token, secret, ["HS256"], {"require": CLAIMS}, issuer=ISSUER, leeway=5)
    except jwt.InvalidTokenError:
        return None
    if not isinstance(claims["scope"], str) or not schemas.is_username(claims["sub"]):
        return None  # signed by us, yet not what we issue: a lone surrogate cannot be a name
    user = store.user_by_name(claims["sub"])
    current = (user["token_generation"], user["id"]) if user and not user["disabled_at"] else None
    if current != (claims["gen"], claims["uid"]):
        return None  # gone, disabled, a new password since, or an earlier user of this name
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
    """What /me and GraphQL's `me` say about a caller, its request count exact."""
    count, last_used = usage.exact(caller.kind, caller.id)
    return {
        "kind": caller.kind,
        "name": caller.name,
        "scopes": _scopes(caller.scopes).split(),
        "rate_limit": caller.rate_limit or default_limit,
        "request_count": count,
        "last_used": last_used,
    }
