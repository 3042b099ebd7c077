"""Schemathesis hooks: send Idempotency-Key the way real clients do, fresh for each new request.

Schemathesis draws header values from a small pool, so unrelated requests would share a key and
get the documented 422 for reusing it with another body. A valid key is swapped for another
valid one, which keeps negative cases negative.
"""

import re
import uuid

import schemathesis

VALID_KEY = re.compile(r"^[\x20-\x7e]{1,255}$")


@schemathesis.hook
def before_call(context, case, kwargs):
    headers = case.headers or {}
    key = headers.get("Idempotency-Key")
    if isinstance(key, str) and VALID_KEY.match(key):
        headers["Idempotency-Key"] = uuid.uuid4().hex


@schemathesis.hook
def filter_path_parameters(context, path_parameters):
    # a person cannot befriend themselves (422), a rule between two parameters OpenAPI cannot state
    if not path_parameters or "friend_id" not in path_parameters:
        return True
    return path_parameters.get("person_id") != path_parameters.get("friend_id")
