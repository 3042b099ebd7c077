"""The login handshake and bearer tokens, through the real server: every claim check of the JWT."""

from __future__ import annotations

import base64
import json
import time
from concurrent.futures import ThreadPoolExecutor

import jwt
import pytest

from people_service import credentials
from people_service.web import services

from .conftest import GENEROUS, SECRET, ServerProcess, cli, close_app, database, make_app

PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def server(tmp_path_factory, backend):
    db = database(tmp_path_factory.mktemp("tokens"))
    for username, scopes in (("ada", "read,write"), ("reader", "read")):
        made = cli(
            "users",
            "create",
            username,
            "--scopes",
            scopes,
            "--password-stdin",
            db=db,
            input=PASSWORD + "\n",
        )
        assert made.returncode == 0, made.stderr
    env = {
        "PEOPLE_SERVICE_RATE_LIMIT": GENEROUS,
        "PEOPLE_SERVICE_ANONYMOUS_RATE_LIMIT": GENEROUS,
        "PEOPLE_SERVICE_AUTH_RATE_LIMIT": GENEROUS,
    }
    server = ServerProcess(db, env=env).start()
    yield server
    server.stop()


def login(server, username="ada", password=PASSWORD, form=False):
    body = {"username": username, "password": password}
    if form:
        return server.request("POST", "/auth/token", data=body)
    return server.request("POST", "/auth/token", json=body)


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def claims(**overrides):
    now = int(time.time())
    base = {
        "sub": "ada",
        "scope": "read write",
        "iat": now,
        "exp": now + 600,
        "iss": "people-service",
    }
    base.update(overrides)
    return {key: value for key, value in base.items() if value is not None}


def test_handshake_gives_a_bearer_token(server):
    response = login(server)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"access_token", "token_type", "expires_in"}
    assert body["token_type"] == "Bearer" and body["expires_in"] == 3600
    assert response.headers["Cache-Control"] == "no-store"
    decoded = jwt.decode(
        body["access_token"], SECRET, algorithms=["HS256"], issuer="people-service"
    )
    assert decoded["sub"] == "ada" and decoded["scope"] == "read write"
    assert decoded["exp"] - decoded["iat"] == 3600
    assert jwt.get_unverified_header(body["access_token"])["alg"] == "HS256"


def test_form_encoded_handshake_works_too(server):
    assert login(server, form=True).status_code == 200


def test_token_identifies_the_user(server):
    token = login(server).json()["access_token"]
    me = server.request("GET", "/me", headers=bearer(token)).json()
    assert me["kind"] == "user" and me["name"] == "ada" and me["scopes"] == ["read", "write"]
    created = server.request("POST", "/person", json={"name": "By token"}, headers=bearer(token))
    assert created.status_code == 201
    sent = server.request(
        "POST",
        "/message",
        json={"person_id": created.json()["id"], "content": "hi"},
        headers=bearer(token),
    )
    assert sent.json()["sender"] == "ada"


def test_wrong_password_and_unknown_user_get_the_same_401(server):
    wrong = login(server, password="nope")
    unknown = login(server, username="nobody")
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.json() == unknown.json()
    assert wrong.headers["WWW-Authenticate"] == unknown.headers["WWW-Authenticate"]


def test_unknown_user_costs_a_password_hash_too(tmp_path, monkeypatch):
    app = make_app(tmp_path)
    try:
        store = services(app).store
        cheap = app.config["PASSWORD_HASH_METHOD"]
        credentials.create_user(store, "ada", PASSWORD, method=cheap)
        checks = []
        original = credentials.check_password
        monkeypatch.setattr(
            credentials, "check_password", lambda *a: checks.append(1) or original(*a)
        )
        assert credentials.login(store, "nobody", PASSWORD, cheap) is None
        assert credentials.login(store, "ada", "wrong", cheap) is None
        assert credentials.login(store, "ada", PASSWORD, cheap)["username"] == "ada"
        assert len(checks) == 3
    finally:
        close_app(app)


def test_passwords_are_stored_with_a_slow_salted_hash(tmp_path):
    app = make_app(tmp_path)
    try:
        store = services(app).store
        credentials.create_user(store, "a", PASSWORD)
        credentials.create_user(store, "b", PASSWORD)
        first, second = (
            store.user_by_name("a")["password_hash"],
            store.user_by_name("b")["password_hash"],
        )
        assert first.startswith("pbkdf2:sha256:600000$")
        assert first != second and PASSWORD not in first
    finally:
        close_app(app)


