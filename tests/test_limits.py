"""Rate limits: per caller, with headers, GraphQL charged by cost, and shared through Redis."""

from __future__ import annotations

import fcntl
import itertools
import os
import sqlite3
import stat
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from limits import parse
from limits.storage import storage_from_string
from limits.strategies import STRATEGIES

from people_service import credentials
from people_service.web import services

from .conftest import GENEROUS, ServerProcess, cli, close_app, database, make_app, new_key


@pytest.fixture
def limited(tmp_path):
    """An app whose default limit is 5 a day (a day: no window edge inside a test)."""
    app = make_app(tmp_path, RATE_LIMIT="5/day", ANONYMOUS_RATE_LIMIT="3/day")
    yield app
    close_app(app)


def test_every_limited_answer_carries_the_headers(limited):
    client = limited.test_client()
    headers = {"X-API-Key": new_key(limited, "a")}
    for expected_remaining in (4, 3):
        response = client.get("/people", headers=headers)
        assert response.headers["X-RateLimit-Limit"] == "5"
        assert response.headers["X-RateLimit-Remaining"] == str(expected_remaining)
        assert int(response.headers["X-RateLimit-Reset"]) > 0
        assert "Retry-After" not in response.headers  # only a 429 or a 503 says when to retry
    made = client.post("/person", json={"name": "Ada"}, headers=headers)
    assert made.status_code == 201 and "Retry-After" not in made.headers


def test_keys_have_separate_budgets(limited):
    client = limited.test_client()
    first, second = {"X-API-Key": new_key(limited, "a")}, {"X-API-Key": new_key(limited, "b")}
    assert [client.get("/people", headers=first).status_code for _ in range(6)] == [200] * 5 + [429]
    assert client.get("/people", headers=second).status_code == 200


def test_the_budget_is_shared_across_endpoints(limited):
    client = limited.test_client()
    headers = {"X-API-Key": new_key(limited, "a")}
    client.get("/people", headers=headers)
    client.get("/me", headers=headers)
    client.post("/person", json={"name": "x"}, headers=headers)
    client.get("/person/1", headers=headers)
    assert client.get("/people", headers=headers).headers["X-RateLimit-Remaining"] == "0"
    assert (
        client.post("/graphql", json={"query": "{ me { name } }"}, headers=headers).status_code
        == 429
    )


def test_a_key_created_with_its_own_limit_keeps_it(limited):
    client = limited.test_client()
    roomy = {"X-API-Key": new_key(limited, "roomy", rate_limit="50/day")}
    statuses = [client.get("/people", headers=roomy).status_code for _ in range(10)]
    assert statuses == [200] * 10
    assert client.get("/people", headers=roomy).headers["X-RateLimit-Limit"] == "50"


def test_the_default_limit_is_read_at_request_time(limited):
    client = limited.test_client()
    headers = {"X-API-Key": new_key(limited, "a")}
    assert client.get("/people", headers=headers).headers["X-RateLimit-Limit"] == "5"
    limited.config["RATE_LIMIT"] = "7/day"
    assert client.get("/people", headers=headers).headers["X-RateLimit-Limit"] == "7"


def test_unknown_keys_cannot_buy_fresh_buckets(limited):
    client = limited.test_client()
    statuses = [
        client.get("/people", headers={"X-API-Key": f"ps_{uuid.uuid4().hex}"}).status_code
        for _ in range(4)
    ]
    assert statuses == [401, 401, 401, 429]
    assert (
        client.get("/people", headers={"X-API-Key": ""}).status_code == 429
    )  # empty: same address
    assert client.get("/health").status_code == 200  # health is never limited


def test_health_is_not_limited_and_has_no_limit_headers(limited):
    client = limited.test_client()
    for _ in range(10):
        response = client.get("/health")
        assert response.status_code == 200
    assert "X-RateLimit-Limit" not in response.headers


def test_graphql_is_charged_its_cost_and_refusals_are_free(tmp_path):
    app = make_app(tmp_path, RATE_LIMIT="10/day")
    try:
        client = app.test_client()
        headers = {"X-API-Key": new_key(app, "a")}
        for index in range(8):
            client.post("/person", json={"name": f"P{index}"}, headers=new_admin(app))
        eight = client.post(
            "/graphql", json={"query": "{ people(limit: 8) { id } }"}, headers=headers
        )
        assert eight.status_code == 200 and len(eight.json["data"]["people"]) == 8
        assert eight.headers["X-RateLimit-Remaining"] == "2"
        five = client.post(
            "/graphql", json={"query": "{ people(limit: 5) { id } }"}, headers=headers
        )
        assert five.status_code == 429
        assert five.json["errors"][0]["extensions"]["code"] == "RATE_LIMITED"
        two = client.post("/graphql", json={"query": '{ person(id: "1") { id } }'}, headers=headers)
        assert two.status_code == 200  # the refused request cost nothing; this one writes 2
        assert two.headers["X-RateLimit-Remaining"] == "0"
    finally:
        close_app(app)


