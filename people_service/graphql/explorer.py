"""The GraphQL explorer page a browser gets from GET /graphql: GraphQL Playground or GraphiQL."""

from __future__ import annotations

from flask import current_app, render_template, url_for

from ..web import services
from ..web.pages import (
    asset_url,
    content_security_policy,
    html_response,
    source_of,
    vendor_url,
)

# Playground's own defaults poll the schema every 2 s, each poll an introspection query charged
# to the key's rate limit; the schema reloads with the page or the refresh button instead.
PLAYGROUND_SETTINGS = {
    "schema.polling.enable": False,
    "request.credentials": "omit",
    "editor.reuseHeaders": True,
    "tracing.hideTracingResponse": True,
}


def _playground(cdn: str, endpoint: str) -> dict:
    package = "graphql-playground-react"
    return {
        "template": "playground.html",
        "css": vendor_url(package, "build/static/css/index.css", cdn),
        "favicon": vendor_url(package, "build/favicon.png", cdn),
        "logo": vendor_url(package, "build/logo.png", cdn),
        "scripts": [vendor_url(package, "build/static/js/middleware.js", cdn)],
        "config": {"endpoint": endpoint, "settings": PLAYGROUND_SETTINGS},
    }


def _graphiql(cdn: str, endpoint: str) -> dict:
    return {
        "template": "graphiql.html",
        "css": vendor_url("graphiql", "dist/style.css", cdn),
        "scripts": [
            vendor_url("react", "umd/react.production.min.js", cdn),
            vendor_url("react-dom", "umd/react-dom.production.min.js", cdn),
            vendor_url("graphiql", "dist/index.umd.js", cdn),
        ],
        "config": {"endpoint": endpoint},
    }


EXPLORERS = {"playground": _playground, "graphiql": _graphiql}


def explorer_policy(cdn: str) -> str:
    """The page's Content-Security-Policy: scripts from files only (this server or the CDN),
    styles also inline (both explorers are React apps that set styles)."""
    return content_security_policy(inline_styles=True, origin=source_of(cdn))


def explorer_page() -> str | None:
    """The explorer's HTML (None with EXPLORER=none), rendered once per app.

    Assets come from the service's own copy, or from EXPLORER_CDN when it is set.
    """
    ext = services()
    if ext.explorer is None:
        config = current_app.config
        make = EXPLORERS.get(config["EXPLORER"])
        if make is None:
            ext.explorer = ""
        else:
            page = make(config["EXPLORER_CDN"], url_for("graphql.graphql_endpoint"))
            ext.explorer = render_template(
                page.pop("template"), title="people-service", init=_init_script(), **page
            )
    return ext.explorer or None


def _init_script() -> str:
    return asset_url(f"pages/{current_app.config['EXPLORER']}.js")


def explorer_response():
    """The explorer page as a response, or None when there is none."""
    page = explorer_page()
    if page is None:
        return None
    config = current_app.config
    return html_response(page, explorer_policy(config["EXPLORER_CDN"]))
