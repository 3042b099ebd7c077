"""GraphQL over HTTP: methods, media types, status codes, credentials, errors and the explorer."""

from __future__ import annotations

import json
import logging

import pytest

from people_service.graphql import resolvers

from .conftest import close_app, demo_people, make_app, new_key

DEMO = demo_people()
GRAPHQL_RESPONSE = "application/graphql-response+json"
ONE = '{ person(id: "1") { name } }'


def test_get_post_and_application_graphql_give_the_same_answer(demo):
    headers = demo.headers
    expected = {"data": {"person": {"name": DEMO["1"]["name"]}}}
    by_get = demo.request("GET", "/graphql", params={"query": ONE}, headers=headers)
    by_post = demo.request("POST", "/graphql", json={"query": ONE}, headers=headers)
    by_sdl = demo.request(
        "POST", "/graphql", data=ONE, headers={**headers, "Content-Type": "application/graphql"}
    )
    for response in (by_get, by_post, by_sdl):
        assert response.status_code == 200
        assert response.headers["Content-Type"] == "application/json"
        assert response.json() == expected


def test_mutation_by_get_is_405_and_runs_nothing(demo):
    query = 'mutation { createPerson(input: {name: "By GET"}) { id } }'
    response = demo.request("GET", "/graphql", params={"query": query}, headers=demo.headers)
    assert response.status_code == 405
    assert response.headers["Allow"] == "POST"
    assert response.json()["errors"][0]["extensions"]["code"] == "BAD_REQUEST"
    found = demo.request("GET", "/people?name=By GET", headers=demo.headers)
    assert found.json() == []


def test_accept_graphql_response_json_makes_request_errors_400(demo):
    headers = {**demo.headers, "Accept": GRAPHQL_RESPONSE}
    for query in ("{ person(id: ", "{ nothing }"):
        response = demo.request("POST", "/graphql", json={"query": query}, headers=headers)
        assert response.status_code == 400
        assert response.headers["Content-Type"] == GRAPHQL_RESPONSE
        assert "data" not in response.json()
    good = demo.request("POST", "/graphql", json={"query": ONE}, headers=headers)
    assert good.status_code == 200 and good.headers["Content-Type"] == GRAPHQL_RESPONSE
    partial = demo.request(
        "POST", "/graphql", json={"query": '{ person(id: "999999") { name } }'}, headers=headers
    )
    assert partial.status_code == 200  # a field error is not a request error


def test_under_application_json_request_errors_are_200_without_data(demo):
    expectations = [
        ("{ person(id: ", "GRAPHQL_PARSE_FAILED"),
        ("{ nothing }", "GRAPHQL_VALIDATION_FAILED"),
        ("query A { me { name } } query B { me { name } }", "BAD_REQUEST"),
    ]
    for query, code in expectations:
        response = demo.request("POST", "/graphql", json={"query": query}, headers=demo.headers)
        assert response.status_code == 200
        body = response.json()
        assert "data" not in body
        assert [e["extensions"]["code"] for e in body["errors"]] == [code]


def test_operation_name_picks_the_operation(demo):
    query = 'query A { person(id: "1") { name } } query B { person(id: "2") { name } }'
    response = demo.request(
        "POST", "/graphql", json={"query": query, "operationName": "B"}, headers=demo.headers
    )
    assert response.json() == {"data": {"person": {"name": DEMO["2"]["name"]}}}


def test_an_empty_operation_name_means_none_by_get_and_by_post(demo):
    expected = {"data": {"person": {"name": DEMO["1"]["name"]}}}
    sent = {"query": ONE, "operationName": ""}
    by_get = demo.request("GET", "/graphql", params=sent, headers=demo.headers)
    by_post = demo.request("POST", "/graphql", json=sent, headers=demo.headers)
    assert by_get.json() == by_post.json() == expected


def test_unacceptable_accept_is_406(demo):
    headers = {**demo.headers, "Accept": "text/csv"}
    response = demo.request("POST", "/graphql", json={"query": ONE}, headers=headers)
    assert response.status_code == 406


