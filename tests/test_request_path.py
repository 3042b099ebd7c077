"""The request path of issue 29/30: a factory that opens nothing (fork-safe), one caller per
request, flask-limiter's own limits, and the framing and proxy rules in front of them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from limits import parse

from people_service import ConfigError, create_app, credentials, service
from people_service.web import metrics, services

from .conftest import (
    GENEROUS,
    ROOT,
    SECRET,
    ServerProcess,
    cli,
    close_app,
    database,
    make_app,
    new_key,
)
from .test_wsgi_servers import WSGIServer, gunicorn  # noqa: F401 (a fixture)

PASSWORD = "correct horse battery staple"


def test_create_app_opens_nothing_and_the_first_request_prepares(tmp_path, sqlite_only):
    path = tmp_path / "people.db"
    app = create_app({"DATABASE": str(path), "RATE_LIMIT_STORAGE": "memory://"})
    try:
        assert not path.exists() and not (tmp_path / "secret.key").exists()
        assert app.test_client().get("/health").json == {"status": "ok", "database": "ok"}
        assert path.exists() and (tmp_path / "secret.key").exists()
    finally:
        close_app(app)


def package_hooks(app) -> list[str]:
    """The request hooks the package registers (flask-limiter's own are the library's)."""
    hooks = [app.before_request_funcs, app.after_request_funcs, app.teardown_request_funcs]
    return [
        f"{scope}:{function.__name__}"
        for registry in hooks
        for scope, functions in registry.items()
        for function in functions
        if function.__module__.startswith("people_service")
    ]


def test_the_package_registers_four_request_hooks_with_or_without_cors(app, tmp_path):
    hooks = ["None:check_options", "None:end_request", "None:finish_request", "None:start_request"]
    assert sorted(package_hooks(app)) == hooks
    (tmp_path / "cors").mkdir()
    with_cors = make_app(tmp_path / "cors", CORS_ORIGINS="https://app.example.org")
    try:
        assert sorted(package_hooks(with_cors)) == hooks  # flask-cors's own is the library's
    finally:
        close_app(with_cors)


def test_the_cli_never_imports_flask(tmp_path):
    db = database(tmp_path)
    cli("keys", "create", "--name", "ci", db=db)
    code = (
        "import sys; from people_service.cli import main; "
        f"status = main(['keys', 'list', '--db', {db!r}]); "
        "assert 'flask' not in sys.modules, 'flask imported'; sys.exit(status)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr


def test_gunicorn_preload_forks_answer_each_request_with_its_own_person(
    tmp_path,
    gunicorn,  # noqa: F811
):
    db = database(tmp_path)
    key = cli("keys", "create", "--name", "ci", db=db).stdout.split()[-1]
    env = {"PEOPLE_SERVICE_RATE_LIMIT": GENEROUS, "PEOPLE_SERVICE_LOG_LEVEL": "WARNING"}
    with WSGIServer([*gunicorn, "--preload", "-w", "3", "--threads", "4", "app:app"], db, env) as s:
        headers = {"X-API-Key": key}
        ids = []
        for n in range(30):
            made = requests.post(s.url + "/person", json={"name": f"P{n}"}, headers=headers)
            assert made.status_code == 201
            ids.append(made.json()["id"])

        def get(n):
            person_id = ids[n % len(ids)]
            answer = requests.get(f"{s.url}/person/{person_id}", headers=headers)
            return answer.status_code, answer.json().get("id"), person_id

        with ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(get, range(300)))
        assert all(status == 200 and got == wanted for status, got, wanted in answers)


def test_a_chunked_body_under_gunicorn_is_refused_with_411_before_it_is_read(
    tmp_path,
    sqlite_only,
    gunicorn,  # noqa: F811
):
    db = database(tmp_path)
    key = cli("keys", "create", "--name", "ci", db=db).stdout.split()[-1]
    with WSGIServer([*gunicorn, "app:app"], db) as server:
        host, port = server.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(
                b"POST /person HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"X-API-Key: {key}\r\n".encode()
                + b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                + b"".join(b"1\r\n" + bytes([c]) + b"\r\n" for c in b'{"name": "Ada"}')
                + b"0\r\n\r\n"
            )
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 411"), answer[:200]
        assert b"application/problem+json" in answer
        listed = requests.get(server.url + "/people", headers={"X-API-Key": key})
        assert listed.json() == []  # nothing was created


def test_static_assets_are_never_charged_and_a_page_counts_one(tmp_path):
    app = make_app(tmp_path, ANONYMOUS_RATE_LIMIT="3/day")
    try:
        client = app.test_client()
        for _ in range(5):
            for path in ("/favicon.ico", "/static/pages/explorer.css"):
                answer = client.get(path)
                answer.close()
                assert answer.status_code in (200, 204)
                assert "X-RateLimit-Limit" not in answer.headers
        page = client.get("/", headers={"Accept": "text/html"})
        assert page.status_code == 200 and page.headers["X-RateLimit-Remaining"] == "2"
    finally:
        close_app(app)


@pytest.mark.parametrize("trusted", ["10.0.0.0/8", "192.0.2.1, 10.0.0.0/8", "0.0.0.0/0"])
def test_trusted_proxy_takes_networks(tmp_path, trusted):
    app = make_app(tmp_path, TRUSTED_PROXY=trusted, ANONYMOUS_RATE_LIMIT="1/day")
    try:
        client = app.test_client()
        proxy = {"REMOTE_ADDR": "10.1.2.3"}

        def get(address):
            forwarded = {"X-Forwarded-For": address}
            return client.get("/people", headers=forwarded, environ_base=proxy).status_code

        assert [get("9.9.9.9"), get("9.9.9.9"), get("8.8.8.8")] == [401, 429, 401]
    finally:
        close_app(app)


def test_an_unparseable_trusted_proxy_stops_start_up_with_one_line(tmp_path):
    with pytest.raises(ConfigError, match="TRUSTED_PROXY"):
        make_app(tmp_path, TRUSTED_PROXY="10.0.0.0/33")
    env = {**os.environ, "PEOPLE_SERVICE_TRUSTED_PROXY": "proxy.example"}
    done = subprocess.run(
        [sys.executable, "-m", "people_service.cli", "keys", "list", "--db", database(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    if done.returncode != 0:  # the CLI checks the settings as it opens the database
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1


def login(client, username="ada", password=PASSWORD):
    return client.post("/auth/token", json={"username": username, "password": password})


def test_a_login_429_has_the_headers_of_the_limit_that_refused(tmp_path):
    app = make_app(tmp_path, AUTH_RATE_LIMIT="2/day", ANONYMOUS_RATE_LIMIT="50/day")
    try:
        credentials.create_user(services(app).store, "ada", PASSWORD)
        client = app.test_client()
        assert [login(client).status_code for _ in range(2)] == [200, 200]
        refused = login(client)
        assert refused.status_code == 429
        assert refused.headers["X-RateLimit-Limit"] == "2"
        assert refused.headers["X-RateLimit-Remaining"] == "0"
        assert int(refused.headers["Retry-After"]) >= 1
        assert refused.json["detail"] == "Too many logins (2 per 1 day)."
        assert login(client, "bob").status_code == 401  # another username has its own
    finally:
        close_app(app)


def test_the_per_username_login_limit_holds_when_the_counters_fail(tmp_path):
    """Nothing listens on port 9: flask-limiter counts in memory, with the same limits."""
    app = make_app(
        tmp_path,
        RATE_LIMIT_STORAGE="redis://127.0.0.1:9",
        AUTH_RATE_LIMIT="2/day",
        ANONYMOUS_RATE_LIMIT="50/day",
    )
    try:
        credentials.create_user(services(app).store, "ada", PASSWORD)
        client = app.test_client()
        assert [login(client).status_code for _ in range(3)] == [200, 200, 429]
    finally:
        close_app(app)


def test_a_refused_request_costs_no_window_of_a_multi_window_key(tmp_path):
    app = make_app(tmp_path)
    try:
        key = new_key(app, "a", rate_limit="5/minute;2/day")
        client = app.test_client()
        statuses = [client.get("/people", headers={"X-API-Key": key}).status_code for _ in range(4)]
        assert statuses == [200, 200, 429, 429]
        ext = services(app)
        caller = credentials.caller_from_key(ext.store, key)
        prefix = app.config["RATE_LIMIT_PREFIX"]
        minute = ext.limiter.limiter.get_window_stats(
            parse("5/minute"), prefix, caller.key, "global"
        )
        assert minute.remaining == 3  # the two accepted requests only
    finally:
        close_app(app)


def test_a_failing_graphql_price_reaches_the_client_and_costs_one(tmp_path):
    app = make_app(tmp_path, RATE_LIMIT="100/day")
    try:
        key = {"X-API-Key": new_key(app, "a")}
        client = app.test_client()
        answer = client.post("/graphql", json=[{"query": "{ me { name } }"}], headers=key)
        assert answer.json["errors"][0]["extensions"]["code"] == "BAD_REQUEST"
        assert "Batched" in answer.json["errors"][0]["message"]
        assert answer.headers["X-RateLimit-Remaining"] == "99"
    finally:
        close_app(app)


def test_415_says_what_is_missing(client, headers):
    answer = client.post("/person", data=b'{"name": "Ada"}', headers=headers)
    assert answer.status_code == 415
    assert answer.json["detail"] == (
        "The body must be application/json, and the request has no Content-Type."
    )


def test_the_operation_name_cap_holds_per_process(monkeypatch):
    monkeypatch.setattr(metrics, "MAX_OPERATION_NAMES", 3)
    known: set = set()
    labels = [metrics.operation_label(f"Op{n % 5}", known) for n in range(10)]
    assert labels == ["Op0", "Op1", "Op2", "other", "other"] * 2
    assert metrics.operation_label(None, known) == "anonymous"
    assert metrics.operation_label("bad name!", known) == "other"


def test_a_forked_child_does_not_flush_its_parents_usage(tmp_path, sqlite_only):
    app = make_app(tmp_path)
    try:
        key = new_key(app, "a")
        client = app.test_client()
        client.get("/people", headers={"X-API-Key": key})
        pid = os.fork()
        if pid == 0:  # the child's exit runs no atexit: close as a server's worker would
            services(app).close()
            os._exit(0)
        os.waitpid(pid, 0)
        close_app(app)
        store = services(app).store
        caller = credentials.caller_from_key(store, key)
        assert store.usage(caller.kind, caller.id)["request_count"] == 1
    finally:
        close_app(app)


def test_secret_from_config_signs_tokens(tmp_path):
    app = make_app(tmp_path)
    try:
        credentials.create_user(services(app).store, "ada", PASSWORD)
        assert services(app).token_secret == SECRET
        assert service  # the service module is importable beside the web layer
    finally:
        close_app(app)


def test_share_metrics_leaves_a_given_directory_to_its_operator(tmp_path, monkeypatch):
    """Another instance may share it: prometheus-client leaves emptying it to the operator."""
    from people_service import server

    live = tmp_path / f"counter_{os.getpid()}.db"
    dead = tmp_path / "counter_4194303.db"  # above any pid_max: no such process
    live.write_bytes(b"")
    dead.write_bytes(b"")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    server.share_metrics()
    assert live.exists() and dead.exists()
    assert os.environ["PROMETHEUS_MULTIPROC_DIR"] == str(tmp_path)


# -- mount prefixes, the front page, hints, CORS origins and exact numbers, by real HTTP ------


BROWSER = "text/html,application/xhtml+xml"


def cli_key(db, name="web", scopes="read,write") -> str:
    result = cli("keys", "create", "--name", name, "--scopes", scopes, db=db)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = database(tmp_path_factory.mktemp("r3web"))
    server = ServerProcess(db, env={"PEOPLE_SERVICE_CORS_ORIGINS": "http://[::1]:3000"})
    server.key = cli_key(db)
    server.start()
    yield server
    server.stop()


def page(url: str, **headers) -> str:
    response = requests.get(url, headers={"Accept": BROWSER, **headers}, timeout=30)
    assert response.status_code == 200, response.text
    return response.text


def test_waitress_url_prefix_is_used_by_links_location_and_pages(tmp_path, sqlite_only):
    db = database(tmp_path)
    key = cli_key(db)
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
