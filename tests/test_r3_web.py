"""Round 3, web: mount prefixes, the front page's base URL, favicon, credential hints, CORS
origins, exact integers and bounded JSON work (issues 18 and 21), through real HTTP."""

from __future__ import annotations

import json
import sys
import time

import pytest
import requests

from .conftest import ServerProcess, cli, database
from .test_wsgi_servers import WSGIServer

BROWSER = "text/html,application/xhtml+xml"


def new_key(db, name="web", scopes="read,write") -> str:
    result = cli("keys", "create", "--name", name, "--scopes", scopes, db=db)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = database(tmp_path_factory.mktemp("r3web"))
    server = ServerProcess(db, env={"PEOPLE_SERVICE_CORS_ORIGINS": "http://[::1]:3000"})
    server.key = new_key(db)
    server.start()
    yield server
    server.stop()


def page(url: str, **headers) -> str:
    response = requests.get(url, headers={"Accept": BROWSER, **headers}, timeout=30)
    assert response.status_code == 200, response.text
    return response.text


def test_waitress_url_prefix_is_used_by_links_location_and_pages(tmp_path, sqlite_only):
    db = database(tmp_path)
    key = new_key(db)
    command = [sys.executable, "-m", "waitress", "--listen=127.0.0.1:{port}"]
    with WSGIServer([*command, "--url-prefix=/api", "app:app"], db) as server:
        server.url += "/api"
        headers = {"X-API-Key": key}
        created = [
            server.request("POST", "/person", json={"name": name}, headers=headers)
            for name in ("Ada", "Alan")
        ]
        assert created[0].headers["Location"] == f"/api/person/{created[0].json()['id']}"
        message = {"person_id": created[1].json()["id"], "content": "hi"}
        sent = server.request("POST", "/message", json=message, headers=headers)
        assert sent.status_code == 201, sent.text
        assert sent.headers["Location"] == f"/api/message/{sent.json()['id']}"
        listed = server.request("GET", "/people?limit=1", headers=headers)
        assert listed.headers["Link"].startswith("</api/people?limit=1&offset=1>")
        front = page(server.url + "/")
        assert 'href="/api/docs"' in front
        assert f"curl -i &#39;{server.url}/people?limit=5&#39;" in front
        assert 'data-openapi="/api/openapi.json"' in page(server.url + "/docs")
        # Swagger UI and generated clients resolve the paths against the document's servers
        assert server.request("GET", "/openapi.json").json()["servers"] == [{"url": "/api"}]


def test_a_script_name_header_under_gunicorn_changes_no_later_page(tmp_path, sqlite_only):
    """gunicorn turns a SCRIPT_NAME header (from a peer in forwarded_allow_ips, loopback by
    default) into the request's prefix: it may shape that answer, never the next visitor's."""
    pytest.importorskip("gunicorn")
    db = database(tmp_path)
    command = [sys.executable, "-m", "gunicorn", "--bind", "127.0.0.1:{port}", "app:app"]
    with WSGIServer(command, db) as server:
        for path in ("/", "/docs", "/openapi.json"):
            page(server.url + "/evil" + path, SCRIPT_NAME="/evil")
        assert "/evil" not in page(server.url + "/")
        assert 'data-openapi="/openapi.json"' in page(server.url + "/docs")
        assert "servers" not in requests.get(server.url + "/openapi.json", timeout=30).json()


def test_front_page_shows_the_url_it_is_served_on(server):
    text = page(server.url + "/")
    assert f"curl -i &#39;{server.url}/people?limit=5&#39;" in text
    assert "8080" not in server.url or "127.0.0.1:8080" in text


def test_favicon_is_answered_without_credentials(server):
    response = server.request("GET", "/favicon.ico")
    assert response.status_code == 204
    assert response.content == b""
    assert "max-age" in response.headers["Cache-Control"]


def test_a_key_sent_as_a_token_or_a_token_as_a_key_says_where_it_goes(server):
    as_token = server.request("GET", "/me", headers={"Authorization": f"Bearer {server.key}"})
    assert as_token.status_code == 401
    assert "API keys go in X-API-Key" in as_token.json()["detail"]
    token = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"
    as_key = server.request("GET", "/me", headers={"X-API-Key": token})
    assert as_key.status_code == 401
    assert "Tokens go in 'Authorization: Bearer'" in as_key.json()["detail"]
    # an unknown key where keys go gets no hint
    wrong = server.request("GET", "/me", headers={"X-API-Key": "ps_nothing"})
    assert wrong.json()["detail"] == "The API key is unknown or revoked."


