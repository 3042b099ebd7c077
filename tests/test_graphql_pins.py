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

    from people_service.graphql.batch import Batches
    from people_service.graphql.executor import LeafExecutor
    from people_service.graphql.resolvers import Context
    from people_service.graphql.schema import executable_schema

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


@pytest.mark.parametrize(
    ("text", "options", "message"),
    [
        ("{ a " * 300 + "}" * 300, {}, "Document is nested too deeply"),
        ("{ a b c d }", {"max_lexical_tokens": 3}, "Document contains more than 3 tokens"),
        ("#\n#\n#\n{ a }", {"max_comments": 2}, "Document contains more than 2 comments"),
    ],
)
def test_the_parser_messages_the_limits_recognise(text, options, message):
    """parsing.parse_document tells a limit from a syntax error by these messages."""
    with pytest.raises(graphql.GraphQLSyntaxError) as raised:
        graphql.parse(text, **options)
    assert message in raised.value.message


def test_the_overlap_check_keeps_its_budget_knob_and_abort_message():
    """parsing.py lowers the overlap rule's work budget; the view reads its abort message."""
    from graphql.validation.rules import overlapping_fields_can_be_merged as overlap

    from people_service.graphql import parsing

    assert overlap.MAX_COMPLEXITY_BUDGET == parsing.VALIDATION_BUDGET
    document = graphql.parse("{ " + "a { b } " * 400 + "}")
    schema = graphql.build_schema("type Query { a: A } type A { b: String }")
    errors = graphql.validate(schema, document)
    assert [error.message for error in errors] == [parsing.VALIDATION_ABORTED]


def test_variable_coercion_stops_with_the_message_view_maps_to_bad_user_input():
    """view._code tells graphql-core's variable errors by their first words; the one that ends
    the count (max_coercion_errors, which execute_sync takes) has no 'Variable' in front."""
    from graphql import parse
    from graphql.execution import execute_sync

    from people_service.graphql.schema import executable_schema

    assert "max_coercion_errors" in parameters(execute_sync)
    document = parse("query ($a: [Int]) { me { name } }")
    result = execute_sync(
        executable_schema(), document, variable_values={"a": ["x", "y"]}, max_coercion_errors=1
    )
    messages = [error.message for error in result.errors]
    assert messages[0].startswith("Variable '$a' has invalid value")
    assert messages[-1].startswith("Too many errors processing variables")