def test_unwrap_returns_bare_data_only_without_errors(demo):
    query = '{ a: person(id: "1") { name } b: person(id: "2") { name } }'
    bare = demo.request(
        "GET", "/graphql", params={"query": query, "unwrap": "1"}, headers=demo.headers
    )
    assert bare.json() == {"a": {"name": DEMO["1"]["name"]}, "b": {"name": DEMO["2"]["name"]}}
    failing = demo.request(
        "GET",
        "/graphql",
        params={"query": '{ person(id: "999999") { name } }', "unwrap": "1"},
        headers=demo.headers,
    )
    assert set(failing.json()) == {"data", "errors"}


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ([{"query": ONE}, {"query": ONE}], "Batched requests"),
        ({"query": ONE, "variables": "[]"}, "'variables' must be a JSON object."),
        ({"query": ONE, "variables": [1]}, "'variables' must be a JSON object."),
        ({"query": ONE, "operationName": 7}, "'operationName' must be a string."),
        ({"query": 42}, "The request needs a 'query' string."),
        ({"variables": {}}, "The request needs a 'query' string."),
    ],
)
def test_malformed_requests_are_400(demo, body, detail):
    response = demo.request("POST", "/graphql", json=body, headers=demo.headers)
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["message"].startswith(detail)
    assert error["extensions"]["code"] == "BAD_REQUEST"


def test_deeply_nested_bodies_and_variables_are_400(demo):
    nested = "[" * 1000 + "]" * 1000
    for raw in (nested, '{"query": "{ me { name } }", "variables": {"a": ' + nested + "}}"):
        response = demo.request(
            "POST",
            "/graphql",
            data=raw,
            headers={**demo.headers, "Content-Type": "application/json"},
        )
        assert 400 <= response.status_code < 500
    assert demo.request("GET", "/health").status_code == 200


def test_other_content_types_are_415(demo):
    for content_type in (
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ):
        response = demo.request(
            "POST",
            "/graphql",
            data="query={me{name}}",
            headers={**demo.headers, "Content-Type": content_type},
        )
        assert response.status_code == 415


@pytest.mark.parametrize("charset", ["latin-1", "utf-16"])
def test_a_graphql_document_in_another_charset_is_415_not_misread(demo, charset):
    response = demo.request(
        "POST",
        "/graphql",
        data=ONE.encode(charset),
        headers={**demo.headers, "Content-Type": f"application/graphql; charset={charset}"},
    )
    assert response.status_code == 415 and "UTF-8" in response.text


def test_no_or_bad_credentials_are_401_in_graphql_shape(demo):
    for headers in ({}, {"X-API-Key": "ps_unknown"}, {"Authorization": "Bearer not.a.token"}):
        response = demo.request("POST", "/graphql", json={"query": ONE}, headers=headers)
        assert response.status_code == 401
        assert "WWW-Authenticate" in response.headers
        assert response.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


def test_schema_is_served_as_sdl(demo):
    from .conftest import ROOT

    response = demo.request("GET", "/graphql/schema.graphql", headers=demo.headers)
    assert response.status_code == 200
    assert response.text == (ROOT / "schema.graphql").read_text()


def test_browser_gets_playground_with_assets_from_the_cdn(tmp_path):
    app = make_app(tmp_path, EXPLORER_CDN="https://assets.example.internal/playground")
    try:
        page = app.test_client().get("/graphql", headers={"Accept": "text/html,*/*;q=0.8"})
        assert page.status_code == 200
        assert page.content_type == "text/html; charset=utf-8"
        html = page.get_data(as_text=True)
        assert '"static/pages/playground.js?v=' in html  # our start-up script, from this server
        assert html.count("https://assets.example.internal/playground/") == 4
        assert "jsdelivr" not in html
        policy = page.headers["Content-Security-Policy"]
        assert "script-src 'self' https://assets.example.internal;" in policy
    finally:
        close_app(app)


