"""Query strings: every REST route refuses parameters it does not take, and repeated ones."""

from __future__ import annotations

import re

import pytest

from .conftest import ROOT, close_app, make_app

# the REST blueprints: every route of theirs checks its query string
REST = ("people", "messages", "ops", "tokens")


def rest_routes(app) -> list[tuple[str, str, str]]:
    """(method, url with ids filled in, endpoint) of every REST route."""
    routes = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint.split(".")[0] not in REST:
            continue
        url = rule.rule.replace("<id:person_id>", "1").replace("<id:friend_id>", "2")
        url = url.replace("<id:message_id>", "1")
        for method in sorted(rule.methods):
            routes.append((method, url, rule.endpoint))
    return routes


def test_every_rest_route_refuses_an_unknown_parameter(app, client, headers, make_person):
    make_person()
    make_person("Bob")
    routes = rest_routes(app)
    assert {method for method, _, _ in routes} >= {"GET", "HEAD", "OPTIONS", "POST", "PUT"}
    for method, url, _ in routes:
        response = client.open(f"{url}?limt=3", method=method, headers=headers)
        assert response.status_code == 400, (method, url, response.data)
        assert response.content_type == "application/problem+json"
        if method != "HEAD":
            assert response.json["errors"] == {"limt": ["Unknown parameter."]}
            assert "'limt'" in response.json["detail"]
    # nothing was changed by the refused writes
    assert client.get("/people", headers=headers).headers["X-Total-Count"] == "2"


def test_the_typo_of_the_issue_is_refused_instead_of_returning_100_rows(client, headers):
    response = client.get("/people?limt=3", headers=headers)
    assert response.status_code == 400
    assert response.json == {
        "type": "about:blank",
        "title": "Bad Request",
        "status": 400,
        "detail": "Unknown query parameter 'limt'; /people takes city, country, limit, max_age,"
        " min_age, name, offset, sort.",
        "errors": {"limt": ["Unknown parameter."]},
    }


def test_routes_without_parameters_say_so(client, headers, make_person):
    make_person()
    response = client.get("/person/1?fields=name&x=1", headers=headers)
    assert response.json["detail"] == (
        "Unknown query parameters 'fields', 'x'; /person/1 takes no query parameters."
    )
    assert response.json["errors"] == {
        "fields": ["Unknown parameter."],
        "x": ["Unknown parameter."],
    }
    assert client.get("/health?verbose=1").status_code == 400
    assert client.get("/openapi.json?v=2").status_code == 400


def test_a_repeated_parameter_is_refused(client, headers):
    response = client.get("/people?limit=1&limit=2", headers=headers)
    assert response.status_code == 400
    assert response.json["detail"] == (
        "Query parameter 'limit' given more than once; give each parameter once."
    )
    assert response.json["errors"] == {"limit": ["Given more than once."]}
    assert client.get("/people?name=a&name=a", headers=headers).status_code == 400
    assert client.get("/person/1/friends?offset=0&offset=0", headers=headers).status_code == 400


def test_head_and_options_are_checked_as_get(client, headers):
    assert client.head("/people?limit=2", headers=headers).status_code == 200
    assert client.head("/people?limt=2", headers=headers).status_code == 400
    assert client.head("/people?limit=0", headers=headers).status_code == 400
    assert client.options("/people?limt=2").status_code == 400
    assert client.options("/people?limit=2").status_code in (200, 204)


def test_credentials_and_scope_come_before_the_parameters(client, read_headers):
    assert client.get("/people?limt=3").status_code == 401
    assert client.get("/people?limt=3", headers={"X-API-Key": "ps_wrong"}).status_code == 401
    refused = client.post("/person?x=1", json={"name": "A"}, headers=read_headers)
    assert refused.status_code == 403


def test_the_parameters_a_route_takes_are_those_it_documents(client, admin_headers, make_person):
    make_person()
    document = client.get("/openapi.json").json
    for path, methods in document["paths"].items():
        if "get" not in methods or "{event_id}" in path:
            continue
        url = re.sub(r"\{\w+\}", "1", path)
        takes = {p["name"] for p in methods["get"].get("parameters", []) if p["in"] == "query"}
        for name in takes:  # a documented name is never unknown (its value may be wrong)
            answer = client.get(f"{url}?{name}=1", headers=admin_headers)
            assert "Unknown parameter." not in answer.text, (path, name)
        refused = client.get(f"{url}?undocumented=1", headers=admin_headers).json
        assert refused["errors"] == {"undocumented": ["Unknown parameter."]}, path
        takes = ", ".join(sorted(takes)) or "no query parameters"
        assert refused["detail"].endswith(f"takes {takes}."), path


def test_a_kilobyte_of_unknown_parameters_gets_a_short_answer(client, headers):
    query = "&".join(f"p{index}=x" for index in range(200))
    response = client.get(f"/people?{query}", headers=headers)
    assert response.status_code == 400
    assert len(response.json["errors"]) == 10
    assert len(response.data) < 1000
    long_name = client.get("/people?" + "a" * 2000 + "=1", headers=headers)
    assert long_name.status_code == 400
    assert len(long_name.data) < 400


@pytest.mark.parametrize(
    "params",
    [
        {"query": "{ me { name } }"},
        {"query": "{ me { name } }", "unwrap": "1"},
        {
            "query": "query Me($n: Int) { people(limit: $n) { id } }",
            "variables": '{"n": 1}',
            "operationName": "Me",
            "extensions": "{}",
        },
    ],
)
def test_graphql_keeps_its_get_parameters(client, headers, params):
    response = client.get("/graphql", query_string=params, headers=headers)
    assert response.status_code == 200, response.json
    assert "errors" not in response.json


def test_the_readme_shows_the_answer_the_server_gives(client, headers):
    readme = (ROOT / "README.md").read_text()
    shown = re.search(r"\$ curl 'http://127.0.0.1:8080/people\?limt=3'.*\n(\{.*\})\n", readme)
    assert shown is not None
    answer = client.get("/people?limt=3", headers=headers)
    assert answer.data.decode() == shown.group(1) + "\n"


def test_a_cors_preflight_is_answered_whatever_its_query_string(tmp_path):
    app = make_app(tmp_path, CORS_ORIGINS="https://app.example.org")
    try:
        preflight = app.test_client().options(
            "/people?limt=3",
            headers={
                "Origin": "https://app.example.org",
                "Access-Control-Request-Method": "GET",
                "Access-Control-Request-Headers": "X-API-Key",
            },
        )
        assert preflight.status_code == 204
        assert preflight.headers["Access-Control-Allow-Origin"] == "https://app.example.org"
    finally:
        close_app(app)
