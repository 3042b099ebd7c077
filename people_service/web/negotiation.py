"""Content negotiation on the Accept header, comparing media types without their parameters."""

from functools import lru_cache

from flask import request
from werkzeug.datastructures import MIMEAccept
from werkzeug.http import parse_accept_header

HTML = "text/html"
JSON = "application/json"


def _best_match(offered: tuple[str, ...], header: str) -> str | None:
    # werkzeug compares parameters too, but GraphQL-over-HTTP allows `application/json; charset=…`
    ranges = [(value.partition(";")[0].strip(), q) for value, q in parse_accept_header(header)]
    return MIMEAccept(ranges).best_match(offered)


_best_match_cached = lru_cache(maxsize=256)(_best_match)


def best_match(offered: tuple[str, ...], header: str | None) -> str | None:
    """Which of `offered` suits an Accept header best (werkzeug's order: quality, specificity,
    then ours); None if none does. No Accept header accepts anything."""
    if header is None or not header.strip():
        return offered[0] if offered else None
    match = _best_match if len(header) > 1024 else _best_match_cached  # long ones: not kept
    return match(tuple(offered), header)


def negotiate(offered: tuple[str, ...]) -> str | None:
    """best_match for the Accept header of the current request."""
    return best_match(offered, request.headers.get("Accept"))


def wants_html() -> bool:
    """Whether the current request is a browser's, which prefers HTML over JSON."""
    return negotiate((JSON, HTML)) == HTML
