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


def _error(name: str, code: str, detail: str, base: type = ServiceError) -> type:
    return type(name, (base,), {"graphql_code": code, "default_detail": detail})


# Name, GraphQL code, default detail and base; web/problems.py maps each to its HTTP status
BadRequest = _error("BadRequest", "BAD_REQUEST", "The request is malformed.")
# a query-string parameter or GraphQL argument out of its range
InvalidArgument = _error("InvalidArgument", "BAD_USER_INPUT", BadRequest.default_detail, BadRequest)
# a GraphQL document over a limit, refused before it runs and charged nothing
QueryTooComplex = _error(
    "QueryTooComplex", "QUERY_TOO_COMPLEX", "The query is over a limit; it was not run.", BadRequest
)
Unauthorized = _error("Unauthorized", "UNAUTHENTICATED", "Credentials are missing or invalid.")
Forbidden = _error("Forbidden", "FORBIDDEN", "The credentials lack the scope for this.")
NotFound = _error("NotFound", "NOT_FOUND", "Not found.")
MethodNotAllowed = _error(
    "MethodNotAllowed", "BAD_REQUEST", "The method is not allowed for this resource."
)
NotAcceptable = _error(
    "NotAcceptable", "BAD_REQUEST", "None of the media types the request accepts can be sent."
)
# the request contradicts stored data (a taken email or name); for GraphQL it is bad input
Conflict = _error("Conflict", "BAD_USER_INPUT", "The request conflicts with stored data.")
PreconditionFailed = _error(
    "PreconditionFailed",
    "BAD_REQUEST",
    "The resource has changed since the ETag given in If-Match.",
)
UnsupportedMediaType = _error(
    "UnsupportedMediaType", "BAD_REQUEST", "The body must be application/json."
)
# input that parses but breaks the rules; `errors` nests messages the way the body nests
Invalid = _error("Invalid", "BAD_USER_INPUT", "The request body is invalid.")
RateLimited = _error("RateLimited", "RATE_LIMITED", "Rate limit exceeded; try again later.")
# the database cannot serve this now (missing, read-only); an operator must act
Unavailable = _error(
    "Unavailable", ServiceError.graphql_code, "The database is unavailable; try again later."
)
# another writer holds the database; the same request succeeds in a moment
Busy = _error(
    "Busy", ServiceError.graphql_code, "The database is busy; try again in a moment.", Unavailable
)
StorageFull = _error(
    "StorageFull",
    ServiceError.graphql_code,
    "The database is full; nothing was written. Reads still work.",
)
