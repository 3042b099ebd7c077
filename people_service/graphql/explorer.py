"""The GraphQL explorer page a browser gets from GET /graphql: GraphQL Playground or GraphiQL."""

from flask import current_app, render_template, request

from ..web import services
from ..web.pages import asset_url, content_security_policy, html_response, source_of, vendor_url

# Playground's own defaults poll the schema every 2 s, each poll an introspection query charged
# to the key's rate limit; the schema reloads with the page or the refresh button instead.
PLAYGROUND_SETTINGS = {
    "schema.polling.enable": False,
    "request.credentials": "omit",
    "editor.reuseHeaders": True,
    "tracing.hideTracingResponse": True,
}


def _playground(url) -> dict:
    package = "graphql-playground-react"
    return {
        "css": url(package, "build/static/css/index.css"),
        "favicon": url(package, "build/favicon.png"),
        "logo": url(package, "build/logo.png"),
        "scripts": [url(package, "build/static/js/middleware.js")],
        "config": {"settings": PLAYGROUND_SETTINGS},
    }


def _graphiql(url) -> dict:
    return {
        "css": url("graphiql", "dist/style.css"),
        "scripts": [
            url("react", "umd/react.production.min.js"),
            url("react-dom", "umd/react-dom.production.min.js"),
            url("graphiql", "dist/index.umd.js"),
        ],
        "config": {},
    }


EXPLORERS = {"playground": _playground, "graphiql": _graphiql}


def _relative(url: str) -> str:
    """A URL relative to the page: the page, cached for all, holds no request's mount prefix."""
    if "//" in url:  # a CDN's
        return url
    return url.removeprefix(request.script_root).lstrip("/")


def explorer_response():
    """The explorer page (rendered once per app), or None with EXPLORER=none."""
    explorer, cdn = current_app.config["EXPLORER"], current_app.config["EXPLORER_CDN"]
    if explorer not in EXPLORERS:
        return None
    ext = services()
    if ext.explorer is None:  # the page holds no prefix and depends only on the config
        page = EXPLORERS[explorer](lambda package, path: _relative(vendor_url(package, path, cdn)))
        ext.explorer = render_template(
            f"{explorer}.html",
            **page,
            title="people-service",
            explorer_css=_relative(asset_url("pages/explorer.css")),
            init=_relative(asset_url(f"pages/{explorer}.js")),
        )
    # scripts from files only (this server or the CDN), styles also inline (React sets them)
    policy = content_security_policy(inline_styles=True, origin=source_of(cdn))
    return html_response(ext.explorer, policy)
