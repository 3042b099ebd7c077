"""Several instances on one PostgreSQL and one Redis: one service, whichever instance answers."""

from __future__ import annotations

import signal
import threading
import uuid

import pytest
import requests

from .conftest import (
    ACTIVE,
    GENEROUS,
    ServerProcess,
    cli,
    database,
)

PASSWORD = "correct horse battery staple"


@pytest.fixture
def cluster(tmp_path, redis):
    """Three server processes on one PostgreSQL schema, counting limits in one Redis."""
    if ACTIVE["backend"] != "postgresql":
        pytest.skip("several instances share PostgreSQL, not a SQLite file")
    db = database(tmp_path)
    env = {
        "PEOPLE_SERVICE_SECRET_KEY": "",  # none configured: the one stored in PostgreSQL
        "PEOPLE_SERVICE_RATE_LIMIT_STORAGE": redis,
        "PEOPLE_SERVICE_RATE_LIMIT_PREFIX": f"test-{uuid.uuid4().hex}",
        "PEOPLE_SERVICE_ANONYMOUS_RATE_LIMIT": GENEROUS,
        "PEOPLE_SERVICE_AUTH_RATE_LIMIT": GENEROUS,
    }
    assert cli("init-db", "--demo", db=db).returncode == 0
    cli("users", "create", "ada", "--password-stdin", db=db, input=PASSWORD + "\n", env=env)
    servers = [ServerProcess(db, env=env).start() for _ in range(3)]
    yield db, env, servers
    for server in servers:
        server.stop()


def key_for(db, env, rate_limit=GENEROUS):
    made = cli(
        "keys",
        "create",
        "--name",
        f"k{uuid.uuid4().hex[:8]}",
        "--rate-limit",
        rate_limit,
        db=db,
        env=env,
    )
    return {"X-API-Key": made.stdout.split()[-1]}


def test_a_write_through_one_instance_is_read_through_the_others(cluster):
    db, env, (a, b, c) = cluster
    headers = key_for(db, env)
    made = a.request("POST", "/person", json={"name": "Written at A"}, headers=headers).json()
    for server in (b, c):
        assert server.request("GET", f"/person/{made['id']}", headers=headers).json() == made
    found = c.request(
        "POST",
        "/graphql",
        json={"query": f'{{ person(id: "{made["id"]}") {{ name }} }}'},
        headers=headers,
    ).json()
    assert found == {"data": {"person": {"name": "Written at A"}}}


def test_a_keys_limit_holds_across_instances(cluster):
    db, env, servers = cluster
    headers = key_for(db, env, "30/day")
    statuses, lock = [], threading.Lock()

    def hammer(server):
        for _ in range(15):
            status = server.request("GET", "/people?limit=1", headers=headers).status_code
            with lock:
                statuses.append(status)

    threads = [threading.Thread(target=hammer, args=(s,)) for s in servers for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(statuses) == 90
    assert statuses.count(200) == 30 and statuses.count(429) == 60


def test_a_token_from_one_instance_works_on_the_others(cluster):
    _, _, (a, b, c) = cluster
    token = a.request("POST", "/auth/token", json={"username": "ada", "password": PASSWORD}).json()
    for server in (b, c):
        me = server.request(
            "GET", "/me", headers={"Authorization": f"Bearer {token['access_token']}"}
        )
        assert me.status_code == 200 and me.json()["name"] == "ada"


def test_a_revocation_is_seen_by_every_instance(cluster):
    db, env, servers = cluster
    headers = key_for(db, env)
    name = None
    for server in servers:
        assert server.request("GET", "/me", headers=headers).status_code == 200
        name = server.request("GET", "/me", headers=headers).json()["name"]
    assert cli("keys", "revoke", name, db=db, env=env).returncode == 0
    for server in servers:
        assert server.request("GET", "/me", headers=headers).status_code == 401


def test_killing_an_instance_loses_nothing_acknowledged(cluster):
    db, env, (a, b, c) = cluster
    headers = key_for(db, env)
    acked, lock, stop = [], threading.Lock(), threading.Event()

    def write(server, index):
        session = requests.Session()
        for n in range(2000):
            if stop.is_set():
                return
            name = f"kill-{index}-{n}"
            try:
                response = session.post(
                    server.url + "/person", json={"name": name}, headers=headers, timeout=10
                )
            except requests.RequestException:
                return
            if response.status_code == 201:
                with lock:
                    acked.append((response.json()["id"], name))

    threads = [threading.Thread(target=write, args=(s, i)) for i, s in enumerate((a, b, a, b))]
    for thread in threads:
        thread.start()
    while len(acked) < 100:
        threading.Event().wait(0.05)
    a.process.send_signal(signal.SIGKILL)
    threading.Event().wait(0.5)
    stop.set()
    for thread in threads:
        thread.join(30)
    for person_id, name in acked:
        assert c.request("GET", f"/person/{person_id}", headers=headers).json()["name"] == name


def test_migrate_moves_a_sqlite_database_to_postgresql(tmp_path):
    if ACTIVE["backend"] != "postgresql":
        pytest.skip("the target is PostgreSQL")
    source = tmp_path / "source.db"
    assert cli("init-db", "--demo", db=source).returncode == 0
    key = cli("keys", "create", "--name", "moved", db=source).stdout.split()[-1]
    cli("users", "create", "ada", "--password-stdin", db=source, input=PASSWORD + "\n")
    target = database(tmp_path / "pg")
    moved = cli("migrate", "--to", target, db=source)
    assert moved.returncode == 0, moved.stderr
    assert "counts checked" in moved.stderr
    assert "62 people, 260 friendships" in moved.stderr
    server = ServerProcess(target).start()
    try:
        headers = {"X-API-Key": key}
        people = server.request("GET", "/people?limit=1", headers=headers)
        assert people.status_code == 200 and people.headers["X-Total-Count"] == "62"
        made = server.request("POST", "/person", json={"name": "After the move"}, headers=headers)
        assert made.json()["id"] == "63"  # ids go on above the copied ones
    finally:
        server.stop()
    again = cli("migrate", "--to", target, db=source)
    assert again.returncode == 1
    assert "already holds" in again.stderr


def test_instances_starting_together_on_an_empty_database_load_the_demo_once(tmp_path):
    if ACTIVE["backend"] != "postgresql":
        pytest.skip("several instances share PostgreSQL, not a SQLite file")
    db = database(tmp_path)
    servers = [ServerProcess(db) for _ in range(3)]
    threads = [threading.Thread(target=server.start) for server in servers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    try:
        threading.Event().wait(0.5)
        keys = [line for server in servers for line in server.stdout if line.startswith("ps_")]
        assert len(keys) == 1
        for server in servers:
            people = server.request("GET", "/people?limit=1", headers={"X-API-Key": keys[0]})
            assert people.headers["X-Total-Count"] == "62"
    finally:
        for server in servers:
            server.stop()
