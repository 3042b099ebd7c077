"""GraphQL errors as clients see them: every one with extensions.code, no internals."""

from __future__ import annotations

import logging

from ariadne import unwrap_graphql_error
from graphql import GraphQLError

from ..errors import ServiceError
from ..schemas import sentence
from ..web.problems import bounded_errors

log = logging.getLogger("people_service.graphql")


def graphql_names(errors):
    """The service's field messages keyed by their GraphQL names (min_age: minAge)."""
    if isinstance(errors, dict):
        return {_camel(key): graphql_names(value) for key, value in errors.items()}
    if isinstance(errors, list):
        return [graphql_names(item) for item in errors]
    return errors


def _camel(key):
    if not isinstance(key, str) or key.startswith("_"):  # _schema: the object as a whole
        return key
    first, *rest = key.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


def format_error(error: GraphQLError) -> dict:
    """Every error gets extensions.code; a resolver's own exception text never leaves."""
    formatted = error.formatted
    original = unwrap_graphql_error(error)
    if isinstance(original, ServiceError):
        formatted["message"] = original.detail
        extensions = {"code": original.graphql_code}
        if original.errors:
            named = graphql_names(original.errors)
            if original.detail == sentence(original.errors):
                formatted["message"] = sentence(named)
            extensions["errors"], omitted = bounded_errors(named)
            if omitted:
                extensions["errors_omitted"] = omitted
    elif original is not None:
        log.error("resolver failed at %s", error.path, exc_info=original)
        formatted["message"] = "Internal server error"
        extensions = {"code": "INTERNAL_SERVER_ERROR"}
    else:
        extensions = dict(error.extensions or {})
        if not extensions.get("code"):
            extensions["code"] = "BAD_REQUEST" if error.path is None else "INTERNAL_SERVER_ERROR"
    formatted["extensions"] = extensions
    return formatted