@pytest.mark.parametrize(
    "origin, allowed",
    [
        ("http://[::1]:3000", True),
        ("HTTP://[::1]:3000", True),
        ("http://1:3000", False),
        ("http://[::1]:30000", False),
        ("http://[::1]:3000.evil.example", False),
        ("http://::1:3000", False),
    ],
)
def test_cors_origins_match_exactly_ipv6_literals_included(server, origin, allowed):
    response = server.request("GET", "/people", headers={"Origin": origin, "X-API-Key": server.key})
    assert response.status_code == 200
    assert response.headers.get("Access-Control-Allow-Origin") == (origin if allowed else None)
    assert "Origin" in response.headers["Vary"]


@pytest.mark.parametrize("number", ["1e-400", "36.0000000000000000001", "36.5", "-1e-400"])
def test_an_integer_field_refuses_a_number_that_is_not_exactly_whole(server, number):
    headers = {"X-API-Key": server.key, "Content-Type": "application/json"}
    body = f'{{"name": "Ada", "age": {number}}}'
    response = server.request("POST", "/person", data=body, headers=headers)
    assert response.status_code == 422, response.text
    assert response.json()["errors"] == {"age": ["Not a valid integer."]}
    # the same number in a message's Idempotency fingerprint is no 500 either
    sent = server.request(
        "POST",
        "/message",
        data=f'{{"person_id": "1", "content": "hi", "x": {number}}}',
        headers={**headers, "Idempotency-Key": "r3-web-" + number},
    )
    assert sent.status_code in (404, 422), sent.text


def test_an_integer_field_takes_a_whole_number_written_with_a_fraction(server):
    headers = {"X-API-Key": server.key, "Content-Type": "application/json"}
    body = '{"name": "Ada", "age": 36.0, "address": {"city": "London"}}'
    response = server.request("POST", "/person", data=body, headers=headers)
    assert response.status_code == 201, response.text
    assert response.json()["age"] == 36


@pytest.mark.parametrize("nested", [False, True])
def test_a_mebibyte_of_unknown_fields_gets_a_short_422_quickly(server, nested):
    fields = {f"f{i}": i for i in range(70_000)}
    body = {"name": "Ada", "address": fields} if nested else {"name": "Ada", **fields}
    raw = json.dumps(body, separators=(",", ":"))
    assert 900_000 < len(raw) < 1 << 20
    headers = {"X-API-Key": server.key, "Content-Type": "application/json"}
    started = time.monotonic()
    response = server.request("POST", "/person", data=raw, headers=headers)
    elapsed = time.monotonic() - started
    assert response.status_code == 422
    errors = response.json()["errors"]
    unknown = errors.pop("address") if nested else errors
    assert errors.pop("_schema") == ["And 69990 more unknown fields."]
    assert len(unknown) == 10
    assert all(name.startswith("f") for name in unknown)
    assert len(response.content) < 2_000
    assert elapsed < 5  # a blow-up, not a benchmark


def test_a_few_unknown_fields_are_named_with_every_other_message(server):
    headers = {"X-API-Key": server.key}
    few = server.request("POST", "/person", json={"age": -1, "nick": "A"}, headers=headers)
    assert few.json()["errors"] == {
        "age": ["Must be greater than or equal to 0 and less than or equal to 150."],
        "name": ["Missing data for required field."],
        "nick": ["Unknown field."],
    }


def test_graphql_variables_take_integers_exactly_too(server):
    query = "mutation ($input: PersonInput!) { createPerson(input: $input) { age } }"
    headers = {"X-API-Key": server.key, "Content-Type": "application/json"}
    for number, age in (("36.0000000000000000001", None), ("1e-400", None), ("36.0", 36)):
        body = json.dumps({"query": query, "variables": {"input": {"name": "Ada"}}})
        body = body.replace('"name": "Ada"', f'"name": "Ada", "age": {number}')
        answer = server.request("POST", "/graphql", data=body, headers=headers).json()
        if age is None:
            assert answer["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT", answer
            assert "data" not in answer or answer["data"] is None
        else:
            assert answer["data"]["createPerson"]["age"] == age
