"""Parsing a GraphQL document within its size, token and nesting limits, once per text."""

from functools import lru_cache, wraps

from graphql import GraphQLError, GraphQLSyntaxError, Source, parse
from graphql.language import Lexer, TokenKind

from ..errors import QueryTooComplex

MAX_QUERY_BYTES = 100 * 1024
MAX_TOKENS = 2000
# Brackets, selection sets and fragment spreads nested in one another: the walks recurse once
# per level, and fragments can nest without the parser's limit.
MAX_NESTING = 100
NESTED_TOO_DEEPLY = "The query is nested too deeply."
# Errors reported by validation: graphql-core's messages can print whole inputs.
VALIDATION_ERRORS = 10
# Values (at any depth) in one request's variables, counted before they are coerced.
MAX_VARIABLE_VALUES = 1000
# Texts up to this size are kept parsed and validated: 512 texts of 100 KiB each
# would let one key grow a process by 100 MiB.
CACHED_TEXT_BYTES = 8 * 1024


def by_text(function):
    """`function(text, ...)`, its results kept for short texts (a bounded LRU cache)."""
    cached = lru_cache(maxsize=512)(function)

    @wraps(function)
    def call(text: str, *args):
        return (cached if len(text) <= CACHED_TEXT_BYTES else function)(text, *args)

    call.cache_info = cached.cache_info
    return call


@by_text
def parse_document(text: str):
    """A parsed document; raises QueryTooComplex over a limit, GraphQLSyntaxError otherwise."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_QUERY_BYTES:
        raise QueryTooComplex(f"The query is longer than {MAX_QUERY_BYTES // 1024} KiB.")
    try:
        return parse(text, max_lexical_tokens=MAX_TOKENS, max_comments=MAX_TOKENS)
    except GraphQLSyntaxError as error:
        # the parser stops at its limits with the same error type as for a typo: measure
        over = _over_limits(text)
        if over:
            raise QueryTooComplex(over) from None
        raise GraphQLError(
            error.message,
            source=error.source,
            positions=error.positions,
            extensions={"code": "GRAPHQL_PARSE_FAILED"},
        ) from None


_OPENING = {TokenKind.BRACE_L, TokenKind.BRACKET_L, TokenKind.PAREN_L}
_CLOSING = {TokenKind.BRACE_R, TokenKind.BRACKET_R, TokenKind.PAREN_R}


def _over_limits(text: str) -> str | None:
    """Which limit a text that did not parse is over, if any (it stops counting past it)."""
    lexer = Lexer(Source(text))
    tokens = comments = depth = 0
    previous = lexer.token
    try:
        while (token := lexer.advance()).kind is not TokenKind.EOF:
            skipped = previous.next
            while skipped is not token:  # the comments the lexer stepped over
                comments, skipped = comments + 1, skipped.next
            previous, tokens = token, tokens + 1
            depth += (token.kind in _OPENING) - (token.kind in _CLOSING)
            if tokens > MAX_TOKENS or comments > MAX_TOKENS:
                what = "tokens" if tokens > MAX_TOKENS else "comments"
                return f"The query has more than {MAX_TOKENS} {what}."
            if depth > MAX_NESTING:
                return NESTED_TOO_DEEPLY
    except GraphQLSyntaxError:
        return None  # a character that starts no token: a syntax error
    return None


def check_variables(variables) -> None:
    """Raises QueryTooComplex when `variables` (JSON) hold more than MAX_VARIABLE_VALUES values."""
    count, pending = 0, [variables] if variables else []
    while pending:
        value = pending.pop()
        if isinstance(value, (dict, list)):
            count += len(value)
            if count > MAX_VARIABLE_VALUES:
                raise QueryTooComplex(
                    f"The variables hold more than {MAX_VARIABLE_VALUES} values; send fewer."
                )
            pending.extend(value.values() if isinstance(value, dict) else value)
