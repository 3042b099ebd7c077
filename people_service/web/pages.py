"""What browsers get: the pages' assets and security headers, and CORS (off unless CORS_ORIGINS)."""

import hashlib
import json
import re
from functools import cache
from pathlib import Path
from urllib.parse import quote, urlsplit

from flask import Blueprint, current_app, request, send_from_directory
from flask_cors import CORS
from werkzeug.wrappers import Response

from ..config import cors_origins

STATIC = Path(__file__).resolve().parent.parent / "static"
VENDOR = STATIC / "vendor"
YEAR = 365 * 24 * 3600
bp = Blueprint("assets", __name__)


@cache
def vendored() -> dict:
    """The vendored npm packages: name -> {version, license, integrity, files}."""
    return json.loads((VENDOR / "manifest.json").read_text())


@bp.get("/static/<path:filename>")
def asset(filename: str):
    """Versioned and hashed URLs are cached for a year."""
    immutable = filename.startswith("vendor/") or "v" in request.args
    response = send_from_directory(STATIC, filename, max_age=YEAR if immutable else None)
    response.cache_control.immutable = immutable or None
    return response


@bp.get("/favicon.ico")
def favicon():
    """No icon, and no 404 in the consoles of browsers, which ask for it on every page."""
    response = Response(status=204)
    response.cache_control.max_age = YEAR
    return response


# Pages link their assets relative to themselves (every page is at the top of the app), so that
# a page kept for every browser never carries a mount prefix a client sent (gunicorn takes
# SCRIPT_NAME from a request header).
@bp.app_template_global()
@cache
def asset_url(filename: str) -> str:
    """The page-relative URL of one of our own static files, with its content hash."""
    digest = hashlib.sha256((STATIC / filename).read_bytes()).hexdigest()[:16]
    return f"static/{quote(filename, safe='/@')}?v={digest}"


def vendor_url(package: str, path: str, base: str = "") -> str:
    """A file of a vendored npm package: ours (page-relative), or under `base` (an npm CDN)."""
    spec = f"{package}@{vendored()[package]['version']}"
    return (
        f"{base.rstrip('/')}/{spec}/{path}"
        if base
        else quote(f"static/vendor/{spec}/{path}", safe="/@")
    )


def source_of(base: str) -> str:
    """The CSP source of an asset base URL: its origin ('' for this server's own paths)."""
    parts = urlsplit(base)
    return (
        ""
        if not parts.netloc
        else f"{parts.scheme}://{parts.netloc}"
        if parts.scheme
        else parts.netloc
    )


def content_security_policy(*, inline_styles: bool = False, origin: str = "") -> str:
    """This server's (and `origin`'s) scripts, styles and images, no inline script, and inline
    styles only where asked (vendored React apps set them)."""
    extra = f" {origin}" if origin else ""
    styles = "'self'" + (" 'unsafe-inline'" if inline_styles else "") + extra
    return (
        f"default-src 'none'; script-src 'self'{extra}; style-src {styles}; "
        f"img-src 'self' data:{extra}; font-src 'self' data:{extra}; connect-src 'self'; "
        "manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


PAGE_HEADERS = {
    "Content-Security-Policy": content_security_policy(),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}


def secure(response: Response) -> Response:
    """An HTML page's security headers (its own policy wins); the origins CORS varies on."""
    if current_app.config.get("CORS_ON") == "origins":
        response.vary.add("Origin")  # flask-cors says so only when it knows several
    if response.headers.get("Content-Type", "").startswith("text/html"):
        for name, value in PAGE_HEADERS.items():
            response.headers.setdefault(name, value)
    return response


def html_response(body: str, policy: str | None = None) -> Response:
    """An HTML page, which varies with Accept (the same URL answers JSON to programs)."""
    response = Response(body, content_type="text/html; charset=utf-8", headers={"Vary": "Accept"})
    if policy:
        response.headers["Content-Security-Policy"] = policy
    return response


def is_preflight() -> bool:
    """A CORS preflight of a known route (answered before authentication and the limit)."""
    return (
        request.method == "OPTIONS"
        and current_app.config.get("CORS_ON") is not None
        and request.url_rule is not None
        and all(name in request.headers for name in ("Origin", "Access-Control-Request-Method"))
    )


def init_cors(app) -> None:
    """Turn CORS on for the origins of CORS_ORIGINS."""
    origins = cors_origins(app.config["CORS_ORIGINS"])
    if not origins:
        return
    anyone = origins == ["*"]
    app.config["CORS_ON"] = "anyone" if anyone else "origins"
    CORS(
        app,
        # a string would be taken for a regex ("[" of IPv6): each origin matches only itself
        origins="*" if anyone else [re.compile(re.escape(o) + r"\Z", re.I) for o in origins],
        # with *, every answer says `Access-Control-Allow-Origin: *`, the same for everyone
        send_wildcard=anyone,
        always_send=anyone,
        # what a browser app may send, and what its scripts may read beyond the safelisted
        allow_headers="Authorization Content-Type Idempotency-Key If-Match If-None-Match "
        "Last-Event-ID X-API-Key X-HTTP-Method-Override X-Request-ID".split(),
        expose_headers="ETag Idempotent-Replayed Link Location Retry-After WWW-Authenticate "
        "X-RateLimit-Limit X-RateLimit-Remaining X-RateLimit-Reset X-Request-ID "
        "X-Total-Count".split(),
        max_age=600,  # seconds a browser may reuse a preflight's answer (methods: all)
        supports_credentials=False,  # credentials travel in headers, never in cookies
    )
