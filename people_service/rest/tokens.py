"""The login handshake: a username and password for a bearer token."""

import threading

from flask import Blueprint, current_app, request

from .. import credentials, schemas
from ..errors import Busy, Unauthorized
from ..web import services
from ..web.caller import challenge
from ..web.jsonio import json_body, json_response
from ..web.problems import with_headers
from . import shapes
from .openapi import doc
from .params import strict_query

bp = Blueprint("tokens", __name__)
strict_query(bp)

FORM = "application/x-www-form-urlencoded"
# One password check at a time per process: each costs about 0.2 s of CPU at the default work
# factor, so a flood of logins, even refused ones, must not take every thread and core; a
# login that finds another being checked waits only briefly, so waiting logins hold no threads.
CHECKS = threading.BoundedSemaphore(1)
CHECK_WAIT_SECONDS = 0.05  # a waiting login holds a request thread


@bp.post("/auth/token")
@doc(
    "Exchange a username and password for a bearer token",
    body=schemas.TokenRequestSchema,
    ok={200: ("A token to send as 'Authorization: Bearer <token>'.", shapes.TokenSchema, [])},
    errors=[401],
    auth=False,
    tag="auth",
    description="The body is read up to 16 KiB (413 beyond): a username and a password, as "
    "JSON or as a form (application/x-www-form-urlencoded).",
)
def issue_token():
    data = request.form.to_dict() if request.mimetype == FORM else json_body()
    given = schemas.load(schemas.token_request_schema, data)
    ext = services()
    method = current_app.config["PASSWORD_HASH_METHOD"]
    if not CHECKS.acquire(timeout=CHECK_WAIT_SECONDS):
        raise Busy("Other logins are being checked; retry in a second.")
    try:
        user = credentials.login(ext.store, given["username"], given["password"], method)
    finally:
        CHECKS.release()
    if user is None:
        raise with_headers(Unauthorized("The username or password is wrong."), challenge())
    body = credentials.issue_token(user, ext.token_secret, current_app.config["TOKEN_TTL"])
    return json_response(body, headers={"Cache-Control": "no-store"})
