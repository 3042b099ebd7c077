"""The leaf executor answers exactly what graphql-core's own executor answers, errors included."""

from __future__ import annotations

import pytest
from ariadne import QueryType, graphql_sync, make_executable_schema
from graphql.execution.executor import Executor

from people_service import credentials, service, transfer
from people_service.graphql.executor import LeafExecutor
from people_service.graphql.resolvers import Batches, Context, executable_schema

QUERIES = [
    "{ people(limit: 5) { id name age email address { street city country } } }",
    "{ people(limit: 3) { n: name e: email name friends(limit: 3) { id n: name } } }",
    "{ people(limit: 3) { __typename name friends { __typename id } } }",
    'query Q($no: Boolean!) { person(id: "2") { name @skip(if: $no) age @include(if: $no) '
    "friends { ...f } } } fragment f on Person { id email }",
    "{ people(limit: 4) { ... on Person { id } ...rest } } fragment rest on Person { name }",
    "{ people(limit: 2) { messages { id content sender createdAt person { name } } } }",
    "{ a: people(limit: 2) { name } b: people(limit: 2, offset: 1) { name: email } }",
]


@pytest.fixture
def context(app, store, key):
    people = [
        {
            "id": str(i),
            "name": f"P{i}",
            "email": None if i % 2 else f"p{i}@example.org",
            "age": i,
            "address": {"city": f"C{i}"},
            "friends": [str(i % 6 + 1)],
        }
        for i in range(1, 7)
    ]
    transfer.import_people(store, {"people": people})
    found = credentials.caller_from_key(store, key)
    service.send_message(store, found.viewer, {"person_id": "1", "content": "hi"})
    return lambda: Context(store, found, Batches())


@pytest.mark.parametrize("query", QUERIES)
def test_same_answers_as_graphql_core(app, context, query):
    schema = executable_schema()
    with app.test_request_context():
        results = [
            graphql_sync(
                schema,
                {"query": query, "variables": {"no": False}},
                context_value=context(),
                execution_context_class=executor,
            )[1]
            for executor in (Executor, LeafExecutor)
        ]
    assert results[0] == results[1]
    assert "errors" not in results[0]


TINY = """
type Query { items: [Item!]! maybe: [Item] one: Item }
type Item { a: String! b: Int c: ID }
"""


@pytest.mark.parametrize(
    "items",
    [
        [{"a": "x", "b": 1, "c": 7}, {"a": "y", "b": None, "c": "z"}],
        [{"a": None, "b": 1}],  # null for a non-null field: an error, as graphql-core says
        [{"a": "x", "b": "not an int"}],  # a value the scalar refuses
        [{"a": "x", "b": 2**40}],  # beyond GraphQL's Int
        [{"a": lambda *args: "called"}],  # a callable, which graphql-core calls
        [None],  # a null item in a list of non-null
        [{"a": 5, "b": True, "c": 1.0}],  # coercions String/Int/ID make
    ],
)
def test_same_answers_and_errors_on_odd_values(items):
    query = QueryType()
    query.set_field("items", lambda *_: items)
    query.set_field("maybe", lambda *_: [*items, None])
    query.set_field("one", lambda *_: items[0])
    schema = make_executable_schema(TINY, query)
    document = {"query": "{ items { a b c } maybe { x: a b } one { a c } }"}
    standard = graphql_sync(schema, document, execution_context_class=Executor)[1]
    leaf = graphql_sync(schema, document, execution_context_class=LeafExecutor)[1]
    assert leaf == standard
