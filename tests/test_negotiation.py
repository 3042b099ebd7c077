"""Content negotiation: real browsers get the pages, programs get JSON, parameters do not matter."""

from __future__ import annotations

import time

import pytest

from people_service.web.negotiation import HTML, JSON, best_match

GRAPHQL_RESPONSE = "application/graphql-response+json"

# What browsers send when they navigate to a page (copied from the browsers themselves)
CHROMIUM = (
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,"
    "*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"
)
FIREFOX = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
FIREFOX_OLDER = (
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
)
SAFARI = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
BROWSERS = {
    "chromium": CHROMIUM,
    "firefox": FIREFOX,
    "firefox-older": FIREFOX_OLDER,
    "safari": SAFARI,
}
# What programs send: curl, requests and fetch() send */*; sgqlc sends a charset; httpie
PROGRAMS = {
    "none": None,
    "empty": "",
    "any": "*/*",
    "json": "application/json",
    "sgqlc": "application/json; charset=utf-8",
    "httpie": "application/json, */*;q=0.5",
}


def accept(value):
    return {} if value is None else {"Accept": value}


@pytest.mark.parametrize("header", BROWSERS.values(), ids=BROWSERS.keys())
def test_browsers_prefer_html(header):
    assert best_match((JSON, HTML), header) == HTML
    assert best_match((JSON, GRAPHQL_RESPONSE, HTML), header) == HTML


@pytest.mark.parametrize("header", PROGRAMS.values(), ids=PROGRAMS.keys())
def test_programs_get_json(header):
    assert best_match((JSON, HTML), header) == JSON
    assert best_match((JSON, GRAPHQL_RESPONSE), header) == JSON


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        # parameters other than q do not spoil a match (werkzeug's own matching would say None)
        ("application/json; charset=utf-8", JSON),
        ("application/graphql-response+json; charset=utf-8", GRAPHQL_RESPONSE),
        ("Application/JSON;Charset=UTF-8", JSON),
        # quality decides, then the more specific range, then the client's order
        ("application/json;q=0.5, application/graphql-response+json", GRAPHQL_RESPONSE),
        ("application/graphql-response+json, application/json", GRAPHQL_RESPONSE),
        ("application/json, application/graphql-response+json", JSON),
        ("application/*", JSON),
        ("*/*, application/graphql-response+json", GRAPHQL_RESPONSE),
        # q=0 refuses a type even when a wildcard would take it
        ("application/json;q=0, */*", GRAPHQL_RESPONSE),
        ("*/*;q=0", None),
        ("text/html", None),
        ("text/csv", None),
        # nonsense is ignored, as if the range were not there
        ("garbage", None),
        (";;;,,,", None),
        ("*/json", None),
        ("application/json;q=abc, text/csv", None),
    ],
)
def test_best_match_over_the_json_types(header, expected):
    assert best_match((JSON, GRAPHQL_RESPONSE), header) == expected


# graphql-http and graphql-request send the first, urql the second: on equal quality the
# client's order decides (werkzeug's best_match would keep ours and answer application/json)
@pytest.mark.parametrize(
    "header",
    [
        "application/graphql-response+json, application/json",
        "application/graphql-response+json, application/graphql+json, application/json, "
        "text/event-stream, multipart/mixed",
    ],
)
def test_graphql_clients_listing_the_graphql_type_first_get_it(client, headers, header):
    response = client.get("/graphql?query=%7B", headers={**headers, "Accept": header})
    assert response.status_code == 400 and response.content_type == GRAPHQL_RESPONSE


def test_text_html_first_at_equal_quality_is_a_page():
    assert best_match((JSON, HTML), "text/html, application/json") == HTML


def test_html_refused_with_q0_is_not_chosen_for_a_wildcard():
    assert best_match((HTML, JSON), "text/html;q=0, */*;q=0.5") == JSON
    assert best_match((JSON, HTML), "text/*") == HTML


def test_a_huge_accept_header_is_answered_quickly():
    header = ", ".join(f"application/x-{n};q=0.{n % 10}" for n in range(20_000)) + ", */*;q=0.1"
    started = time.perf_counter()
    assert best_match((JSON, HTML), header) == JSON
    assert time.perf_counter() - started < 5  # linear; catches a blow-up, not a benchmark


# -- through the app ---------------------------------------------------------------------------


