"""The front page and the API documentation: HTML for browsers, JSON for programs."""

from __future__ import annotations

from flask import Blueprint, current_app, url_for

from ..web.jsonio import json_response
from ..web.negotiation import wants_html
from ..web.pages import content_security_policy, html_response, rendered, vendor_url
from .openapi import release
from .ops import openapi

bp = Blueprint("front", __name__)

DESCRIPTION = (
    "People, their friendships and messages over HTTP: a REST API and a GraphQL endpoint over "
    "the same data, with API keys or login tokens and per-key rate limits."
)
# The README's first curl example (a test keeps the two the same).
EXAMPLE = """curl -i 'http://127.0.0.1:8080/people?limit=5' -H "X-API-Key: $KEY\""""
# Swagger UI sets styles inline (React); its scripts are files of ours
DOCS_POLICY = content_security_policy(inline_styles=True)


def links() -> dict[str, str]:
    """Where to go from the front page (paths on this server, never built from Host)."""
    return {
        "graphql": url_for("graphql.graphql_endpoint"),
        "docs": url_for("front.docs"),
        "openapi": url_for("ops.openapi"),
        "health": url_for("ops.health"),
    }


@bp.get("/")
def front_page():
    """What this service is and where to go; open, like /health."""
    if wants_html():
        page = rendered(
            "front.html",
            lambda: {
                "title": "people-service",
                "description": DESCRIPTION,
                "links": links(),
                "explorer": current_app.config["EXPLORER"] != "none",
                "example": EXAMPLE,
            },
        )
        return html_response(page)
    body = {
        "name": "people-service",
        "version": release(),
        "description": DESCRIPTION,
        "links": links(),
    }
    return json_response(body, headers={"Vary": "Accept"})


@bp.get("/docs")
def docs():
    """Swagger UI over /openapi.json for a browser; the OpenAPI document itself otherwise."""
    if wants_html():
        page = rendered(
            "docs.html",
            lambda: {
                "title": "people-service API",
                "css": vendor_url("swagger-ui-dist", "swagger-ui.css"),
                "favicon": vendor_url("swagger-ui-dist", "favicon-32x32.png"),
                "script": vendor_url("swagger-ui-dist", "swagger-ui-bundle.js"),
                "openapi": url_for("ops.openapi"),
            },
        )
        return html_response(page, DOCS_POLICY)
    response = openapi()
    response.headers["Content-Location"] = url_for("ops.openapi")
    response.headers["Vary"] = "Accept"
    return response
