"""graphql-core behaviour the service relies on: a change of it fails here first, loudly."""

from __future__ import annotations

import graphql
import pytest


def test_parse_limits_raise_syntax_errors_and_comments_stay_in_the_token_chain():
    """parsing.parse_document measures a text the parser refused (same error type for a limit
    and a typo) with graphql-core's Lexer, counting comments through Token.next."""
    with pytest.raises(graphql.GraphQLSyntaxError):
        graphql.parse("{ a b c d }", max_lexical_tokens=3)
    lexer = graphql.language.Lexer(graphql.Source("# one\n# two\n{ a }"))
    start = lexer.token
    first = lexer.advance()
    assert first.kind is graphql.language.TokenKind.BRACE_L
    assert [start.next.kind, start.next.next.kind] == [graphql.language.TokenKind.COMMENT] * 2
    assert start.next.next.next is first