@pytest.mark.parametrize("body", [{}, {"username": "ada"}, {"username": "", "password": "x"}, []])
def test_bad_handshake_bodies_are_422(server, body):
    assert server.request("POST", "/auth/token", json=body).status_code == 422


def forged(payload: dict, header: dict) -> str:
    def part(data):
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part(header)}.{part(payload)}."


BAD_TOKENS = {
    "alg none": lambda: forged(claims(), {"alg": "none", "typ": "JWT"}),
    "HS512": lambda: jwt.encode(claims(), SECRET + SECRET, algorithm="HS512"),
    "other secret": lambda: jwt.encode(
        claims(), "another-secret-that-is-long-enough-000000", algorithm="HS256"
    ),
    "expired": lambda: jwt.encode(
        claims(iat=int(time.time()) - 7200, exp=int(time.time()) - 3600), SECRET, algorithm="HS256"
    ),
    "missing exp": lambda: jwt.encode(claims(exp=None), SECRET, algorithm="HS256"),
    "missing iat": lambda: jwt.encode(claims(iat=None), SECRET, algorithm="HS256"),
    "wrong issuer": lambda: jwt.encode(claims(iss="someone-else"), SECRET, algorithm="HS256"),
    "unknown user": lambda: jwt.encode(claims(sub="mallory"), SECRET, algorithm="HS256"),
    "not a jwt": lambda: "abc.def.ghi",
    "jku header": lambda: jwt.encode(
        claims(), "x" * 40, algorithm="HS256", headers={"jku": "http://127.0.0.1:9/"}
    ),
}


@pytest.mark.parametrize("name", list(BAD_TOKENS))
def test_invalid_tokens_are_401(server, name):
    response = server.request("GET", "/people", headers=bearer(BAD_TOKENS[name]()))
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]
    assert response.headers["Content-Type"] == "application/problem+json"


def test_tampered_token_is_401(server):
    token = login(server).json()["access_token"]
    header, payload, signature = token.split(".")
    data = json.loads(base64.urlsafe_b64decode(payload + "=="))
    data["scope"] = "read write admin"
    changed = base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()
    assert (
        server.request(
            "GET", "/people", headers=bearer(f"{header}.{changed}.{signature}")
        ).status_code
        == 401
    )
    assert server.request("GET", "/people", headers=bearer(token)).status_code == 200


@pytest.mark.parametrize("value", ["Bearer", "Bearer ", "Bearer a b", "Basic YWRhOnB3", "Token x"])
def test_malformed_authorization_headers_are_401(server, value):
    assert server.request("GET", "/people", headers={"Authorization": value}).status_code == 401


def test_tokens_in_the_url_are_ignored(server):
    token = login(server).json()["access_token"]
    for param in ("access_token", "token", "api_key"):
        assert server.request("GET", f"/people?{param}={token}").status_code == 401


def test_a_token_never_grants_more_than_its_user_has(server):
    token = login(server, "reader").json()["access_token"]
    assert server.request("GET", "/people", headers=bearer(token)).status_code == 200
    refused = server.request("POST", "/person", json={"name": "x"}, headers=bearer(token))
    assert refused.status_code == 403
    assert 'error="insufficient_scope"' in refused.headers["WWW-Authenticate"]
    issued = jwt.decode(token, SECRET, algorithms=["HS256"], issuer="people-service")
    boosted = jwt.encode({**issued, "scope": "read write admin"}, SECRET, algorithm="HS256")
    assert (
        server.request("POST", "/person", json={"name": "x"}, headers=bearer(boosted)).status_code
        == 403
    )


def test_tokens_survive_a_restart(tmp_path):
    db = database(tmp_path)
    cli("users", "create", "ada", "--password-stdin", db=db, input=PASSWORD + "\n")
    env = {"PEOPLE_SERVICE_SECRET_KEY": ""}  # no configured secret: secret.key beside the database
    first = ServerProcess(db, env=env).start()
    token = login(first).json()["access_token"]
    first.stop()
    second = ServerProcess(db, env=env).start()
    try:
        assert second.request("GET", "/me", headers=bearer(token)).json()["name"] == "ada"
    finally:
        second.stop()


