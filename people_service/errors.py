"""The one error hierarchy and its code table; no transport details (the web layer adds those)."""

from typing import Self

INTERNAL = "INTERNAL_SERVER_ERROR"


class ServiceError(Exception):
    """An error a client caused or should know about; `errors` nests field messages."""

    status, graphql_code, default_detail = 500, INTERNAL, "Internal server error."

    def __init__(self, detail: str | None = None, *, errors: dict | None = None):
        self.detail, self.errors = detail or self.default_detail, errors
        super().__init__(self.detail)

    @classmethod
    def of_field(cls, field: str, message: str) -> Self:
        """The error of one body field, worded as schemas.load words it."""
        return cls(f"{field}: {message}", errors={field: [message]})


def _error(name: str, status: int, detail="", code="", base=ServiceError) -> type:
    code = code or ("BAD_REQUEST" if status < 500 else INTERNAL)
    detail = detail or base.default_detail
    return type(name, (base,), {"status": status, "graphql_code": code, "default_detail": detail})


# The code table: HTTP status, default detail, GraphQL extensions.code and base class
BadRequest = _error("BadRequest", 400, "The request is malformed.")
# a query-string parameter or GraphQL argument out of its range
InvalidArgument = _error("InvalidArgument", 400, code="BAD_USER_INPUT", base=BadRequest)
# a GraphQL document over a limit, refused before it runs and charged nothing
QueryTooComplex = _error(
    "QueryTooComplex",
    400,
    "The query is over a limit; it was not run.",
    "QUERY_TOO_COMPLEX",
    BadRequest,
)
Unauthorized = _error("Unauthorized", 401, "Credentials are missing or invalid.", "UNAUTHENTICATED")
Forbidden = _error("Forbidden", 403, "The credentials lack the scope for this.", "FORBIDDEN")
NotFound = _error("NotFound", 404, "Not found.", "NOT_FOUND")
MethodNotAllowed = _error("MethodNotAllowed", 405, "The method is not allowed for this resource.")
NotAcceptable = _error(
    "NotAcceptable", 406, "None of the media types the request accepts can be sent."
)
# the request contradicts stored data (a taken email or name); for GraphQL it is bad input
Conflict = _error("Conflict", 409, "The request conflicts with stored data.", "BAD_USER_INPUT")
PreconditionFailed = _error(
    "PreconditionFailed", 412, "The resource has changed since the ETag given in If-Match."
)
UnsupportedMediaType = _error("UnsupportedMediaType", 415, "The body must be application/json.")
# input that parses but breaks the rules; `errors` nests messages the way the body nests
Invalid = _error("Invalid", 422, "The request body is invalid.", "BAD_USER_INPUT")
RateLimited = _error("RateLimited", 429, "Rate limit exceeded; try again later.", "RATE_LIMITED")
# the database cannot serve this now (missing, read-only); an operator must act
Unavailable = _error("Unavailable", 503, "The database is unavailable; try again later.")
# another writer holds the database; the same request succeeds in a moment
Busy = _error("Busy", 503, "The database is busy; try again in a moment.", base=Unavailable)
StorageFull = _error(
    "StorageFull", 507, "The database is full; nothing was written. Reads still work."
)
