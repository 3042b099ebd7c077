"""HEAD is GET without a body, on every route: same status and headers, never a side effect."""

from __future__ import annotations

import pytest

ONE = '{ person(id: "1") { name } }'
# headers that differ between any two requests
VOLATILE = {"date", "x-request-id", "x-ratelimit-remaining", "x-ratelimit-reset", "retry-after"}


def same_but_bodiless(server, path, headers, **kwargs):
    got = server.request("GET", path, headers=headers, **kwargs)
    head = server.request("HEAD", path, headers=headers, **kwargs)
    assert head.status_code == got.status_code, path
    assert head.content == b""
    if path == "/me":  # its body holds the request count, which each request (and worker) moves
        assert int(head.headers["Content-Length"]) > 0
        head.headers.pop("Content-Length"), got.headers.pop("Content-Length")
    assert lasting(head.headers) == lasting(got.headers), path
    return got


def lasting(headers) -> dict:
    return {name.lower(): value for name, value in headers.items() if name.lower() not in VOLATILE}


@pytest.mark.parametrize(
    "path",
    [
        "/people?limit=3",
        "/people?limit=abc",
        "/person/1",
        "/person/999999",
        "/person/1/messages",
        "/me",
        "/health",
        "/openapi.json",
    ],
)
def test_rest_head_is_get_without_a_body(demo_server, path):
    same_but_bodiless(demo_server, path, demo_server.headers)


def test_rest_head_needs_credentials_and_honours_etags(demo_server):
    same_but_bodiless(demo_server, "/people", {})
    etag = demo_server.request("GET", "/person/1", headers=demo_server.headers).headers["ETag"]
    head = demo_server.request(
        "HEAD", "/person/1", headers={**demo_server.headers, "If-None-Match": etag}
    )
    assert head.status_code == 304


@pytest.mark.parametrize(
    "params",
    [
        {"query": ONE},
        {"query": ONE, "unwrap": "1"},
        {"query": "{ nothing }"},
        {"query": "{"},
        {"query": "{ people(limit: 1000) { friends(limit: 100) { id } } }"},
        {"query": ONE, "variables": "[]"},
    ],
)
def test_graphql_head_with_a_query_answers_as_get(demo_server, params):
    got = same_but_bodiless(demo_server, "/graphql", demo_server.headers, params=params)
    assert got.headers["Content-Type"].startswith("application/json")


def test_graphql_head_never_runs_a_mutation(demo_server):
    create = 'mutation { createPerson(input: {name: "By HEAD"}) { id } }'
    by_query = demo_server.request(
        "HEAD", "/graphql", params={"query": create}, headers=demo_server.headers
    )
    assert by_query.status_code == 405 and by_query.headers["Allow"] == "POST"
    by_body = demo_server.request(
        "HEAD", "/graphql", json={"query": create}, headers=demo_server.headers
    )
    assert by_body.status_code == 400  # as GET without ?query=: the body is not read
    found = demo_server.request(
        "GET", "/people", params={"name": "By HEAD"}, headers=demo_server.headers
    )
    assert found.json() == []


def test_graphql_head_without_credentials_is_401(demo_server):
    same_but_bodiless(demo_server, "/graphql", {}, params={"query": ONE})
    head = demo_server.request("HEAD", "/graphql", params={"query": ONE})
    assert head.status_code == 401 and "WWW-Authenticate" in head.headers
