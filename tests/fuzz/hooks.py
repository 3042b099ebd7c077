"""Schemathesis hooks: send what a real client sends where a rule spans two values.

- Idempotency-Key: schemathesis draws header values from a small pool, so unrelated requests
  would share a key and get the documented 422 for reusing it with another body. A valid key is
  swapped for a fresh valid one, which keeps negative cases negative.
- A PUT or PATCH body may repeat the path's id, and only that id (422 otherwise): a drawn id
  in the body is replaced by the path's, which is what a client that sends one sends.
- If-Match: a drawn value never names the person's current version (412, documented). It is
  replaced by `*` ("if it exists"), so that conditional writes are served and their bodies
  tested; tests/test_rest_people.py covers If-Match itself.
- GET /people's `min_age` may not exceed its `max_age` (400, a rule between two parameters):
  drawn values in the wrong order are swapped, which keeps a negative case negative.
"""

import re
import uuid

import schemathesis

VALID_KEY = re.compile(r"^[\x20-\x7e]{1,255}$")
ID = re.compile(r"^[1-9][0-9]{0,17}$")


@schemathesis.hook
def before_call(context, case, kwargs):
    headers = case.headers or {}
    key = headers.get("Idempotency-Key")
    if isinstance(key, str) and VALID_KEY.match(key):
        headers["Idempotency-Key"] = uuid.uuid4().hex
    if "If-Match" in headers:
        headers["If-Match"] = "*"
    path_id = (case.path_parameters or {}).get("person_id")
    body = case.body
    if (
        case.operation.path == "/person/{person_id}"
        and isinstance(body, dict)
        and isinstance(body.get("id"), str)
        and ID.match(body["id"])
        and isinstance(path_id, str)
        and ID.match(path_id)
    ):
        body["id"] = path_id
    query = case.query or {}
    low, high = _whole(query.get("min_age")), _whole(query.get("max_age"))
    if low is not None and high is not None and low > high:
        query["min_age"], query["max_age"] = query["max_age"], query["min_age"]


def _whole(value):
    """A drawn query value as the integer the server reads, None if it is not one."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    return None