def test_graphiql_explorer_and_its_cdn(tmp_path):
    app = make_app(tmp_path, EXPLORER="graphiql", EXPLORER_CDN="https://esm.example.internal")
    try:
        html = (
            app.test_client()
            .get("/graphql", headers={"Accept": "text/html"})
            .get_data(as_text=True)
        )
        assert "graphiql" in html and "https://esm.example.internal/graphiql@" in html
        assert "https://esm.sh" not in html
    finally:
        close_app(app)


def test_explorer_none_answers_400_bad_request(tmp_path):
    app = make_app(tmp_path, EXPLORER="none")
    try:
        response = app.test_client().get("/graphql", headers={"Accept": "text/html"})
        assert response.status_code == 400
        assert response.json["errors"][0]["extensions"]["code"] == "BAD_REQUEST"
    finally:
        close_app(app)


def test_get_without_query_from_a_script_is_400(demo):
    response = demo.request("GET", "/graphql", headers=demo.headers)
    assert response.status_code == 400


def test_introspection_can_be_switched_off(tmp_path):
    app = make_app(tmp_path, INTROSPECTION=False)
    try:
        headers = {"X-API-Key": new_key(app, "k")}
        client = app.test_client()
        response = client.post(
            "/graphql", json={"query": "{ __schema { types { name } } }"}, headers=headers
        )
        assert response.json["errors"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"
        assert "introspection is disabled" in response.json["errors"][0]["message"]
        assert client.post("/graphql", json={"query": "{ __typename }"}, headers=headers).json == {
            "data": {"__typename": "Query"}
        }
        assert client.get("/graphql/schema.graphql", headers=headers).status_code == 404
    finally:
        close_app(app)


def test_a_resolvers_own_exception_never_reaches_the_client(client, headers, monkeypatch, caplog):
    def explode(*args, **kwargs):
        raise RuntimeError("secret: connection string postgres://admin:pw@db")

    monkeypatch.setattr(resolvers.service, "people_details", explode)
    with caplog.at_level(logging.ERROR, logger="people_service.graphql"):
        response = client.post(
            "/graphql", json={"query": "{ people { name } me { name } }"}, headers=headers
        )
    body = response.json
    assert response.status_code == 200
    assert body["errors"] == [
        {
            "message": "Internal server error",
            "locations": [{"line": 1, "column": 3}],
            "path": ["people"],
            "extensions": {"code": "INTERNAL_SERVER_ERROR"},
        }
    ]
    assert "secret" not in json.dumps(body)
    assert "secret: connection string" in caplog.text


def test_rate_limited_graphql_is_429_with_code(tmp_path):
    app = make_app(tmp_path, RATE_LIMIT="6/day")
    try:
        headers = {"X-API-Key": new_key(app, "k")}
        client = app.test_client()
        statuses = [  # each costs 2: the fields it writes
            client.post("/graphql", json={"query": "{ me { name } }"}, headers=headers)
            for _ in range(4)
        ]
        assert [r.status_code for r in statuses] == [200, 200, 200, 429]
        refused = statuses[-1]
        assert refused.json["errors"][0]["extensions"]["code"] == "RATE_LIMITED"
        assert refused.headers["Retry-After"] and refused.headers["X-RateLimit-Remaining"] == "0"
    finally:
        close_app(app)


def test_every_error_has_a_code(demo):
    queries = [
        "{",
        "{ nope }",
        '{ person(id: "0") { name } }',
        '{ person(id: "1") { friends(limit: 500) { id } } }',
        "{ people(limit: 1000) { friends(limit: 100) { id } } }",
        'mutation { createPerson(input: {name: ""}) { id } }',
    ]
    for query in queries:
        body = demo.request("POST", "/graphql", json={"query": query}, headers=demo.headers).json()
        assert body["errors"], query
        for error in body["errors"]:
            assert error["extensions"]["code"] in {
                "BAD_USER_INPUT",
                "NOT_FOUND",
                "GRAPHQL_PARSE_FAILED",
                "GRAPHQL_VALIDATION_FAILED",
                "QUERY_TOO_COMPLEX",
                "BAD_REQUEST",
            }
