"""The login handshake: a username and password for a bearer token."""

from __future__ import annotations

from flask import Blueprint, current_app, request

from .. import credentials, schemas, service
from ..errors import Unauthorized
from ..web import get_store
from ..web.caller import challenge
from ..web.jsonio import json_body, json_response
from .openapi import doc

bp = Blueprint("tokens", __name__)

FORM = "application/x-www-form-urlencoded"


@bp.post("/auth/token")
@doc(
    "Exchange a username and password for a bearer token",
    body=schemas.TokenRequestSchema,
    body_types=("application/json", FORM),
    ok={200: ("A token to send as 'Authorization: Bearer <token>'.", schemas.TokenSchema, [])},
    errors=[401],
    auth=False,
    tag="auth",
)
def issue_token():
    data = request.form.to_dict() if request.mimetype == FORM else json_body()
    given = service.validated(schemas.token_request_schema, data)
    user = credentials.login(get_store(), given["username"], given["password"])
    if user is None:
        raise Unauthorized("The username or password is wrong.", headers=challenge())
    ttl = current_app.config["TOKEN_TTL"]
    token = credentials.issue_token(user, current_app.config["SECRET_KEY"], ttl)
    body = {"access_token": token, "token_type": "Bearer", "expires_in": ttl}
    return json_response(body, headers={"Cache-Control": "no-store"})
