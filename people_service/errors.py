"""The one error hierarchy, in the domain's words; web/problems.py maps it to HTTP."""

from typing import Self


class ServiceError(Exception):
    """An error a client caused or should know about; `errors` nests field messages."""

    graphql_code = "INTERNAL_SERVER_ERROR"  # its extensions.code in a GraphQL answer
    default_detail = "Internal server error."

    def __init__(self, detail: str | None = None, *, errors: dict | None = None):
        self.detail = detail or self.default_detail
        self.errors = errors
        super().__init__(self.detail)

    @classmethod
    def of_field(cls, field: str, message: str) -> Self:
        """The error of one body field, worded as schemas.load words it."""
        return cls(f"{field}: {message}", errors={field: [message]})


class BadRequest(ServiceError):
    graphql_code = "BAD_REQUEST"
    default_detail = "The request is malformed."


class InvalidArgument(BadRequest):
    """A query-string parameter or GraphQL argument out of its range."""

    graphql_code = "BAD_USER_INPUT"


class QueryTooComplex(BadRequest):
    """A GraphQL document over a limit, refused before it runs and charged nothing."""

    graphql_code = "QUERY_TOO_COMPLEX"
    default_detail = "The query is over a limit; it was not run."


class Unauthorized(ServiceError):
    graphql_code = "UNAUTHENTICATED"
    default_detail = "Credentials are missing or invalid."


class Forbidden(ServiceError):
    graphql_code = "FORBIDDEN"
    default_detail = "The credentials lack the scope for this."


class NotFound(ServiceError):
    graphql_code = "NOT_FOUND"
    default_detail = "Not found."


class MethodNotAllowed(ServiceError):
    graphql_code = "BAD_REQUEST"
    default_detail = "The method is not allowed for this resource."


class NotAcceptable(ServiceError):
    graphql_code = "BAD_REQUEST"
    default_detail = "None of the media types the request accepts can be sent."


class Conflict(ServiceError):
    """The request contradicts stored data (a taken email or name); for GraphQL it is bad input."""

    graphql_code = "BAD_USER_INPUT"
    default_detail = "The request conflicts with stored data."


class PreconditionFailed(ServiceError):
    graphql_code = "BAD_REQUEST"
    default_detail = "The resource has changed since the ETag given in If-Match."


class UnsupportedMediaType(ServiceError):
    graphql_code = "BAD_REQUEST"
    default_detail = "The body must be application/json."


class Invalid(ServiceError):
    """Input that parses but breaks the rules; `errors` nests messages the way the body nests."""

    graphql_code = "BAD_USER_INPUT"
    default_detail = "The request body is invalid."


class RateLimited(ServiceError):
    graphql_code = "RATE_LIMITED"
    default_detail = "Rate limit exceeded; try again later."


class Unavailable(ServiceError):
    """The database cannot serve this now (missing, read-only); an operator must act."""

    default_detail = "The database is unavailable; try again later."


class Busy(Unavailable):
    """Another writer holds the database; the same request succeeds in a moment."""

    default_detail = "The database is busy; try again in a moment."


class StorageFull(ServiceError):
    default_detail = "The database is full; nothing was written. Reads still work."