@pytest.mark.parametrize("header", BROWSERS.values(), ids=BROWSERS.keys())
def test_browsers_get_the_explorer_the_front_page_and_the_docs(client, header):
    for path, marker in (
        ("/graphql", "GraphQL Playground"),
        ("/", "people-service"),
        ("/docs", "swagger-ui"),
    ):
        response = client.get(path, headers={"Accept": header})
        assert response.status_code == 200, path
        assert response.content_type == "text/html; charset=utf-8", path
        assert marker in response.get_data(as_text=True), path
        assert response.headers["Vary"] == "Accept", path


@pytest.mark.parametrize("header", PROGRAMS.values(), ids=PROGRAMS.keys())
def test_programs_get_json_from_the_same_urls(client, header):
    graphql = client.get("/graphql", headers=accept(header))
    assert graphql.status_code == 400
    assert graphql.content_type == "application/json"
    assert graphql.json["errors"][0]["extensions"]["code"] == "BAD_REQUEST"
    front = client.get("/", headers=accept(header))
    assert front.status_code == 200 and front.content_type == "application/json"
    assert front.json["links"]["docs"] == "/docs"
    docs = client.get("/docs", headers=accept(header))
    assert docs.status_code == 200 and docs.content_type == "application/json"
    assert docs.json["openapi"] == "3.1.0"
    assert docs.headers["Content-Location"] == "/openapi.json"


def test_sgqlc_accept_header_gets_json_answers_not_406(client, headers):
    sgqlc = {**headers, "Accept": "application/json; charset=utf-8"}
    by_post = client.post("/graphql", json={"query": "{ me { name } }"}, headers=sgqlc)
    assert by_post.status_code == 200
    assert by_post.content_type == "application/json"
    assert by_post.json == {"data": {"me": {"name": "ci"}}}
    by_get = client.get("/graphql", query_string={"query": "{ me { name } }"}, headers=sgqlc)
    assert by_get.status_code == 200 and by_get.json == {"data": {"me": {"name": "ci"}}}


def test_graphql_response_json_with_a_charset_is_honoured(client, headers):
    asking = {**headers, "Accept": f"{GRAPHQL_RESPONSE}; charset=utf-8"}
    response = client.post("/graphql", json={"query": "{ nothing }"}, headers=asking)
    assert response.status_code == 400
    assert response.content_type == GRAPHQL_RESPONSE


def test_a_browser_running_a_query_by_get_gets_json(client, headers):
    response = client.get(
        "/graphql",
        query_string={"query": "{ me { name } }"},
        headers={**headers, "Accept": CHROMIUM},
    )
    assert response.status_code == 200
    assert response.content_type == "application/json"


def test_nothing_acceptable_is_406_for_graphql_and_json_elsewhere(client, headers):
    refused = client.post(
        "/graphql", json={"query": "{ me { name } }"}, headers={**headers, "Accept": "text/csv"}
    )
    assert refused.status_code == 406
    # the front page and the docs answer their JSON form rather than nothing
    assert client.get("/", headers={"Accept": "text/csv"}).content_type == "application/json"
    assert client.get("/docs", headers={"Accept": "image/png"}).json["openapi"] == "3.1.0"


@pytest.mark.parametrize("path", ["/graphql", "/", "/docs"])
def test_head_answers_as_get_without_a_body(client, path):
    get = client.get(path, headers={"Accept": CHROMIUM})
    head = client.head(path, headers={"Accept": CHROMIUM})
    assert head.status_code == 200
    assert head.data == b""
    for name in ("Content-Type", "Content-Length", "Content-Security-Policy", "Vary"):
        assert head.headers[name] == get.headers[name], name
    assert int(head.headers["Content-Length"]) == len(get.data) > 0


def test_head_for_programs_answers_json_headers_without_a_body(client):
    head = client.head("/", headers={"Accept": "application/json"})
    assert head.status_code == 200 and head.content_type == "application/json"
    assert head.data == b""


def test_the_real_server_answers_head_and_browsers_alike(demo_server):
    for path in ("/graphql", "/", "/docs"):
        get = demo_server.request("GET", path, headers={"Accept": CHROMIUM})
        head = demo_server.request("HEAD", path, headers={"Accept": CHROMIUM})
        assert get.status_code == head.status_code == 200, path
        assert get.headers["Content-Type"] == "text/html; charset=utf-8", path
        assert head.content == b"", path
        assert head.headers["Content-Length"] == str(len(get.content)), path
    sgqlc = {**demo_server.headers, "Accept": "application/json; charset=utf-8"}
    answer = demo_server.request(
        "POST", "/graphql", json={"query": "{ __typename }"}, headers=sgqlc
    )
    assert answer.status_code == 200 and answer.json() == {"data": {"__typename": "Query"}}
