"""GraphQL over HTTP: methods, media types, status codes, credentials, errors and the explorer."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from playwright.sync_api import expect

from people_service.graphql import resolvers

from .conftest import ServerProcess, close_app, database, demo_people, make_app, new_key
from .test_browser import Session, chromium, run_in_playground  # noqa: F401 (a fixture)
from .test_graphql_limits import charged, fresh_key

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


# -- the explorer page (issue 21) --------------------------------------------------------------

BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}


@pytest.mark.parametrize("explorer", ["playground", "graphiql"])
def test_a_claimed_mount_prefix_never_reaches_the_cached_explorer(tmp_path, explorer):
    """Under gunicorn a client's SCRIPT_NAME header becomes the request's prefix: the page is
    cached for everyone, so it holds no prefix at all (its URLs are relative to /graphql)."""
    from .conftest import close_app, make_app

    app = make_app(tmp_path, EXPLORER=explorer)
    try:
        client = app.test_client()
        poisoned = client.get("/graphql", headers=BROWSER, environ_base={"SCRIPT_NAME": "/evil"})
        assert poisoned.status_code == 200
        page = client.get("/graphql", headers=BROWSER)
        assert page.data == poisoned.data
        html = page.get_data(as_text=True)
        assert "/evil" not in html and 'src="/' not in html and 'href="/' not in html
        assert 'id="key-hint"' in html and "X-API-Key" in html
        # mounted at /api, every asset the page names resolves under /api
        mounted = {"SCRIPT_NAME": "/api"}
        for url in re.findall(r'(?:src|href)="(static/[^"]+)"', html):
            with client.get("/" + url.replace("&amp;", "&"), environ_base=mounted) as asset:
                assert asset.status_code == 200, url
    finally:
        close_app(app)


# -- automatic persisted queries (issue 23) ----------------------------------------------------


def apq(query: str) -> tuple[str, dict]:
    digest = hashlib.sha256(query.encode()).hexdigest()
    return digest, {"persistedQuery": {"version": 1, "sha256Hash": digest}}


def get(server, headers, **params):
    params = {k: json.dumps(v) if isinstance(v, dict) else v for k, v in params.items()}
    return server.request("GET", "/graphql", params=params, headers=headers)


def test_persisted_queries_follow_apollos_protocol(demo):
    headers = fresh_key(demo)
    query = '{ person(id: "1") { name } } # ' + uuid.uuid4().hex
    digest, extensions = apq(query)
    # 1. the hash alone: not known yet (HTTP 200, as Apollo's clients expect)
    unknown = get(demo, headers, extensions=extensions)
    assert unknown.status_code == 200
    assert charged(unknown) == 1  # as any request
    assert unknown.json() == {
        "errors": [
            {
                "message": "PersistedQueryNotFound",
                "extensions": {"code": "PERSISTED_QUERY_NOT_FOUND"},
            }
        ]
    }
    # 2. the query with its hash: it runs and is stored
    stored = post_json(demo, headers, {"query": query, "extensions": extensions})
    assert stored.json() == {"data": {"person": {"name": "Ada Lovelace"}}}
    # 3. the hash alone now runs it, by GET with an ETag, and If-None-Match gets 304
    ran = get(demo, headers, extensions=extensions)
    assert ran.status_code == 200
    assert ran.json() == {"data": {"person": {"name": "Ada Lovelace"}}}
    etag = ran.headers["ETag"]
    again = get(demo, {**headers, "If-None-Match": etag}, extensions=extensions)
    assert again.status_code == 304 and again.content == b""
    assert again.headers["ETag"] == etag
    # and by POST
    posted = post_json(demo, headers, {"extensions": extensions})
    assert posted.json() == {"data": {"person": {"name": "Ada Lovelace"}}}


def test_a_hash_that_is_not_the_querys_is_400_and_stores_nothing(demo):
    headers = fresh_key(demo)
    query = "{ me { name } } # " + uuid.uuid4().hex
    digest, extensions = apq(query + " ")
    refused = post_json(demo, headers, {"query": query, "extensions": extensions})
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["extensions"]["code"] == "BAD_REQUEST"
    unknown = get(demo, headers, extensions=extensions)
    assert unknown.json()["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_FOUND"


@pytest.mark.parametrize(
    "persisted",
    [
        {"version": 2, "sha256Hash": "0" * 64},
        {"version": True, "sha256Hash": "0" * 64},
        {"version": 1, "sha256Hash": "X" * 64},
        "x",
    ],
)
def test_malformed_persisted_query_extensions_are_400(client, headers, persisted):
    response = client.post(
        "/graphql", json={"extensions": {"persistedQuery": persisted}}, headers=headers
    )
    assert response.status_code == 400
    assert response.json["errors"][0]["extensions"]["code"] == "BAD_REQUEST"


def test_a_persisted_mutation_by_get_stays_refused(demo):
    headers = fresh_key(demo)
    query = 'mutation { sendMessage(personId: "1", content: "hi") { id } } # ' + uuid.uuid4().hex
    digest, extensions = apq(query)
    stored = post_json(demo, headers, {"query": query, "extensions": extensions})
    assert "errors" not in stored.json()
    refused = get(demo, headers, extensions=extensions)
    assert refused.status_code == 405 and refused.headers["Allow"] == "POST"


def test_persisted_queries_pass_every_limit_and_are_stored_only_when_valid(demo):
    headers = fresh_key(demo)
    for query in ("{ people(limit: 1000) { friends(limit: 100) { id } } }", "{ nosuch }"):
        query += " # " + uuid.uuid4().hex
        digest, extensions = apq(query)
        refused = post_json(demo, headers, {"query": query, "extensions": extensions})
        code = refused.json()["errors"][0]["extensions"]["code"]
        assert code in ("QUERY_TOO_COMPLEX", "GRAPHQL_VALIDATION_FAILED")
        unknown = get(demo, headers, extensions=extensions)
        assert unknown.json()["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_FOUND"


def test_persisted_queries_survive_a_restart_and_are_shared(tmp_path):
    from .conftest import ServerProcess, start_demo

    query = "{ me { kind } }"
    digest, extensions = apq(query)
    first = start_demo(tmp_path)
    try:
        headers = first.headers  # the demo key the server printed
        stored = post_json(first, headers, {"query": query, "extensions": extensions})
        assert stored.json() == {"data": {"me": {"kind": "api_key"}}}
    finally:
        first.stop()
    second = ServerProcess(first.db).start()
    try:
        ran = get(second, headers, extensions=extensions)
        assert ran.json() == {"data": {"me": {"kind": "api_key"}}}
    finally:
        second.stop()


def test_the_store_keeps_a_bounded_number_of_documents(store):
    for index in range(5):
        store.put_persisted(f"{index:064x}", f"{{ a{index} }}", f"k{index}", keep=3)
    kept = [store.get_persisted(f"{index:064x}") for index in range(5)]
    assert kept == [None, None, "{ a2 }", "{ a3 }", "{ a4 }"]


def test_the_store_keeps_a_bounded_number_of_documents_per_caller_oldest_out(store):
    import time

    def digest(index):
        time.sleep(0.002)  # the store's clock has milliseconds: one use after the other
        return f"{index:064x}"

    store.put_persisted(digest(99), "{ other }", "someone", keep=10, per_owner=3)
    for index in range(3):
        store.put_persisted(digest(index), f"{{ a{index} }}", "k", keep=10, per_owner=3)
    store.put_persisted(digest(3), "{ a3 }", "k", keep=10, per_owner=3)
    kept = [store.get_persisted(digest(index)) for index in (0, 1, 2, 3, 99)]
    assert kept == [None, "{ a1 }", "{ a2 }", "{ a3 }", "{ other }"]  # only k's own went


def test_a_stored_hash_is_not_written_again(store):
    from .conftest import count_statements

    store.put_persisted("a" * 64, "{ me { name } }", "k")
    statements = []
    again = count_statements(store, lambda: store.put_persisted("a" * 64, "{ me { name } }", "k"))
    used = count_statements(store, lambda: statements.append(store.get_persisted("a" * 64)))
    assert (again, used) == (1, 1)  # one SELECT each, no write


def post_json(server, headers, body):
    return server.request("POST", "/graphql", json=body, headers=headers)


APQ_CLIENT = Path(__file__).parent / "apq"


@pytest.fixture(scope="module")
def apollo(tmp_path_factory):
    """Apollo Client and its persisted-queries link, installed from npm into a temp folder."""
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip("node and npm are not installed")
    folder = tmp_path_factory.mktemp("apq")
    for name in ("package.json", "apq-client.mjs"):
        shutil.copy(APQ_CLIENT / name, folder / name)
    installed = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--prefer-offline"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if installed.returncode != 0:
        pytest.skip(f"npm install failed: {installed.stderr[-300:]}")
    return folder


def test_apollo_clients_persisted_query_link_works_unchanged(apollo, demo_server):
    """GET with the hash (not found), POST with the query, then GET with the hash alone."""
    ran = subprocess.run(
        ["node", "apq-client.mjs", f"{demo_server.url}/graphql", demo_server.key],
        cwd=apollo,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert report["results"] == ["Ada Lovelace", "Ada Lovelace"]
    requests = [(seen["method"], seen["status"], seen["hasQuery"]) for seen in report["seen"]]
    assert requests == [("GET", 200, False), ("POST", 200, True), ("GET", 200, False)]


def test_one_caller_flooding_persisted_queries_evicts_only_its_own(demo, monkeypatch):
    """SPEC 11b: documents are bounded per caller as well as in total, least recently used out."""
    from people_service.graphql import view

    monkeypatch.setattr(view, "PERSISTED_KEEP_PER_CALLER", 3)
    other, flooder = fresh_key(demo), fresh_key(demo)
    theirs = "{ me { name } } # " + uuid.uuid4().hex
    post_json(demo, other, {"query": theirs, "extensions": apq(theirs)[1]})
    flood = ["{ me { name } } # " + uuid.uuid4().hex for _ in range(5)]
    for query in flood:
        stored = post_json(demo, flooder, {"query": query, "extensions": apq(query)[1]})
        assert "errors" not in stored.json()
    found = ["errors" not in get(demo, flooder, extensions=apq(query)[1]).json() for query in flood]
    assert found == [False, False, True, True, True]  # its own least recently used went
    kept = get(demo, flooder, extensions=apq(theirs)[1]).json()  # any caller may run a hash
    assert "errors" not in kept and kept["data"]["me"]["name"]


# -- the explorers in real Chromium at the default rate limits, as a new user meets them ----

RELOADS = 4


@pytest.fixture(params=["playground", "graphiql"])
def default_server(request, chromium, tmp_path_factory):  # noqa: F811
    """The demo with every setting at its default but the explorer."""
    env = {"PEOPLE_SERVICE_EXPLORER": request.param}
    server = ServerProcess(database(tmp_path_factory.mktemp("explorer")), env=env).start()
    server.key = server.wait_for_output(lambda line: line.startswith("ps_"))
    server.explorer = request.param
    yield server
    server.stop()


def statuses(session) -> list[int]:
    return [status for status, path in session.answers if path == "/graphql"]


def test_the_explorer_says_how_to_add_a_key_and_reloads_without_429(chromium, default_server):  # noqa: F811
    server = default_server
    session = Session(chromium, server)
    session.answers = []
    session.context.on(
        "response",
        lambda response: session.answers.append(
            (response.status, response.url.split(server.url, 1)[-1].split("?")[0])
        ),
    )
    page = session.page
    try:
        session.open("/graphql")
        hint = page.locator("#key-hint")
        # 1. without a key: the schema request is refused, and the page says what to do
        expect(hint).to_be_visible()
        expect(hint).to_contain_text('{"X-API-Key": "your key"}')
        assert 401 in statuses(session)
        # 2. the key in the headers editor, then a query
        if server.explorer == "playground":
            answer = run_in_playground(page, server.key, '{ person(id: "1") { name } }')
            expect(answer).to_contain_text('"name": "Ada Lovelace"')
        else:
            page.locator("#graphiql").get_by_text("Headers", exact=True).click()
            page.locator(".graphiql-editor-tool .CodeMirror").last.click()
            page.keyboard.insert_text(json.dumps({"X-API-Key": server.key}))
            page.locator(".graphiql-query-editor .CodeMirror").click()
            page.keyboard.press("Control+A")
            page.keyboard.insert_text('{ person(id: "1") { name } }')
            page.get_by_role("button", name="Execute query (Ctrl-Enter)").click()
            expect(page.locator(".graphiql-response")).to_contain_text('"name": "Ada Lovelace"')
        expect(hint).to_be_hidden()
        # 3. reloads: each loads the schema again, with the key the explorer kept (Playground)
        for _ in range(RELOADS):
            before = len(session.answers)
            page.reload()
            if server.explorer == "playground":
                page.wait_for_function(
                    "n => window.performance.getEntriesByType('resource')"
                    ".filter(e => e.name.endsWith('/graphql')).length >= 1",
                    arg=1,
                )
                expect(page.locator(".CodeMirror").first).to_be_visible()
                page.wait_for_timeout(500)
            else:
                expect(page.locator(".graphiql-query-editor")).to_be_visible()
            assert len(session.answers) > before
        assert 429 not in statuses(session), session.answers
        introspections = statuses(session).count(200)
        assert introspections >= 2, session.answers
        # what all of it cost: at most 100 an introspection (SPEC 11a) of the key's 600 a
        # minute, the query and this one 2 each
        me = session.context.request.get(
            f"{server.url}/graphql?query={{me{{name}}}}", headers={"X-API-Key": server.key}
        )
        assert me.status == 200
        assert int(me.headers["x-ratelimit-remaining"]) >= 600 - 100 * introspections - 4
        session.check(failed={(401, "/graphql")}, logged=("401",))
    finally:
        session.close()
