"""Bad input at scale: hypothesis against the app (in-process), which answers 2xx or 4xx."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_graphql import Mode, mutations, queries

from .conftest import CLIENT_CODES, ROOT

SDL = (ROOT / "schema.graphql").read_text()
# examples: the hypothesis profile's (conftest.py: a short run by default, many in CI)
PROPERTY = settings(derandomize=True)

# every code point, lone surrogates and NUL included, and the strings that break naive code
nasty_text = st.one_of(
    st.text(st.characters(codec=None, exclude_categories=()), max_size=30),
    st.sampled_from(
        ["\ud800", "a\x00b", "\udfff\ud800", "' OR 1=1--", "%' --", "\u202e", "😀" * 300, " " * 201]
    ),
)
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),  # NaN and Infinity are not JSON; json.dumps spells them anyway
    st.sampled_from([0, 150, 151, -1, 36.0, 12.5, 1e300]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, nasty_text)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(nasty_text, inner, max_size=4),
    max_leaves=12,
)
person_like = st.fixed_dictionaries(
    {},
    optional={
        "id": st.one_of(nasty_text, numbers, st.just("1")),
        "name": st.one_of(nasty_text, scalars),
        "age": st.one_of(numbers, scalars),
        "email": st.one_of(nasty_text, st.emails(), scalars),
        "address": st.one_of(
            json_values, st.fixed_dictionaries({}, optional={"city": scalars, "street": scalars})
        ),
        "friends": json_values,
    },
)


def assert_answer(response):
    assert response.status_code < 500, (response.request.body, response.text)
    if response.status_code >= 400:
        assert response.headers["Content-Type"] == "application/problem+json"
        body = response.json()
        assert body["status"] == response.status_code and body["detail"]


@pytest.fixture(scope="module")
def api(demo):
    return demo


@PROPERTY
@given(body=st.one_of(person_like, json_values), method=st.sampled_from(["POST", "PUT", "PATCH"]))
def test_person_bodies_never_crash_the_server(api, body, method):
    path = "/person" if method == "POST" else "/person/3"
    text = json.dumps(body)  # ASCII escapes keep lone surrogates as JSON allows them
    response = api.request(
        method, path, data=text, headers={**api.headers, "Content-Type": "application/json"}
    )
    assert_answer(response)
    if response.status_code in (200, 201):
        person = response.json()
        assert set(person) == {"id", "name", "age", "email", "address"}
        assert set(person["address"]) == {"street", "city", "country"}


@PROPERTY
@given(
    body=st.one_of(json_values, st.fixed_dictionaries({"person_id": scalars, "content": scalars}))
)
def test_message_bodies_never_crash_the_server(api, body):
    response = api.request(
        "POST",
        "/message",
        data=json.dumps(body),
        headers={**api.headers, "Content-Type": "application/json"},
    )
    assert_answer(response)


url_text = st.text(st.characters(codec="utf-8"), max_size=25)


@PROPERTY
@given(limit=url_text, offset=url_text, name=url_text)
def test_list_parameters_never_crash_the_server(api, limit, offset, name):
    response = api.request(
        "GET",
        "/people",
        params={"limit": limit, "offset": offset, "name": name},
        headers=api.headers,
    )
    assert_answer(response)
    assert response.status_code in (200, 400)


@PROPERTY
@given(raw=st.binary(max_size=200))
def test_raw_bytes_as_json_never_crash_the_server(api, raw):
    response = api.request(
        "POST", "/person", data=raw, headers={**api.headers, "Content-Type": "application/json"}
    )
    assert_answer(response)


def assert_graphql_answer(response):
    assert response.status_code < 500, (response.request.body, response.text)
    for error in response.json().get("errors", ()):
        assert error["extensions"]["code"] in CLIENT_CODES, error
        assert error["message"] != "Internal server error"


@PROPERTY
@given(query=queries(SDL) | mutations(SDL))
def test_generated_graphql_documents_never_crash_the_server(api, query):
    assert_graphql_answer(
        api.request("POST", "/graphql", json={"query": query}, headers=api.headers)
    )


@PROPERTY
@given(query=queries(SDL, mode=Mode.NEGATIVE) | mutations(SDL, mode=Mode.NEGATIVE))
def test_invalid_graphql_documents_are_client_errors(api, query):
    response = api.request("POST", "/graphql", json={"query": query}, headers=api.headers)
    assert_graphql_answer(response)


@PROPERTY
@given(variables=json_values, text=nasty_text)
def test_graphql_variables_never_crash_the_server(api, variables, text):
    query = (
        "query Q($id: ID, $name: String, $n: Int) { person(id: $id) { friends(limit: $n) { id } }"
        " named: person(name: $name) { id } people(name: $name) { id } }"
    )
    body = {"query": query, "variables": {"id": variables, "name": text, "n": variables}}
    response = api.request(
        "POST",
        "/graphql",
        data=json.dumps(body),
        headers={**api.headers, "Content-Type": "application/json"},
    )
    assert_graphql_answer(response)


def test_the_app_is_still_healthy_afterwards(api):
    assert api.request("GET", "/health").json() == {"status": "ok", "database": "ok"}
