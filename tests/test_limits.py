"""Rate limits: per caller, with headers, GraphQL charged by cost, and shared through Redis."""

from __future__ import annotations

import itertools
import threading
import time
import uuid

import pytest

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
        # SPEC 11a: flask-limiter's Retry-After may come with any limited answer; never 0
        assert int(response.headers.get("Retry-After", "1")) >= 1


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
