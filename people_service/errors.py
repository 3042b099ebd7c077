"""The one error hierarchy: each domain error carries its HTTP status and its GraphQL code."""

from __future__ import annotations


class ServiceError(Exception):
    """An error a client caused or should know about.

    `status` is its HTTP status, `graphql_code` its GraphQL `extensions.code`; `headers` are
    HTTP headers the answer must carry (Allow, Retry-After, WWW-Authenticate).
    """

    status = 500
    graphql_code = "INTERNAL_SERVER_ERROR"
    default_detail = "Internal server error."

    def __init__(self, detail: str | None = None, *, errors: dict | None = None, headers=None):
        self.detail = detail or self.default_detail
        self.errors = errors
        self.headers = dict(headers or {})
        super().__init__(self.detail)


class BadRequest(ServiceError):
    status, graphql_code = 400, "BAD_REQUEST"
    default_detail = "The request is malformed."


class InvalidArgument(BadRequest):
    """A query-string parameter or GraphQL argument out of its range."""

    graphql_code = "BAD_USER_INPUT"


class Unauthorized(ServiceError):
    status, graphql_code = 401, "UNAUTHENTICATED"
    default_detail = "Credentials are missing or invalid."


class Forbidden(ServiceError):
    status, graphql_code = 403, "FORBIDDEN"
    default_detail = "The credentials lack the scope for this."


class NotFound(ServiceError):
    status, graphql_code = 404, "NOT_FOUND"
    default_detail = "Not found."


class MethodNotAllowed(ServiceError):
    status, graphql_code = 405, "BAD_REQUEST"
    default_detail = "The method is not allowed for this resource."


class NotAcceptable(ServiceError):
    status, graphql_code = 406, "BAD_REQUEST"
    default_detail = "None of the media types the request accepts can be sent."


class Conflict(ServiceError):
    """The request contradicts stored data (a taken email or name); for GraphQL it is bad input."""

    status, graphql_code = 409, "BAD_USER_INPUT"
    default_detail = "The request conflicts with stored data."


class QueryTooComplex(BadRequest):
    """A GraphQL document over a limit (size, depth, aliases, cost, the caller's whole window).

    It is refused before it runs and charged nothing; as a GraphQL request error it is 400
    under application/graphql-response+json and 200 under application/json.
    """

    graphql_code = "QUERY_TOO_COMPLEX"
    default_detail = "The query is over a limit; it was not run."


class PreconditionFailed(ServiceError):
    status, graphql_code = 412, "BAD_REQUEST"
    default_detail = "The resource has changed since the ETag given in If-Match."


class UnsupportedMediaType(ServiceError):
    status, graphql_code = 415, "BAD_REQUEST"
    default_detail = "The body must be application/json."


class Invalid(ServiceError):
    """Input that parses but breaks the rules; `errors` nests messages the way the body nests."""

    status, graphql_code = 422, "BAD_USER_INPUT"
    default_detail = "The request body is invalid."


class RateLimited(ServiceError):
    status, graphql_code = 429, "RATE_LIMITED"
    default_detail = "Rate limit exceeded; retry after the Retry-After seconds."


class Unavailable(ServiceError):
    status, graphql_code = 503, "INTERNAL_SERVER_ERROR"
    default_detail = "The database is unavailable; try again later."


class StorageFull(ServiceError):
    status, graphql_code = 507, "INTERNAL_SERVER_ERROR"
    default_detail = "The database is full; nothing was written. Reads still work."


# The GraphQL code of an HTTP status that no domain error raised (routing, body size, ...).
STATUS_CODES = {
    401: "UNAUTHENTICATED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    429: "RATE_LIMITED",
}


def graphql_code(status: int) -> str:
    """The GraphQL `extensions.code` for an HTTP status outside the domain errors."""
    return STATUS_CODES.get(status, "BAD_REQUEST" if status < 500 else "INTERNAL_SERVER_ERROR")
