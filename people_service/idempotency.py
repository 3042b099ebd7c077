"""Idempotency-Key: a retried POST replays its first answer instead of acting twice."""

import hashlib
import json
import time

from .errors import BadRequest, Invalid

TTL = 24 * 3600


def _canonical(value):
    """JSON values as a client means them: 3 and 3.0 are the same number."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _canonical(item) for key, item in value.items()}
    return [_canonical(item) for item in value] if isinstance(value, list) else value


def fingerprint(*parts) -> str:
    """A digest of what makes two requests the same request."""
    # default=str: a Decimal (a number no float holds exactly) is never valid input anyway
    text = json.dumps(_canonical(list(parts)), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def idempotent(store, caller: str, key: str | None, request_print: str, action):
    """Run `action() -> (status, body)` per caller and key once a day: (status, body, replayed)."""
    if key is None:
        return (*action(), False)
    if not 1 <= len(key) <= 255 or not key.isprintable() or not key.isascii():
        raise BadRequest("Idempotency-Key must be 1 to 255 printable ASCII characters.")
    # claimed first, answer recorded with the action's writes: a concurrent retry waits, replays
    with store.transaction():
        saved = store.claim_idempotent(caller, key, request_print, time.time(), TTL)
        if saved is not None:
            if saved["fingerprint"] != request_print:
                raise Invalid(
                    "This Idempotency-Key was already used with a different request.",
                    errors={"Idempotency-Key": ["Already used with a different request."]},
                )
            return saved["status"], json.loads(saved["body"]), True
        status, body = action()
        store.put_idempotent(caller, key, status, json.dumps(body))
    return status, body, False
