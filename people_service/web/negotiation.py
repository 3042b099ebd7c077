"""Content negotiation on the Accept header, comparing media types without their parameters."""

from functools import lru_cache

from flask import request
from werkzeug.http import parse_accept_header

HTML = "text/html"
JSON = "application/json"


def _best_match(offered: tuple[str, ...], header: str) -> str | None:
    # parameters are dropped: werkzeug's matching compares them, but GraphQL-over-HTTP allows
    # `application/json; charset=utf-8`; what is not a media range is ignored
    ranges = []
    for position, (value, quality) in enumerate(parse_accept_header(header)):
        kind, _, subtype = value.partition(";")[0].strip().lower().partition("/")
        if kind and subtype and "/" not in subtype and (kind != "*" or subtype == "*"):
            specificity = 0 if kind == "*" else 1 if subtype == "*" else 2
            ranges.append(((kind, subtype)[:specificity], specificity, quality, -position))
    choice, choice_rank = None, (0.0,)
    for media in offered:  # on a full tie, the server's order decides
        wanted = tuple(media.split("/"))
        # RFC 9110 12.5.1: the most specific range that matches decides the quality
        found = max(((s, q, p) for r, s, q, p in ranges if r == wanted[:s]), default=None)
        if found and found[1] > 0 and (found[1], found[0], found[2]) > choice_rank:
            choice, choice_rank = media, (found[1], found[0], found[2])
    return choice


_best_match_cached = lru_cache(maxsize=256)(_best_match)


def best_match(offered: tuple[str, ...], header: str | None) -> str | None:
    """Which of `offered` suits an Accept header best (quality, then specificity, then the
    client's order, then ours); None if none does. No Accept header accepts anything."""
    if header is None or not header.strip():
        return offered[0] if offered else None
    return (_best_match if len(header) > 1024 else _best_match_cached)(tuple(offered), header)


def negotiate(offered: tuple[str, ...]) -> str | None:
    """best_match for the Accept header of the current request."""
    return best_match(offered, request.headers.get("Accept"))


def wants_html() -> bool:
    """Whether the current request is a browser's, which prefers HTML over JSON."""
    return negotiate((JSON, HTML)) == HTML
