"""Content negotiation on the Accept header, comparing media types without their parameters."""

from __future__ import annotations

from functools import lru_cache

from flask import request
from werkzeug.http import parse_accept_header

HTML = "text/html"
JSON = "application/json"

_CACHED_HEADER_LENGTH = 1024  # longer Accept headers are not kept in the cache


def _ranges(header: str) -> list[tuple[str, str, float, int]]:
    """(type, subtype, quality, position) of each media range, without parameters (werkzeug's
    matching compares them, but GraphQL-over-HTTP allows `application/json; charset=utf-8`)."""
    ranges = []
    for position, (value, quality) in enumerate(parse_accept_header(header)):
        kind, _, subtype = value.partition(";")[0].strip().lower().partition("/")
        if not kind or not subtype or "/" in subtype or (kind == "*" and subtype != "*"):
            continue  # not a media range: ignored, as if it were absent
        ranges.append((kind, subtype, quality, position))
    return ranges


def _rank(offered: str, ranges) -> tuple[float, int, int]:
    """(quality, specificity, -position) of the most specific range that matches `offered`."""
    kind, _, subtype = offered.partition("/")
    best = (0.0, -1, 0)
    for range_kind, range_subtype, quality, position in ranges:
        if range_kind == "*":
            specificity = 0
        elif range_kind != kind:
            continue
        elif range_subtype == "*":
            specificity = 1
        elif range_subtype == subtype:
            specificity = 2
        else:
            continue
        # RFC 9110 12.5.1: the most specific range decides the quality
        if specificity > best[1] or (specificity == best[1] and quality > best[0]):
            best = (quality, specificity, -position)
    return best


def _best_match(offered: tuple[str, ...], header: str) -> str | None:
    ranges = _ranges(header)
    choice, choice_rank = None, (0.0, -1, 0)
    for media in offered:  # on a full tie, the server's order decides
        rank = _rank(media, ranges)
        if rank[0] > 0 and rank > choice_rank:
            choice, choice_rank = media, rank
    return choice


_best_match_cached = lru_cache(maxsize=256)(_best_match)


def best_match(offered: tuple[str, ...], header: str | None) -> str | None:
    """Which of `offered` suits an Accept header best (quality, then specificity, then the
    client's order, then ours); None if none does. No Accept header accepts anything."""
    if header is None or not header.strip():
        return offered[0] if offered else None
    if len(header) > _CACHED_HEADER_LENGTH:
        return _best_match(tuple(offered), header)
    return _best_match_cached(tuple(offered), header)


def negotiate(offered: tuple[str, ...]) -> str | None:
    """best_match for the Accept header of the current request."""
    return best_match(offered, request.headers.get("Accept"))


def wants_html() -> bool:
    """Whether the current request is a browser's, which prefers HTML over JSON."""
    return negotiate((JSON, HTML)) == HTML
