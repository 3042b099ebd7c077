"""JSON in and out: strict parsing of request bodies and compact UTF-8 answers."""

import json
import sys
from decimal import Decimal

from flask import request
from werkzeug.wrappers import Response

from ..errors import BadRequest, UnsupportedMediaType

MAX_DEPTH = 100  # arrays and objects inside one another: what reads a body afterwards recurses
NESTED_TOO_DEEPLY = "The JSON is nested too deeply."
PATCH_TYPES = ("application/json", "application/merge-patch+json")


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


def _number(text: str) -> float | Decimal:
    """A float, or an exact Decimal where the float would round a fraction to a whole number
    (1e-400 to 0), so that no integer field takes it."""
    value = float(text)
    return Decimal(text) if value.is_integer() and Decimal(text) != value else value


def json_body(types=("application/json",)):
    """The request's JSON body: 415 for another media type, 400 when it does not parse."""
    if request.mimetype not in types:
        sent = (
            f"not '{request.mimetype}'"
            if request.mimetype
            else "and the request has no Content-Type"
        )
        raise UnsupportedMediaType(f"The body must be {' or '.join(types)}, {sent}.")
    if request.mimetype_params.get("charset", "utf-8").lower() not in ("utf-8", "utf8"):
        raise UnsupportedMediaType("JSON bodies must be UTF-8.")
    raw = request.get_data(cache=True)
    if not raw.strip():
        raise BadRequest("The request body is empty; send a JSON object.")
    return parse_json(raw)


def parse_json(raw: bytes | str):
    """Parse JSON strictly (no NaN or Infinity, integers exact); raises BadRequest."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_number)
    except UnicodeDecodeError:
        raise BadRequest("The body is not valid UTF-8.") from None
    except RecursionError:
        raise BadRequest(NESTED_TOO_DEEPLY) from None
    except ValueError as exc:
        if "int_max_str_digits" in str(exc):  # Python's advice to its programmer, not ours
            limit = sys.get_int_max_str_digits()
            raise BadRequest(
                f"The body is not valid JSON: a number has more than {limit} digits."
            ) from None
        raise BadRequest(f"The body is not valid JSON: {exc}.") from None
    # a value cannot nest deeper than it has brackets: the usual body is not walked at all
    if text.count("[") + text.count("{") > MAX_DEPTH:
        pending = [(value, 1)] if isinstance(value, (dict, list)) else []
        while pending:  # no recursion
            item, depth = pending.pop()
            if depth > MAX_DEPTH:
                raise BadRequest(NESTED_TOO_DEEPLY)
            for child in item.values() if isinstance(item, dict) else item:
                if isinstance(child, (dict, list)):
                    pending.append((child, depth + 1))
    return value


def dump_json(data) -> bytes:
    """Compact UTF-8 JSON with a final newline; lone surrogates (echoed in errors) \\u-escaped."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(data, separators=(",", ":")) + "\n").encode("ascii")


def json_response(data, status: int = 200, headers=None) -> Response:
    return Response(dump_json(data), status, headers, content_type="application/json")
