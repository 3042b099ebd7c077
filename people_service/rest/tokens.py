"""The login handshake: a username and password for a bearer token."""

from __future__ import annotations

from flask import Blueprint, current_app, request

from .. import credentials, schemas
from ..errors import Unauthorized
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
    user = credentials.login(ext.store, given["username"], given["password"], method)
    if user is None:
        raise with_headers(Unauthorized("The username or password is wrong."), challenge())
    body = credentials.issue_token(user, ext.token_secret, current_app.config["TOKEN_TTL"])
    return json_response(body, headers={"Cache-Control": "no-store"})
