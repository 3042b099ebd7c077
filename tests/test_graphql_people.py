"""GraphQL's people(...): the filters, order and rules of REST's GET /people, by one service."""

from __future__ import annotations

import uuid

import pytest

from people_service.graphql.view import graphql_names
from people_service.schemas import sentence

from .conftest import new_key

PEOPLE = [
    ("bob", 40, "London", "United Kingdom"),
    ("Ada", 36, "LONDON", "united kingdom"),
    ("Émile", None, "Paris", "France"),
    ("alan", 36, "Straße", "Deutschland"),
    ("Zoe", 5, "STRASSE", "DEUTSCHLAND"),
]


@pytest.fixture
def crowd(make_person):
    for name, age, city, country in PEOPLE:
        make_person(name, age=age, address={"city": city, "country": country})


def people_ids(gql, arguments: str, variables=None) -> list[str]:
    declared = "($s: [PersonSort!])" if variables is not None else ""
    response = gql(f"query{declared} {{ people{arguments} {{ id }} }}", variables)
    assert "errors" not in response.json, response.json
    return [person["id"] for person in response.json["data"]["people"]]


@pytest.mark.parametrize(
    ("arguments", "query"),
    [
        ("(sort: [NAME])", "sort=name"),
        ("(sort: [NAME_DESC])", "sort=-name"),
        ("(sort: [AGE])", "sort=age"),
        ("(sort: [AGE_DESC, NAME])", "sort=-age,name"),
        ("(sort: [ID_DESC])", "sort=-id"),
        ('(city: "london")', "city=london"),
        ('(city: "strasse", sort: [AGE_DESC])', "city=strasse&sort=-age"),
        ('(country: "UNITED KINGDOM", minAge: 37)', "country=UNITED%20KINGDOM&min_age=37"),
        ("(minAge: 5, maxAge: 36, limit: 2, offset: 1)", "min_age=5&max_age=36&limit=2&offset=1"),
        ('(name: "A", sort: [AGE], city: "")', "name=A&sort=age&city="),
    ],
)
def test_people_answers_as_rest_does(client, headers, gql, crowd, arguments, query):
    rest = client.get(f"/people?{query}", headers=headers)
    assert rest.status_code == 200
    assert people_ids(gql, arguments) == [entry["id"] for entry in rest.json]


def test_sort_can_come_from_a_variable(gql, crowd):
    assert people_ids(gql, "(sort: $s)", {"s": ["AGE_DESC"]}) == ["1", "2", "4", "5", "3"]
    assert people_ids(gql, "(sort: $s)", {"s": "NAME"}) == ["2", "4", "1", "5", "3"]
    assert people_ids(gql, "(sort: $s)", {"s": None}) == ["1", "2", "3", "4", "5"]
    assert people_ids(gql, "(sort: $s)", {"s": []}) == ["1", "2", "3", "4", "5"]


@pytest.mark.parametrize(
    ("arguments", "rest"),
    [
        ("(sort: [NAME, NAME_DESC])", "sort=name,-name"),
        ("(sort: [AGE, AGE])", "sort=age,age"),
        ("(sort: [AGE, NAME, ID, ID_DESC, AGE_DESC, NAME_DESC, AGE])", "sort=age,name,id,-id"),
        ("(minAge: 9, maxAge: 3)", "min_age=9&max_age=3"),
        ("(minAge: -1)", "min_age=-1"),
        ("(maxAge: 151)", "max_age=151"),
        ('(city: "\\u0000")', "city=%00"),
        ("(limit: 0)", "limit=0"),
        ("(offset: -1)", "offset=-1"),
    ],
)
def test_bad_arguments_are_bad_user_input_with_the_rest_message_in_graphql_names(
    client, headers, gql, crowd, arguments, rest
):
    response = gql(f"{{ people{arguments} {{ id }} }}")
    error = response.json["errors"][0]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert response.json["data"] is None
    refused = client.get(f"/people?{rest}", headers=headers)
    assert refused.status_code == 400
    # the same rule and message, under the names GraphQL gives the arguments (min_age: minAge)
    assert error["extensions"]["errors"] == graphql_names(refused.json["errors"])
    assert error["message"] == sentence(error["extensions"]["errors"])
    assert (
        error["message"].replace("minAge", "min_age").replace("maxAge", "max_age")
        == (refused.json["detail"])
    )


def test_an_unknown_sort_value_is_refused_before_it_runs(gql):
    literal = gql("{ people(sort: [HEIGHT]) { id } }").json
    assert literal["errors"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"
    assert "data" not in literal
    variable = gql("query($s: [PersonSort!]) { people(sort: $s) { id } }", {"s": ["name"]}).json
    assert variable["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    as_float = gql("{ people(minAge: 1.5) { id } }").json
    assert as_float["errors"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"


def charge(app, client, query: str) -> int:
    """What a query costs against the rate limit: the first request of a fresh key."""
    headers = {"X-API-Key": new_key(app, f"cost-{uuid.uuid4().hex[:8]}")}
    response = client.post("/graphql", json={"query": query}, headers=headers)
    assert "errors" not in response.json, response.json
    limit = int(response.headers["X-RateLimit-Limit"])
    return limit - int(response.headers["X-RateLimit-Remaining"])


def test_filters_and_sort_leave_the_cost_estimate_as_it_was(app, client, headers, crowd):
    plain = charge(app, client, "{ people(limit: 40) { id friends(limit: 3) { id } } }")
    filtered = charge(
        app,
        client,
        '{ people(limit: 40, sort: [AGE_DESC, NAME], city: "x", minAge: 1, maxAge: 99)'
        " { id friends(limit: 3) { id } } }",
    )
    assert plain == filtered == 40 + 40 * 3
    too_much = client.post(
        "/graphql",
        json={"query": "{ people(limit: 1000, sort: [NAME]) { friends(limit: 10) { id } } }"},
        headers=headers,
    )
    assert too_much.json["errors"][0]["extensions"]["code"] == "QUERY_TOO_COMPLEX"
