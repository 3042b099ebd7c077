"""Content negotiation on the Accept header, comparing media types without their parameters."""

from functools import lru_cache

from flask import request
from werkzeug.http import parse_accept_header

HTML = "text/html"
JSON = "application/json"

_CACHED_HEADER_LENGTH = 1024  # longer Accept headers are not kept in the cache


def _best_match(offered: tuple[str, ...], header: str) -> str | None:
    # parameters are dropped: werkzeug's matching compares them, but GraphQL-over-HTTP allows
    # `application/json; charset=utf-8`
    ranges = []
    for position, (value, quality) in enumerate(parse_accept_header(header)):
        kind, _, subtype = value.partition(";")[0].strip().lower().partition("/")
        # what is not a media range is ignored, as if it were absent
        if kind and subtype and "/" not in subtype and (kind != "*" or subtype == "*"):
            ranges.append(((kind, subtype), quality, -position))
    choice, choice_rank = None, (0.0, -1, 0)
    for media in offered:  # on a full tie, the server's order decides
        wanted, rank = tuple(media.partition("/")[::2]), (0.0, -1, 0)
        for media_range, quality, position in ranges:
            specificity = 0 if media_range[0] == "*" else 1 if media_range[1] == "*" else 2
            matches = media_range[:specificity] == wanted[:specificity]
            # RFC 9110 12.5.1: the most specific range that matches decides the quality
            if matches and (specificity, quality) > (rank[1], rank[0]):
                rank = (quality, specificity, position)
        if rank[0] > 0 and rank > choice_rank:
            choice, choice_rank = media, rank
    return choice


_best_match_cached = lru_cache(maxsize=256)(_best_match)


def best_match(offered: tuple[str, ...], header: str | None) -> str | None:
    """Which of `offered` suits an Accept header best (quality, then specificity, then the
    client's order, then ours); None if none does. No Accept header accepts anything."""
    if header is None or not header.strip():
        return offered[0] if offered else None
    match = _best_match if len(header) > _CACHED_HEADER_LENGTH else _best_match_cached
    return match(tuple(offered), header)


def negotiate(offered: tuple[str, ...]) -> str | None:
    """best_match for the Accept header of the current request."""
    return best_match(offered, request.headers.get("Accept"))


def wants_html() -> bool:
    """Whether the current request is a browser's, which prefers HTML over JSON."""
    return negotiate((JSON, HTML)) == HTML
