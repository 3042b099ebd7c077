"""Rate limits of the third round: the login cap whatever the credentials, what a GraphQL 429
says, windows charged only for what they let through, and a private counters file."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import stat
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from limits import parse
from limits.storage import storage_from_string
from limits.strategies import STRATEGIES

from people_service import credentials
from people_service.web import services

from .conftest import GENEROUS, ServerProcess, cli, close_app, database, make_app, new_key

PASSWORD = "correct horse battery staple"


def login(server, headers=None):
    body = {"username": "ada", "password": PASSWORD}
    return server.request("POST", "/auth/token", json=body, headers=headers or {})


def test_a_key_or_token_does_not_lift_the_per_address_login_cap(tmp_path):
    """Each login costs a slow password hash: credentials sent along must not buy more tries
    than the address has (issue 18)."""
    db = database(tmp_path)
    made = cli("users", "create", "ada", "--password-stdin", db=db, input=PASSWORD + "\n")
    assert made.returncode == 0, made.stderr
    key = cli("keys", "create", "--name", "ci", db=db).stdout.split()[-1]
    env = {
        "PEOPLE_SERVICE_RATE_LIMIT": GENEROUS,
        "PEOPLE_SERVICE_ANONYMOUS_RATE_LIMIT": "4/day",
        "PEOPLE_SERVICE_AUTH_RATE_LIMIT": GENEROUS,
    }
    server = ServerProcess(db, env=env).start()
    try:
        first = login(server)
        assert first.status_code == 200
        token = {"Authorization": f"Bearer {first.json()['access_token']}"}
        assert login(server, token).status_code == 200
        assert [login(server, {"X-API-Key": key}).status_code for _ in range(3)] == [200, 200, 429]
        refused = login(server, token)
        assert refused.status_code == 429
        assert refused.headers["X-RateLimit-Limit"] == "4"
        assert int(refused.headers["Retry-After"]) >= 1
        # the key itself still has its own, generous budget elsewhere
        assert server.request("GET", "/me", headers={"X-API-Key": key}).status_code == 200
    finally:
        server.stop()


@pytest.fixture
def limited(tmp_path):
    app = make_app(tmp_path, RATE_LIMIT="10/day")
    yield app
    services(app).limiter.storage.close()
    close_app(app)


def test_a_graphql_429_says_what_the_query_costs_and_what_remains(limited):
    client, headers = limited.test_client(), {"X-API-Key": new_key(limited, "a")}
    eight = client.post("/graphql", json={"query": "{ people(limit: 8) { id } }"}, headers=headers)
    assert eight.status_code == 200 and eight.headers["X-RateLimit-Remaining"] == "2"
    five = client.post("/graphql", json={"query": "{ people(limit: 5) { id } }"}, headers=headers)
    assert five.status_code == 429
    assert five.headers["X-RateLimit-Remaining"] == "2"
    assert five.json["errors"][0]["message"] == (
        "This query costs 5, and the rate limit (10 per 1 day) has 2 left; retry after the "
        "Retry-After seconds, or ask for less."
    )
    rest = client.get("/people", headers=headers)
    assert rest.status_code == 200 and rest.headers["X-RateLimit-Remaining"] == "1"


def test_a_refusal_says_when_to_retry_and_never_zero(limited):
    client, headers = limited.test_client(), {"X-API-Key": new_key(limited, "a")}
    for _ in range(10):
        response = client.get("/people", headers=headers)
        assert response.status_code == 200  # SPEC 11a: it may say Retry-After, never 0
        assert int(response.headers.get("Retry-After", "1")) >= 1
    refused = client.get("/people", headers=headers)
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert refused.headers["Content-Type"] == "application/problem+json"


def test_a_refusal_by_a_shorter_window_charges_the_longer_one_nothing(tmp_path):
    app = make_app(tmp_path, RATE_LIMIT="100/day;3/hour")
    try:
        client, key = app.test_client(), new_key(app, "a")
        query = {"query": "{ people(limit: 2) { id } }"}
        statuses = [
            client.post("/graphql", json=query, headers={"X-API-Key": key}).status_code
            for _ in range(2)
        ]
        assert statuses == [200, 429]
        ext = services(app)
        caller = credentials.caller_from_key(ext.store, key)
        strategy, prefix = ext.limiter.limiter, app.config["RATE_LIMIT_PREFIX"]
        day = strategy.get_window_stats(parse("100/day"), prefix, caller.key, "global")
        assert day.remaining == 98  # the accepted query's 2, not the refused one's
        ext.limiter.storage.close()
    finally:
        close_app(app)


def test_the_counters_file_is_private(tmp_path, sqlite_only):
    storage = storage_from_string(f"sqlite://{tmp_path}/c.db")
    try:
        storage.incr("k", 60)
        for name in ("c.db", "c.db-wal", "c.db-shm", "c.db.lock"):
            assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o600, name
    finally:
        storage.close()


def test_a_readable_counters_file_is_made_private(tmp_path, sqlite_only):
    path = tmp_path / "c.db"
    path.touch(mode=0o644)
    path.chmod(0o644)
    storage = storage_from_string(f"sqlite://{path}")
    storage.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_counters_file_is_never_opened_through_a_symlink(tmp_path, sqlite_only):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "c.db").symlink_to(victim)
    with pytest.raises(OSError):
        storage_from_string(f"sqlite://{tmp_path}/c.db")
    assert victim.read_text() == "precious"


def test_the_counters_file_never_holds_a_tried_username(tmp_path, sqlite_only):
    app = make_app(tmp_path)
    try:
        body = {"username": "mallory-was-here", "password": "not the password at all"}
        assert app.test_client().post("/auth/token", json=body).status_code == 401
        path = services(app).limiter.storage.path
        services(app).limiter.storage.close()
        with sqlite3.connect(path) as conn:
            keys = [row[0] for row in conn.execute("SELECT key FROM counters")]
        assert any("/login:" in key for key in keys), keys
        assert not any("mallory" in key for key in keys), keys
    finally:
        close_app(app)


def test_writers_queue_on_the_lock_file_and_refusals_do_not_wait(tmp_path, sqlite_only):
    """A hit over the limit is refused on a read alone; an accepted one waits for the writer
    that holds `<file>.lock` (another process's) and goes through once it lets go."""
    storage = storage_from_string(f"sqlite://{tmp_path}/c.db")
    strategy = STRATEGIES["sliding-window-counter"](storage)
    item = parse("2/day")
    assert [strategy.hit(item, "full") for _ in range(3)] == [True, True, False]
    other = os.open(tmp_path / "c.db.lock", os.O_RDWR)  # another open file: flock conflicts
    fcntl.flock(other, fcntl.LOCK_EX)
    try:
        started = time.monotonic()
        assert not strategy.hit(item, "full")
        assert time.monotonic() - started < 2
        with ThreadPoolExecutor(1) as pool:
            accepted = pool.submit(strategy.hit, item, "free")
            time.sleep(0.3)
            assert not accepted.done()  # queued behind the other writer
            fcntl.flock(other, fcntl.LOCK_UN)
            assert accepted.result(timeout=10) is True
    finally:
        os.close(other)
        storage.close()
