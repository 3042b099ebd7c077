"""Who calls this request: credentials from the headers, checked once, and the scope checks."""

import functools

from flask import current_app, g, request

from .. import credentials
from ..credentials import Caller
from ..errors import Forbidden, Unauthorized
from . import get_runtime
from .problems import with_headers

REALM = 'realm="people-service"'


def challenge(error: str | None = None) -> dict:
    bearer = f"Bearer {REALM}" + (f', error="{error}"' if error else "")
    return {"WWW-Authenticate": f'ApiKey {REALM}, header="X-API-Key", {bearer}'}


def _refused(detail: str, error: str | None = None) -> Unauthorized:
    return with_headers(Unauthorized(detail), challenge(error))


def caller_of(runtime, headers) -> Caller | None:
    """The caller the headers name, None without credentials; Unauthorized for wrong ones."""
    key = headers.get("X-API-Key")
    if key is not None:
        caller = credentials.caller_from_key(runtime.store, key.strip())
        if caller is None:
            hint = " Tokens go in 'Authorization: Bearer'." if key.count(".") == 2 else ""
            raise _refused(f"The API key is unknown or revoked.{hint}")
        return caller
    header = headers.get("Authorization")
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        raise _refused(
            "Send 'Authorization: Bearer <token>' or 'X-API-Key: <key>'.", "invalid_request"
        )
    caller = credentials.caller_from_token(runtime.store, token, runtime.secret)
    if caller is None:
        hint = " API keys go in X-API-Key." if token.startswith(credentials.KEY_PREFIX) else ""
        raise _refused(f"The token is invalid or expired.{hint}", "invalid_token")
    return caller


def identify(runtime) -> Caller | None:
    """The request's caller from its headers, None without credentials; wrong ones are kept
    for authenticate() to answer, so that the open endpoints still serve."""
    try:
        return caller_of(runtime, request.headers)
    except Unauthorized as error:
        g.refusal = error
        return None


def authenticate() -> Caller:
    """The caller that start_request identified, or Unauthorized."""
    caller = g.get("caller")
    if caller is None:
        raise g.get("refusal") or _refused(
            "Send an API key in X-API-Key or a token in 'Authorization: Bearer'."
        )
    return caller


current_caller = authenticate


def check_scope(caller: Caller, scope: str) -> None:
    if scope not in caller.scopes:
        bearer = f'Bearer {REALM}, error="insufficient_scope", scope="{scope}"'
        headers = {"WWW-Authenticate": bearer} if caller.kind == "user" else {}
        raise with_headers(Forbidden(f"This needs the scope '{scope}'."), headers)


def needed_scope(view) -> str:
    """The scope a request to `view` needs: its own (`required(scope=…)`), else 'read' for GET
    and HEAD and 'write' for every other method."""
    return getattr(view, "scope", None) or (
        "read" if request.method in ("GET", "HEAD") else "write"
    )


def required(view=None, *, scope: str | None = None):
    """Views need credentials and their scope (see needed_scope); `@required(scope="admin")`."""
    if view is None:
        return functools.partial(required, scope=scope)

    @functools.wraps(view)
    def wrapper(*args, **kwargs):
        check_scope(authenticate(), needed_scope(wrapper))
        return view(*args, **kwargs)

    wrapper.scope = scope
    return wrapper


def caller_summary(caller: Caller) -> dict:
    """What /me and GraphQL's `me` say about the caller."""
    usage = get_runtime().usage
    return credentials.summary(usage, caller, current_app.config["RATE_LIMIT"])
