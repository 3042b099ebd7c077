"""Automatic persisted queries (Apollo's protocol): documents sent once, then by their hash."""

from __future__ import annotations

import hashlib
import re

from ..errors import BadRequest

# How many documents the store keeps, and the largest it keeps.
KEEP = 1000
MAX_BYTES = 32 * 1024
SHA256 = re.compile(r"[0-9a-f]{64}")
NOT_FOUND = {
    "errors": [
        {"message": "PersistedQueryNotFound", "extensions": {"code": "PERSISTED_QUERY_NOT_FOUND"}}
    ]
}


def digest_of(data: dict) -> str | None:
    """The SHA-256 (hex) of an automatic persisted query's request, None for other requests;
    raises BadRequest for another version, a malformed hash, or one not of the query."""
    persisted = (data.get("extensions") or {}).get("persistedQuery")
    if persisted is None:
        return None
    if not isinstance(persisted, dict) or persisted.get("version") != 1:
        raise BadRequest("Persisted queries: only version 1 is supported.")
    digest = persisted.get("sha256Hash")
    if not isinstance(digest, str) or not SHA256.fullmatch(digest):
        raise BadRequest("'sha256Hash' must be a SHA-256 in 64 lowercase hex digits.")
    query = data.get("query")
    if (
        query is not None
        and hashlib.sha256(query.encode("utf-8", "surrogatepass")).hexdigest() != digest
    ):
        raise BadRequest("'sha256Hash' is not the SHA-256 of the query.")
    return digest
