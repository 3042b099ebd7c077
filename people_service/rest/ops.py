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

bp, tokens, front = (
    Blueprint("ops", __name__),
    Blueprint("tokens", __name__),
    Blueprint("front", __name__),
)
DESCRIPTION = (
    "People, their friendships and messages over HTTP: a REST API and a GraphQL endpoint over "
    "the same data, with API keys or login tokens and per-key rate limits."
)
# The README's first curl example, on the URL the page is served on (a test keeps the two the same).
EXAMPLE = """curl -i '{base}/people?limit=5' -H "X-API-Key: $KEY\""""


@bp.get("/health")
@api(
    ok={200: ("Healthy.", HealthSchema), 503: ("The database cannot be used.", HealthSchema)},
    auth=False,
    tag="operations",
)
def health():
    """Whether the service and its database answer"""
    database = database_state()
    if database == "ok":
        return json_response({"status": "ok", "database": "ok"})
    body = {"status": "unavailable", "database": database}
    return json_response(body, 503, {"Retry-After": "5"})  # an operator's fix takes a while


def document():
    """The OpenAPI document, built once per app; under a mount prefix, its paths are too."""
    if "openapi" not in current_app.extensions:
        current_app.extensions["openapi"] = build_spec(current_app, DESCRIPTION)
    servers = {"servers": [{"url": request.script_root}]} if request.script_root else {}
    return json_response({**current_app.extensions["openapi"], **servers})


bp.add_url_rule("/openapi.json", "openapi", takes()(document))


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
    description="The body (JSON or a form) is read up to 16 KiB (413 beyond).",
)
def issue_token():
    """Exchange a username and password for a bearer token"""
    given, runtime = g.login, get_runtime()
    method = current_app.config["PASSWORD_HASH_METHOD"]
    with runtime.logins.turn(request.remote_addr or "unknown"):  # one check at a time per address
        user = credentials.login(runtime.store, given["username"], given["password"], method)
    if user is None:
        raise with_headers(Unauthorized("The username or password is wrong."), challenge())
    body = credentials.issue_token(user, runtime.secret, current_app.config["TOKEN_TTL"])
    return json_response(body, headers={"Cache-Control": "no-store"})


def read_login() -> None:
    """The login's body, read once before the limiter: its username keys the second limit."""
    check_query(issue_token.query_names)  # before its body, as every view's
    request.max_content_length = 16 * 1024  # a username and a password, escaped
    form = request.mimetype == "application/x-www-form-urlencoded"
    g.login = schemas.load(
        schemas.token_request_schema, request.form.to_dict() if form else json_body()
    )
    g.login_username = g.login["username"]


issue_token.prepare = read_login


@front.get("/")
def front_page():
    """What this service is and where to go; open, like /health."""
    names = {"graphql": "graphql.graphql_endpoint", "docs": "front.docs", "openapi": "ops.openapi"}
    links = {
        name: url_for(endpoint) for name, endpoint in {**names, "health": "ops.health"}.items()
    }
    if not wants_html():
        body = {"name": "people-service", "version": release(), "description": DESCRIPTION}
        return json_response({**body, "links": links}, headers={"Vary": "Accept"})
    # rendered per request, never cached: the base URL is what this request was sent to
    return html_response(
        render_template(
            "front.html",
            title="people-service",
            description=DESCRIPTION,
            links=links,
            explorer=current_app.config["EXPLORER"] != "none",
            example=EXAMPLE.format(base=request.url_root.rstrip("/")),
        )
    )


@front.get("/docs")
def docs():
    """Swagger UI over /openapi.json for a browser; the OpenAPI document itself otherwise."""
    if not wants_html():
        response = document()
        response.headers.update({"Content-Location": url_for("ops.openapi"), "Vary": "Accept"})
        return response
    page = render_template(
        "docs.html",
        title="people-service API",
        css=vendor_url("swagger-ui-dist", "swagger-ui.css"),
        favicon=vendor_url("swagger-ui-dist", "favicon-32x32.png"),
        script=vendor_url("swagger-ui-dist", "swagger-ui-bundle.js"),
        openapi=url_for("ops.openapi"),
    )
    # Swagger UI sets styles inline (React); its scripts are files of ours
    return html_response(page, content_security_policy(inline_styles=True))