def test_handshake_is_throttled_per_address_and_username(tmp_path):
    db = database(tmp_path)
    cli("users", "create", "ada", "--password-stdin", db=db, input=PASSWORD + "\n")
    env = {
        "PEOPLE_SERVICE_AUTH_RATE_LIMIT": "3/day",
        "PEOPLE_SERVICE_ANONYMOUS_RATE_LIMIT": GENEROUS,
    }
    server = ServerProcess(db, env=env).start()
    try:
        statuses = [login(server, password="guess").status_code for _ in range(3)]
        assert statuses == [401, 401, 401]
        refused = login(server)  # even the right password, once over the limit
        assert refused.status_code == 429
        assert int(refused.headers["Retry-After"]) >= 1
        assert refused.headers["Content-Type"] == "application/problem+json"
        assert login(server, "someone-else").status_code == 401  # another username's own budget
    finally:
        server.stop()


def test_a_signed_token_whose_subject_is_a_lone_surrogate_is_401(tmp_path):
    app = make_app(tmp_path)
    try:
        now = int(time.time())
        claims = {"sub": "\ud800", "scope": "read", "iat": now, "exp": now + 60}
        token = jwt.encode({**claims, "iss": "people-service"}, SECRET, algorithm="HS256")
        response = app.test_client().get("/me", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 401
        assert response.headers["Content-Type"] == "application/problem+json"
    finally:
        close_app(app)


def test_a_deleted_users_tokens_stay_refused_when_the_name_is_taken_again(server):
    """A token names its user by username and generation; a new user of the same name starts
    at generation 0 again, so without more the old token would stand for the new user."""
    made = cli("users", "create", "eve", "--password-stdin", db=server.db, input=PASSWORD + "\n")
    assert made.returncode == 0, made.stderr
    old = login(server, "eve").json()["access_token"]
    assert server.request("GET", "/me", headers=bearer(old)).status_code == 200
    assert cli("users", "delete", "eve", db=server.db).returncode == 0
    assert server.request("GET", "/me", headers=bearer(old)).status_code == 401
    again = cli(
        "users",
        "create",
        "eve",
        "--scopes",
        "read",
        "--password-stdin",
        db=server.db,
        input="another password for the new eve\n",
    )
    assert again.returncode == 0, again.stderr
    assert server.request("GET", "/me", headers=bearer(old)).status_code == 401
    new = login(server, "eve", password="another password for the new eve")
    me = server.request("GET", "/me", headers=bearer(new.json()["access_token"]))
    assert me.status_code == 200 and me.json()["scopes"] == ["read"]


@pytest.fixture(scope="module")
def throttled(tmp_path_factory, backend):
    """A server whose address limit is tiny (2/second) and whose login limit is 3/minute."""
    db = database(tmp_path_factory.mktemp("throttled"))
    made = cli("users", "create", "ada", "--password-stdin", db=db, input=PASSWORD + "\n")
    assert made.returncode == 0, made.stderr
    env = {
        "PEOPLE_SERVICE_ANONYMOUS_RATE_LIMIT": "2/second",
        "PEOPLE_SERVICE_AUTH_RATE_LIMIT": "3/minute",
    }
    server = ServerProcess(db, env=env).start()
    yield server
    server.stop()


def wait_for_address_budget(server):
    """Until the address has requests again (a sliding window of one second)."""
    deadline = time.monotonic() + 10
    while server.request("GET", "/health").status_code == 200:  # /health is not limited
        if server.request("GET", "/openapi.json").status_code == 200:
            return
        assert time.monotonic() < deadline
        time.sleep(0.3)


def test_logins_refused_for_the_address_do_not_use_up_the_usernames_budget(throttled):
    """An address over its limit is refused before its body is read: before, each such refusal
    still charged the username's login limit, so a flood locked the user out."""
    wait_for_address_budget(throttled)
    # Sent together, so that a slow password check cannot let the one-second window slide by.
    with ThreadPoolExecutor(6) as pool:
        refused = list(pool.map(lambda _: login(throttled, password="guess").status_code, range(6)))
    assert refused.count(429) >= 4 and set(refused) <= {401, 429}
    time.sleep(2.1)
    wait_for_address_budget(throttled)
    assert login(throttled).status_code == 200


def test_a_login_body_over_16_kib_is_413_before_it_is_read(server):
    body = {"username": "bob", "password": PASSWORD, "padding": "x" * (16 * 1024)}
    for sent in ({"json": body}, {"data": body}):
        response = server.request("POST", "/auth/token", **sent)
        assert response.status_code == 413, response.text
        assert response.headers["Content-Type"] == "application/problem+json"