def new_admin(app):
    return {"X-API-Key": new_key(app, f"w{uuid.uuid4().hex[:6]}", rate_limit="1000/day")}


def test_usage_counts_in_keys_list_and_me(tmp_path):
    """Exact in the answering process; under several workers (PEOPLE_SERVICE_TEST_WORKERS) the
    other process's counts arrive within USAGE_FLUSH_SECONDS, so `me` is asked until they do."""
    db = database(tmp_path)
    key = cli("keys", "create", "--name", "ci", db=db).stdout.split()[-1]
    server = ServerProcess(db, env={"PEOPLE_SERVICE_USAGE_FLUSH_SECONDS": "1"}).start()
    try:
        for _ in range(4):
            server.request("GET", "/people?limit=1", headers={"X-API-Key": key})
        deadline = time.monotonic() + 10
        for asked in itertools.count(1):
            me = server.request(
                "POST",
                "/graphql",
                json={"query": "{ me { requestCount lastUsed } }"},
                headers={"X-API-Key": key},
            ).json()["data"]["me"]
            assert me["requestCount"] <= 4 + asked and me["lastUsed"]
            if me["requestCount"] == 4 + asked:
                break
            assert time.monotonic() < deadline, me
            time.sleep(0.25)
    finally:
        assert server.stop() == 0  # a clean stop flushes what is pending
    row = cli("keys", "list", db=db).stdout.splitlines()[1].split()
    assert row[0] == "ci" and row[-2] == str(4 + asked)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("0", "must be a positive integer"),  # the flush thread would spin a core
        ("-5", "must be a positive integer"),
        ("0.5", "must be an integer"),
        ("99999999999999999999", "must be at most 86400"),  # past what a thread can wait for
    ],
)
def test_a_usage_flush_interval_that_cannot_work_stops_start_up(tmp_path, raw, message):
    env = {"PEOPLE_SERVICE_USAGE_FLUSH_SECONDS": raw}
    done = cli("serve", "--port", "1", db=database(tmp_path), env=env, timeout=30)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert f"PEOPLE_SERVICE_USAGE_FLUSH_SECONDS {message}" in done.stderr


def _serve(db, env):
    return ServerProcess(db, env=env).start()


def test_x_forwarded_for_is_ignored_without_a_trusted_proxy(tmp_path):
    env = {"PEOPLE_SERVICE_ANONYMOUS_RATE_LIMIT": "3/day"}
    server = _serve(database(tmp_path), env)
    try:
        statuses = [
            server.request("GET", "/people", headers={"X-Forwarded-For": f"10.0.0.{n}"}).status_code
            for n in range(4)
        ]
        assert statuses == [401, 401, 401, 429]
    finally:
        server.stop()


def test_x_forwarded_for_counts_behind_a_trusted_proxy(tmp_path):
    env = {
        "PEOPLE_SERVICE_ANONYMOUS_RATE_LIMIT": "1/day",
        "PEOPLE_SERVICE_TRUSTED_PROXY": "127.0.0.1",
    }
    server = _serve(database(tmp_path), env)
    try:
        for n in range(3):
            response = server.request("GET", "/people", headers={"X-Forwarded-For": f"10.0.0.{n}"})
            assert response.status_code == 401  # each client address has its own budget
        again = server.request("GET", "/people", headers={"X-Forwarded-For": "10.0.0.1"})
        assert again.status_code == 429
    finally:
        server.stop()


