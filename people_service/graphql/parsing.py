"""Parsing a GraphQL document within its size, token and nesting limits, once per text."""

from __future__ import annotations

from functools import lru_cache

from graphql import (
    GraphQLError,
    parse,
)
from graphql.validation.rules import overlapping_fields_can_be_merged

from ..errors import QueryTooComplex

# graphql-core's own knob (documented, read when a validation starts): the work its
# OverlappingFieldsCanBeMergedRule may spend on one document before aborting it. The default,
# 500,000, let a 2,000-token document of repeated fields (`{ me { name } me { name } ... }`)
# take 1.6-2.4 s of CPU; at 50,000 it takes about 0.2 s. Real documents spend nothing or a
# few thousand (measured: the introspection query 0, thirty overlapping fragments 7,455).
VALIDATION_BUDGET = 50_000
overlapping_fields_can_be_merged.MAX_COMPLEXITY_BUDGET = VALIDATION_BUDGET
# The message of graphql-core's ValidationAbortedError when that budget runs out.
VALIDATION_ABORTED = "Validation aborted."

MAX_QUERY_BYTES = 100 * 1024
MAX_TOKENS = 2000
# Selection sets and fragment spreads nested in one another. The walks below recurse once per
# level, so a document nested deeper is refused before it could exhaust the stack (graphql-core's
# parser stops at 200 selection sets, but fragments can nest without limit).
MAX_NESTING = 100
# Errors reported for one request by the specification's validation and by variable coercion
# (graphql-core's defaults: 100 and 50). Each of graphql-core's messages about a field of an
# input object prints or inspects the whole object, so their number multiplies the work: 100
# errors over an object literal of 640 fields took 0.65 s and answered 640 KB to 5 KB; ten
# take 0.06 s. A client fixes the first few anyway.
VALIDATION_ERRORS = 10
COERCION_ERRORS = 10
# Values (objects, lists and scalars, at any depth) in one request's variables: counted before
# they are coerced, so that coercing them stays cheap. The schema's largest input is a handful.
MAX_VARIABLE_VALUES = 1000
# Counts saturate here: a refusal needs no exact figure beyond it, and numbers stay small.
CEILING = 10**9
NESTED_TOO_DEEPLY = "The query is nested too deeply."
# What one list field without a `limit` argument counts (the schema has none so far).
UNBOUNDED_LIST = 100
# The introspection type of each kind of schema element the introspection walk visits.
INTROSPECTION_TYPES = {
    "schema": "__Schema",
    "type": "__Type",
    "field": "__Field",
    "input": "__InputValue",
    "enum": "__EnumValue",
    "directive": "__Directive",
}


class TooComplex(GraphQLError):
    """A document over a limit; it is refused before it runs."""

    def __init__(self, message: str, nodes=None):
        super().__init__(message, nodes, extensions={"code": QueryTooComplex.graphql_code})


class ParseFailed(GraphQLError):
    """A document that is not GraphQL."""

    def __init__(self, error: GraphQLError):
        super().__init__(
            error.message,
            source=error.source,
            positions=error.positions,
            extensions={"code": "GRAPHQL_PARSE_FAILED"},
        )


@lru_cache(maxsize=512)
def parse_document(text: str):
    """A parsed document; the same text is parsed once (bounded LRU cache).

    Raises TooComplex over the size, token or nesting limit, ParseFailed for other syntax errors.
    """
    if len(text.encode("utf-8", "surrogatepass")) > MAX_QUERY_BYTES:
        raise TooComplex(f"The query is longer than {MAX_QUERY_BYTES // 1024} KiB.")
    try:
        return parse(text, max_lexical_tokens=MAX_TOKENS, max_comments=MAX_TOKENS)
    except GraphQLError as error:
        # the parser's own limits, told apart by their messages (tests/test_graphql_pins.py)
        if "Document contains more than" in error.message:
            what = "comments" if "comments" in error.message else "tokens"
            raise TooComplex(f"The query has more than {MAX_TOKENS} {what}.") from None
        if "nested too deeply" in error.message:
            raise TooComplex(NESTED_TOO_DEEPLY) from None
        raise ParseFailed(error) from None


class TooDeep(Exception):
    """A walk reached MAX_NESTING."""


def saturated(value: int) -> int:
    """`value`, or CEILING if it is larger."""
    return value if value < CEILING else CEILING


def figure(value: int) -> str:
    """A count for a message: the number, or 'more than ...' past CEILING."""
    return str(value) if value < CEILING else f"more than {CEILING - 1}"


def check_variables(variables) -> None:
    """Raises TooComplex when `variables` (JSON) hold more than MAX_VARIABLE_VALUES values."""
    count, pending = 0, [variables] if variables else []
    while pending:
        value = pending.pop()
        if isinstance(value, (dict, list)):
            count += len(value)
            if count > MAX_VARIABLE_VALUES:
                raise TooComplex(
                    f"The variables hold more than {MAX_VARIABLE_VALUES} values; send fewer."
                )
            pending.extend(value.values() if isinstance(value, dict) else value)
