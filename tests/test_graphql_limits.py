"""GraphQL limits (depth, cost, tokens, size), batching per level, and the document cache."""

from __future__ import annotations

import uuid

import pytest
from graphql import get_introspection_query

from people_service import transfer
from people_service.graphql import rules, view

from .conftest import ACTIVE, count_statements


def codes(response) -> list[str]:
    return [error["extensions"]["code"] for error in response.json["errors"]]


def nested_friends(depth: int) -> str:
    """A query `depth` field levels deep: person, friends..., name."""
    inner = "name"
    for _ in range(depth - 2):
        inner = f"friends(limit: 1) {{ {inner} }}"
    return f'{{ person(id: "1") {{ {inner} }} }}'


@pytest.fixture
def crowd(store):
    """50 people, each a friend of the next ten (wrapping), through the service."""
    people = [{"id": str(i), "name": f"P{i}", "friends": []} for i in range(1, 51)]
    for i in range(50):
        people[i]["friends"] = [str((i + k) % 50 + 1) for k in range(1, 11)]
    transfer.import_people(store, {"people": people})
    return people


def test_depth_at_the_limit_runs_and_one_more_is_refused(gql, crowd):
    assert "errors" not in gql(nested_friends(10)).json
    refused = gql(nested_friends(11))
    assert codes(refused) == ["QUERY_TOO_COMPLEX"]
    assert refused.json["errors"][0]["message"] == "The query is 11 levels deep; the limit is 10."
    assert "data" not in refused.json


def test_fragments_count_towards_depth(gql, crowd):
    inner = "name"
    for _ in range(9):
        inner = f"friends(limit: 1) {{ {inner} }}"
    query = f'{{ person(id: "1") {{ ...deep }} }} fragment deep on Person {{ {inner} }}'
    assert codes(gql(query)) == ["QUERY_TOO_COMPLEX"]  # 11 levels, 10 of them in the fragment


def test_cost_multiplies_list_limits_and_uses_variables(gql, crowd):
    query = "query Q($n: Int) { people(limit: $n) { friends(limit: 100) { id } } }"
    assert "errors" not in gql(query, {"n": 49}).json  # 49 x (1 + 100) = 4949
    refused = gql(query, {"n": 50})  # 5050
    assert codes(refused) == ["QUERY_TOO_COMPLEX"]
    assert "5050" in refused.json["errors"][0]["message"]


def test_aliases_count_towards_cost(gql, crowd):
    def aliased(count):
        return "{ " + " ".join(f"a{i}: people(limit: 100) {{ id }}" for i in range(count)) + " }"

    assert "errors" not in gql(aliased(50)).json  # 5000
    assert codes(gql(aliased(51))) == ["QUERY_TOO_COMPLEX"]


def test_more_than_2000_tokens_is_refused(gql):
    query = "{ me { " + "name " * 2100 + "} }"
    response = gql(query)
    assert codes(response) == ["QUERY_TOO_COMPLEX"]
    assert "2000 tokens" in response.json["errors"][0]["message"]


def test_more_than_100_kib_of_text_is_refused(gql):
    query = "# " + "x" * (100 * 1024) + "\n{ me { name } }"
    assert codes(gql(query)) == ["QUERY_TOO_COMPLEX"]


def test_absurd_nesting_is_refused_not_crashed(gql):
    response = gql("{" * 1000 + "}" * 1000)
    assert response.status_code == 200
    assert codes(response)[0] in {"QUERY_TOO_COMPLEX", "GRAPHQL_PARSE_FAILED"}


def test_circular_fragments_are_a_validation_error(gql):
    query = """
        { person(id: "1") { ...a } }
        fragment a on Person { friends { ...b } }
        fragment b on Person { friends { ...a } }
    """
    assert set(codes(gql(query))) == {"GRAPHQL_VALIDATION_FAILED"}


def test_the_standard_introspection_query_passes_the_limits(gql):
    response = gql(get_introspection_query())
    assert "errors" not in response.json
    assert response.json["data"]["__schema"]["queryType"]["name"] == "Query"


def test_limits_are_configurable(tmp_path):
    from .conftest import close_app, make_app, new_key

    app = make_app(tmp_path, GRAPHQL_MAX_DEPTH=3, GRAPHQL_MAX_COST=10)
    try:
        headers = {"X-API-Key": new_key(app, "k")}
        client = app.test_client()
        deep = client.post("/graphql", json={"query": nested_friends(4)}, headers=headers)
        assert deep.json["errors"][0]["extensions"]["code"] == "QUERY_TOO_COMPLEX"
        costly = client.post(
            "/graphql", json={"query": "{ people(limit: 11) { id } }"}, headers=headers
        )
        assert costly.json["errors"][0]["message"].startswith("The query could return 11 objects")
    finally:
        close_app(app)


def test_graphql_is_charged_its_cost_by_the_rate_limit(client, headers, crowd):
    def remaining(response):
        return int(response.headers["X-RateLimit-Remaining"])

    before = remaining(client.get("/me", headers=headers))
    after = remaining(
        client.post(
            "/graphql",
            json={"query": "{ people(limit: 5) { friends(limit: 2) { id } } }"},
            headers=headers,
        )
    )
    assert before - after == 5 * (1 + 2)
    refused = remaining(
        client.post(
            "/graphql",
            json={"query": "{ people(limit: 1000) { friends(limit: 100) { id } } }"},
            headers=headers,
        )
    )
    assert after - refused == 1  # refused before it runs: charged 1, not 101000


def test_statements_grow_with_depth_not_with_people(gql, store, crowd):
    """No N+1: 40 people with 400 friends and 4000 friends-of-friends in as many statements as 4."""

    def query(limit):
        friends = "friends(limit: 10) { name friends(limit: 10) { name } }"
        return f"{{ people(limit: {limit}) {{ name {friends} }} }}"

    results = {}

    def run(limit):
        response = gql(query(limit))
        assert "errors" not in response.json
        results[limit] = response.json["data"]["people"]

    gql("{ me { name } }")  # the caller's key is looked up once, then cached
    many = count_statements(store, lambda: run(40))
    few = count_statements(store, lambda: run(4))
    assert many == few
    # people, their friends, the friends of those; and on PostgreSQL, which keeps no cache of
    # callers (nothing there tells other machines at once of a revocation), the caller's key
    assert many == (3 if ACTIVE["backend"] == "sqlite" else 4)
    assert sum(len(f["friends"]) for p in results[40] for f in p["friends"]) == 4000
    first = results[40][0]
    assert [f["name"] for f in first["friends"]] == [f"P{i}" for i in range(2, 12)]


def test_messages_and_their_people_are_batched_too(gql, store, crowd, client, headers):
    for person_id in range(1, 21):
        client.post(
            "/message", json={"person_id": str(person_id), "content": "hi"}, headers=headers
        )
    person = "person { name friends(limit: 3) { id } }"
    query = f"{{ people(limit: 20) {{ messages(limit: 5) {{ content {person} }} }} }}"
    statements = count_statements(store, lambda: gql(query))
    assert statements <= 5


def test_repeated_documents_are_parsed_and_validated_once(gql, crowd):
    query = f'{{ person(id: "3") {{ name a{uuid.uuid4().hex}: age }} }}'  # a text not seen yet
    parsed, validated = rules.parse_document.cache_info(), view._validate.cache_info()
    for _ in range(3):
        assert "errors" not in gql(query).json
    assert rules.parse_document.cache_info().misses == parsed.misses + 1  # parsed once
    assert view._validate.cache_info().misses == validated.misses + 1
    assert view._validate.cache_info().hits == validated.hits + 2
