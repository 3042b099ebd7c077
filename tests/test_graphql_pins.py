"""graphql-core behaviour the service relies on: a change of it fails here first, loudly."""

from __future__ import annotations

import graphql
import pytest


@pytest.mark.parametrize(
    ("text", "limits", "message"),
    [
        ("{ a b c d }", {"max_lexical_tokens": 3}, "Document contains more than 3 tokens."),
        ("#\n#\n{ a }", {"max_comments": 1}, "Document contains more than 1 comments."),
        ("{ a " * 1000 + "}" * 1000, {}, "Document is nested too deeply."),
    ],
)
def test_the_parsers_limits_are_syntax_errors_that_end_in_parsing_aborted(text, limits, message):
    """meter.parse_document tells a limit from a typo by graphql-core's message."""
    with pytest.raises(graphql.GraphQLSyntaxError) as raised:
        graphql.parse(text, **limits)
    assert raised.value.message == f"Syntax Error: {message} Parsing aborted."
