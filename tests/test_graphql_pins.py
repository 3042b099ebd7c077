"""graphql-core internals the service relies on: a change of them fails here first, loudly."""

from __future__ import annotations

import inspect
import re
import tomllib
from importlib.metadata import version

import graphql
import pytest
from graphql.execution.collect_fields import FieldDetails
from graphql.execution.executor import Executor

from .conftest import ROOT


def parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_graphql_core_is_pinned_to_the_tested_minor_series():
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "graphql-core>=3.3.2,<3.4" in dependencies
    installed = tuple(int(part) for part in re.findall(r"\d+", version("graphql-core"))[:3])
    assert (3, 3, 2) <= installed < (3, 4, 0), installed
    assert graphql.version_info[:2] == (3, 3)


def test_the_executor_methods_the_leaf_executor_overrides_keep_their_signatures():
    """people_service.graphql.executor.LeafExecutor overrides these and calls them."""
    assert parameters(Executor.complete_list_value) == [
        "self",
        "return_type",
        "field_details_list",
        "info",
        "path",
        "result",
        "position_context",
    ]
    assert parameters(Executor.execute_fields) == [
        "self",
        "parent_type",
        "source_value",
        "path",
        "grouped_field_set",
        "position_context",
    ]
    assert parameters(Executor.collect_subfields) == ["self", "return_type", "field_details_list"]
    assert "middleware_manager" in Executor.__annotations__ or hasattr(
        Executor, "middleware_manager"
    )
    assert {"node", "defer_usage"} <= set(FieldDetails._fields)


def test_collect_subfields_returns_the_field_set_and_the_defer_usages_first(app, store):
    """LeafExecutor reads `collect_subfields(...)[:2]` as (grouped field set, new defer usages)."""
    from ariadne import graphql_sync

    from people_service.graphql.executor import LeafExecutor
    from people_service.graphql.resolvers import Batches, Context, executable_schema

    seen = []

    class Probe(LeafExecutor):
        def collect_subfields(self, return_type, field_details_list):
            result = super().collect_subfields(return_type, field_details_list)
            seen.append(result)
            return result

    schema = executable_schema()
    query = "{ people(limit: 1) { id } }"
    with app.test_request_context():
        caller = type("C", (), {"scopes": frozenset({"read"})})()
        graphql_sync(
            schema,
            {"query": query},
            context_value=Context(store, caller, Batches()),
            execution_context_class=Probe,
        )
    assert seen, "collect_subfields was not called"
    grouped, defer_usages = seen[0][:2]
    assert list(grouped) == ["id"]
    assert grouped["id"][0].node.name.value == "id"
    assert not defer_usages


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


def test_executor_build_coerces_variables_and_returns_errors_as_a_list():
    """view.execute builds the executor once (coercing the variables) and runs it."""
    from graphql import parse

    from people_service.graphql.executor import LeafExecutor
    from people_service.graphql.resolvers import executable_schema

    document = parse("query ($n: Int) { __typename }")
    built = LeafExecutor.build(executable_schema(), document, raw_variable_values={"n": 2.0})
    assert built.variable_values.coerced == {"n": 2}
    assert built.execute_operation().data == {"__typename": "Query"}
    failed = LeafExecutor.build(executable_schema(), document, raw_variable_values={"n": "x"})
    assert isinstance(failed, list) and isinstance(failed[0], graphql.GraphQLError)
