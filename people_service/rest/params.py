"""Query strings of REST views: only the parameters a view documents, each given once."""

import functools

from flask import Blueprint, current_app, request
from werkzeug.routing import BaseConverter

from ..errors import BadRequest
from ..schemas import ID_PATTERN
from ..web.caller import authenticate, check_scope


class IdConverter(BaseConverter):
    """Path ids are ASCII digits without sign or leading zero, and fit SQLite's integers."""

    regex = ID_PATTERN.strip("^$")


SHOWN = 10  # names listed in one answer: a hostile query string cannot make it large


@functools.cache
def accepted(view) -> frozenset[str]:
    """The query parameters of a view: the fields of the query schema its @doc names."""
    schema = getattr(view, "apidoc", {}).get("query")
    return frozenset(schema().load_fields) if schema else frozenset()


def check_query(args, allowed: frozenset[str], what: str) -> None:
    """Raise BadRequest (400) for parameters outside `allowed`, and for one given twice."""
    unknown = [name for name in args if name not in allowed]
    if unknown:
        takes = ", ".join(sorted(allowed)) if allowed else "no query parameters"
        plural = "s" if len(unknown) > 1 else ""
        listed = ", ".join(repr(name[:40]) for name in unknown[:SHOWN])
        raise BadRequest(
            f"Unknown query parameter{plural} {listed}; {what} takes {takes}.",
            errors={name[:40]: ["Unknown parameter."] for name in unknown[:SHOWN]},
        )
    repeated = [name for name, values in args.lists() if len(values) > 1]
    if repeated:
        listed = ", ".join(repr(name[:40]) for name in repeated)
        raise BadRequest(
            f"Query parameter {listed} given more than once; give each parameter once.",
            errors={name: ["Given more than once."] for name in repeated},
        )


def _check_request() -> None:
    if not request.query_string:
        return  # the common case costs nothing
    view = current_app.view_functions.get(request.endpoint)
    if getattr(view, "requires_auth", False) and request.method != "OPTIONS":
        # credentials and scope first, in the order `required` checks them: a caller
        # without them learns nothing about the parameters (401/403 before 400)
        check_scope(authenticate(), "read" if request.method in ("GET", "HEAD") else "write")
    check_query(request.args, accepted(view), request.path)


def strict_query(bp: Blueprint) -> None:
    """Refuse unknown and repeated query parameters on every route of `bp`."""
    bp.before_request(_check_request)