def test_two_processes_share_one_limit_through_redis(tmp_path, redis):
    db = database(tmp_path)
    key = cli("keys", "create", "--name", "shared", "--rate-limit", "20/day", db=db).stdout.split()[
        -1
    ]
    env = {
        "PEOPLE_SERVICE_RATE_LIMIT_STORAGE": redis,
        "PEOPLE_SERVICE_RATE_LIMIT_PREFIX": f"test-{uuid.uuid4().hex}",
        "PEOPLE_SERVICE_ANONYMOUS_RATE_LIMIT": GENEROUS,
    }
    servers = [_serve(db, env), _serve(db, env)]
    statuses: list[int] = []
    lock = threading.Lock()

    def hammer(server):
        for _ in range(20):
            status = server.request(
                "GET", "/people?limit=1", headers={"X-API-Key": key}
            ).status_code
            with lock:
                statuses.append(status)

    try:
        threads = [threading.Thread(target=hammer, args=(s,)) for s in servers for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        for server in servers:
            server.stop()
    assert len(statuses) == 80
    assert statuses.count(200) == 20  # not 40: both processes count in one place
    assert statuses.count(429) == 60


def test_an_unreachable_limit_storage_falls_back_to_per_process_counters(tmp_path, caplog):
    """Nothing listens on port 9: requests are still served, and still limited, per process."""
    app = make_app(tmp_path, RATE_LIMIT_STORAGE="redis://127.0.0.1:9", RATE_LIMIT="3/day")
    try:
        headers = {"X-API-Key": new_key(app, "a")}
        client = app.test_client()
        statuses = [client.get("/people", headers=headers).status_code for _ in range(4)]
        assert statuses == [200, 200, 200, 429]
        assert "Rate limit storage unreachable" in caplog.text  # flask-limiter says so
    finally:
        close_app(app)


# -- logins, refusals, windows and the counters file ----------------------------------------


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
def ten_a_day(tmp_path):
    app = make_app(tmp_path, RATE_LIMIT="10/day")
    yield app
    services(app).limiter.storage.close()
    close_app(app)


def test_a_graphql_429_says_what_the_query_costs_and_what_remains(ten_a_day):
    client, headers = ten_a_day.test_client(), {"X-API-Key": new_key(ten_a_day, "a")}
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


def test_a_refusal_says_when_to_retry_and_never_zero(ten_a_day):
    client, headers = ten_a_day.test_client(), {"X-API-Key": new_key(ten_a_day, "a")}
    for _ in range(10):
        response = client.get("/people", headers=headers)
        assert response.status_code == 200 and "Retry-After" not in response.headers
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


def test_one_name_selected_many_times_is_refused_before_validation(tmp_path):
    from .conftest import new_key

    app = make_app(tmp_path)
    key = {"X-API-Key": new_key(app, "reader", "read", "100000/day")}
    query = "{ " + " ".join(f'person(id: "{n}") {{ id }}' for n in range(200)) + " }"
    answer = app.test_client().post("/graphql", json={"query": query}, headers=key)
    [error] = answer.json["errors"]
    assert error["extensions"]["code"] == "QUERY_TOO_COMPLEX"
    assert "'person' more than 10 times" in error["message"]


def test_a_document_that_fails_validation_pays_its_estimate(tmp_path):
    """Fields that cannot be merged, spread from 100 fragments: validating them is quadratic,
    so the refusal costs the caller what the document would have cost, not 1 (the repeated
    response name is now refused before graphql-core's pairwise check, and still paid for)."""
    from .conftest import new_key

    app = make_app(tmp_path)
    key = {"X-API-Key": new_key(app, "reader", "read", "100000/day")}
    fragments = " ".join(
        f'fragment F{n} on Query {{ person(id: "{n}") {{ id }} }}' for n in range(100)
    )
    spreads = " ".join(f"...F{n}" for n in range(100))
    answer = app.test_client().post(
        "/graphql", json={"query": f"{{ {spreads} }} {fragments}"}, headers=key
    )
    assert answer.json["errors"][0]["extensions"]["code"] == "QUERY_TOO_COMPLEX"
    assert "'person' more than 10 times" in answer.json["errors"][0]["message"]
    assert 100000 - int(answer.headers["X-RateLimit-Remaining"]) >= 100


def test_queries_refused_by_the_limit_say_their_cost_and_are_not_charged(tmp_path):
    """A caller kept just short of a query's cost is refused each time, charged nothing (SPEC
    11a: no separate window of refused queries), and told what the query costs."""
    from .conftest import new_key

    app = make_app(tmp_path, ANONYMOUS_RATE_LIMIT="3/minute")
    key = {"X-API-Key": new_key(app, "reader", "read", "20/minute")}
    client = app.test_client()
    spend = client.post("/graphql", json={"query": "{ people(limit: 15) { id } }"}, headers=key)
    assert spend.status_code == 200 and spend.headers["X-RateLimit-Remaining"] == "5"
    query = {"query": "{ people(limit: 10) { id } }"}  # costs 10: within 20, over the 5 left
    answers = [client.post("/graphql", json=query, headers=key) for _ in range(4)]
    assert [answer.status_code for answer in answers] == [429] * 4
    assert all(answer.headers["X-RateLimit-Remaining"] == "5" for answer in answers)
    messages = [answer.json["errors"][0]["message"] for answer in answers]
    assert all(message.startswith("This query costs 10") for message in messages)


def test_a_counters_file_another_user_made_stops_start_up(tmp_path, sqlite_only):
    """Whoever owns the counters file can read every key's counters or set them to refuse
    everyone; a planted one is refused, naming it (as secret.key is)."""
    import os

    import pytest

    from people_service import ConfigError

    if os.geteuid() != 0:
        pytest.skip("making a file another user owns needs root")
    planted = tmp_path / "people.db.ratelimits"
    planted.write_bytes(b"")
    os.chown(planted, 65534, 65534)  # nobody's
    with pytest.raises(ConfigError, match="people.db.ratelimits belongs to another user"):
        make_app(tmp_path, RATE_LIMIT_STORAGE="")
