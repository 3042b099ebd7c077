"""Health, the OpenAPI document, the caller, logins, and the front page and docs (HTML or JSON)."""

from flask import Blueprint, current_app, g, render_template, request, url_for

from .. import credentials, schemas
from ..errors import Unauthorized
from ..web import database_state, get_runtime
from ..web.caller import caller_summary, challenge, current_caller, required
from ..web.jsonio import json_body, json_response
from ..web.negotiation import wants_html
from ..web.pages import content_security_policy, html_response, vendor_url
from ..web.problems import with_headers
from .openapi import (
    CallerSchema,
    HealthSchema,
    TokenSchema,
    api,
    build_spec,
    check_query,
    release,
    takes,
)

bp = Blueprint("ops", __name__)
tokens = Blueprint("tokens", __name__)
front = Blueprint("front", __name__)

FORM = "application/x-www-form-urlencoded"
HANDSHAKE_MAX_BODY = 16 * 1024  # a login's body: a username and a password, escaped
DESCRIPTION = (
    "People, their friendships and messages over HTTP: a REST API and a GraphQL endpoint over "
    "the same data, with API keys or login tokens and per-key rate limits."
)
# The README's first curl example, on the URL the page is served on (a test keeps the two the same).
EXAMPLE = """curl -i '{base}/people?limit=5' -H "X-API-Key: $KEY\""""
# Swagger UI sets styles inline (React); its scripts are files of ours
DOCS_POLICY = content_security_policy(inline_styles=True)


@bp.get("/health")
@api(
    ok={
        200: ("Healthy.", HealthSchema),
        503: ("The database is missing, read-only or unreadable.", HealthSchema),
    },
    auth=False,
    tag="operations",
)
def health():
    """Whether the service and its database answer"""
    database = database_state()
    if database == "ok":
        return json_response({"status": "ok", "database": "ok"})
    return json_response({"status": "unavailable", "database": database}, 503)


def document():
    """The OpenAPI document, built once per app; under a mount prefix, its paths are too."""
    if "openapi" not in current_app.extensions:
        current_app.extensions["openapi"] = build_spec(current_app, DESCRIPTION)
    found = current_app.extensions["openapi"]
    if request.script_root:
        return json_response({**found, "servers": [{"url": request.script_root}]})
    return json_response(found)


@bp.get("/openapi.json")
@takes()
def openapi():
    return document()


@bp.get("/me")
@required
@api(ok={200: ("The caller.", CallerSchema)}, tag="operations")
def me():
    """Who the caller is, its limit and its usage"""
    return json_response(caller_summary(current_caller()))


@tokens.post("/auth/token")
@api(
    body=schemas.TokenRequestSchema,
    ok={200: ("A token to send as 'Authorization: Bearer <token>'.", TokenSchema)},
    auth=False,
    tag="auth",
    description="The body is read up to 16 KiB (413 beyond): a username and a password, as "
    "JSON or as a form (application/x-www-form-urlencoded).",
)
def issue_token():
    """Exchange a username and password for a bearer token"""
    given, runtime = g.login, get_runtime()
    method = current_app.config["PASSWORD_HASH_METHOD"]
    # one check at a time per address, a bounded queue for the rest (runtime.LoginGate)
    with runtime.logins.turn(request.remote_addr or "unknown"):
        user = credentials.login(runtime.store, given["username"], given["password"], method)
    if user is None:
        raise with_headers(Unauthorized("The username or password is wrong."), challenge())
    body = credentials.issue_token(user, runtime.secret, current_app.config["TOKEN_TTL"])
    return json_response(body, headers={"Cache-Control": "no-store"})


def read_login() -> None:
    """The login's body, read once before the limiter: its username keys the second limit."""
    if request.query_string:  # its parameters are refused before its body (as every view's)
        check_query(issue_token.query_names)
    request.max_content_length = HANDSHAKE_MAX_BODY  # 413 beyond
    data = request.form.to_dict() if request.mimetype == FORM else json_body()
    g.login = schemas.load(schemas.token_request_schema, data)
    g.login_username = g.login["username"]


issue_token.prepare = read_login


@front.get("/")
def front_page():
    """What this service is and where to go; open, like /health."""
    links = {
        "graphql": url_for("graphql.graphql_endpoint"),
        "docs": url_for("front.docs"),
        "openapi": url_for("ops.openapi"),
        "health": url_for("ops.health"),
    }
    if not wants_html():
        body = {"name": "people-service", "version": release(), "description": DESCRIPTION}
        return json_response({**body, "links": links}, headers={"Vary": "Accept"})
    # rendered per request, never cached: the base URL is what this request was sent to
    page = render_template(
        "front.html",
        title="people-service",
        description=DESCRIPTION,
        links=links,
        explorer=current_app.config["EXPLORER"] != "none",
        example=EXAMPLE.format(base=request.url_root.rstrip("/")),
    )
    return html_response(page)


@front.get("/docs")
def docs():
    """Swagger UI over /openapi.json for a browser; the OpenAPI document itself otherwise."""
    if wants_html():
        page = render_template(
            "docs.html",
            title="people-service API",
            css=vendor_url("swagger-ui-dist", "swagger-ui.css"),
            favicon=vendor_url("swagger-ui-dist", "favicon-32x32.png"),
            script=vendor_url("swagger-ui-dist", "swagger-ui-bundle.js"),
            openapi=url_for("ops.openapi"),
        )
        return html_response(page, DOCS_POLICY)
    response = document()
    response.headers.update({"Content-Location": url_for("ops.openapi"), "Vary": "Accept"})
    return response
