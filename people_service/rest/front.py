"""The front page and the API documentation: HTML for browsers, JSON for programs."""

from flask import Blueprint, current_app, render_template, request, url_for

from ..web.jsonio import json_response
from ..web.negotiation import wants_html
from ..web.pages import content_security_policy, html_response, vendor_url
from .openapi import release
from .ops import openapi

bp = Blueprint("front", __name__)

DESCRIPTION = (
    "People, their friendships and messages over HTTP: a REST API and a GraphQL endpoint over "
    "the same data, with API keys or login tokens and per-key rate limits."
)
# The README's first curl example, on the URL the page is served on (a test keeps the two the same).
EXAMPLE = """curl -i '{base}/people?limit=5' -H "X-API-Key: $KEY\""""
# Swagger UI sets styles inline (React); its scripts are files of ours
DOCS_POLICY = content_security_policy(inline_styles=True)


@bp.get("/")
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


@bp.get("/docs")
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
    response = openapi()
    response.headers["Content-Location"] = url_for("ops.openapi")
    response.headers["Vary"] = "Accept"
    return response
