"""The SQLite store on a real file: schema, pragmas, transactions and batched reads."""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from people_service import service, transfer
from people_service.errors import Conflict, NotFound
from people_service.store import SCHEMA_VERSION, SQLiteStore, open_store

from .conftest import ACTIVE, WANT_POSTGRES, cli, count_statements, database
from .test_wsgi_servers import WSGIServer


@pytest.fixture
def db(tmp_path):
    store = open_store(database(tmp_path))
    store.upgrade_schema()
    yield store
    store.close()


def person(name, **fields):
    return {
        "name": name,
        "age": None,
        "email": None,
        "street": None,
        "city": None,
        "country": None,
        **fields,
    }


def test_migrate_sets_wal_foreign_keys_and_user_version(db, tmp_path, sqlite_only):
    assert db.upgrade_schema() == SCHEMA_VERSION  # a second run changes nothing
    conn = db._db().conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_newer_schema_is_refused(tmp_path, sqlite_only):
    path = tmp_path / "people.db"
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    store = SQLiteStore(path)
    with pytest.raises(RuntimeError, match="newer"):
        store.upgrade_schema()
    store.close()


def test_transaction_rolls_back_every_write_on_error(db):
    db.insert_person(person("Kept"))
    with pytest.raises(ValueError):
        with db.transaction():
            db.insert_person(person("Lost"))
            db.delete_person(1)
            raise ValueError("boom")
    assert [p["name"] for p in db.list_people(None, 10, 0)] == ["Kept"]


def test_nested_transactions_join_the_outer_one(db):
    with pytest.raises(ValueError):
        with db.transaction():
            with db.transaction():
                db.insert_person(person("Inner"))
            raise ValueError
    assert db.count_people() == 0


def test_email_is_unique_ignoring_case(db):
    db.insert_person(person("A", email="Ada@Example.org"))
    with pytest.raises(Conflict):
        db.insert_person(person("B", email="ada@example.ORG"))
    db.insert_person(person("C", email=None))
    db.insert_person(person("D", email=None))  # several unknown emails are fine
    assert db.count_people() == 3


def test_delete_cascades_to_friendships_and_messages(db):
    a, b = db.insert_person(person("A")), db.insert_person(person("B"))
    db.add_friendship(a, b)
    db.insert_message({"person_id": a, "sender_id": "api_key:1", "sender": "k", "content": "x"})
    assert db.delete_person(a)
    assert db.friends_of([b], 10) == {b: []}
    assert db.dump()["messages"] == [] and db.dump()["friendships"] == []


def test_friends_of_loads_many_people_in_one_statement(db):
    ids = [db.insert_person(person(f"P{i}")) for i in range(30)]
    for other in ids[1:]:
        db.add_friendship(ids[0], other)
    found = {}
    assert count_statements(db, lambda: found.update(db.friends_of(ids, 5))) == 1
    assert [f["name"] for f in found[ids[0]]] == ["P1", "P2", "P3", "P4", "P5"]
    assert [f["name"] for f in found[ids[7]]] == ["P0"]


def test_concurrent_writers_in_transactions_all_commit(tmp_path):
    """8 threads x 30 read-then-write transactions: none fails, no update is lost."""
    store = open_store(database(tmp_path))
    store.upgrade_schema()
    store.insert_person(person("Counter", age=0))
    failures = []

    def work():
        try:
            for _ in range(30):
                with store.transaction():
                    current = store.get_person(1, lock=True)["age"]  # read to write: locked
                    store.update_person(1, person("Counter", age=(current + 1) % 151))
                    store.insert_person(person("row"))
        except Exception as exc:  # collected and asserted below
            failures.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert store.count_people() == 1 + 8 * 30
    assert store.get_person(1)["age"] == (8 * 30) % 151  # no lost update
    store.close()


def test_service_import_keeps_ids_and_friendships(db):
    document = {
        "people": [
            {"id": "5", "name": "Five", "friends": ["9"]},
            {"id": "9", "name": "Nine", "address": {"city": "Oslo"}, "friends": ["5"]},
        ]
    }
    assert transfer.import_people(db, document) == (2, 1)
    assert service.get_person(db, "9")["address"]["city"] == "Oslo"
    exported, pairs = transfer.export_people(db)
    assert pairs == 1
    assert [p["friends"] for p in exported["people"]] == [["9"], ["5"]]
    created = db.insert_person(person("Next"))
    assert created == 10  # the sequence continues after imported ids


def test_update_of_a_missing_person_is_not_found(db):
    with pytest.raises(NotFound):
        db.update_person(3, person("Ghost"))


def test_connections_stay_bounded_under_a_thread_per_request_server(app, headers):
    """werkzeug's threaded server runs every request on a new thread: the store must not keep
    a connection per thread it ever saw."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    import requests
    from werkzeug.serving import make_server

    from people_service.web import services

    store = services(app).store
    fds_before = len(os.listdir("/proc/self/fd"))
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.port}/people?limit=1"
    try:
        with ThreadPoolExecutor(8) as pool:
            statuses = list(
                pool.map(lambda _: requests.get(url, headers=headers).status_code, range(300))
            )
    finally:
        server.shutdown()
        thread.join(10)
    assert statuses == [200] * 300
    if hasattr(store, "open_connections"):  # SQLite: one per live thread (8 at most, and ours)
        assert store.open_connections() <= 8 + 1
    else:  # PostgreSQL: psycopg's pool
        assert store.pool.get_stats()["pool_size"] <= store.pool.max_size
    assert len(os.listdir("/proc/self/fd")) - fds_before < 2 * (16 + 8) + 10


def test_a_new_database_file_is_readable_by_its_owner_only(tmp_path, sqlite_only):
    store = SQLiteStore(tmp_path / "new.db")
    store.upgrade_schema()
    try:
        for name in ("new.db", "new.db-wal"):  # the WAL exists while a connection is open
            assert (tmp_path / name).stat().st_mode & 0o777 == 0o600, name
    finally:
        store.close()


# -- forks: every process opens its own connections (SPEC §11b) ------------------------------


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_gunicorn_preload_workers_answer_every_request_with_its_own_person(tmp_path, engine):
    """`gunicorn --preload` loads the app once and then forks: no worker may use a connection,
    pool, lock or thread its parent made (they would share one socket or file handle)."""
    if engine != ACTIVE["backend"]:
        hint = "" if WANT_POSTGRES else " (set PEOPLE_SERVICE_TEST_POSTGRES=1)"
        pytest.skip(f"runs in the {engine} pass{hint}")
    pytest.importorskip("gunicorn")
    db = database(tmp_path)
    people = [{"id": str(n), "name": f"Person {n}", "friends": []} for n in range(1, 301)]
    (tmp_path / "people.json").write_text(json.dumps({"people": people}))
    assert cli("import", tmp_path / "people.json", db=db).returncode == 0
    key = cli("keys", "create", "--name", "forks", db=db).stdout.split()[-1]
    command = [sys.executable, "-m", "gunicorn", "--bind", "127.0.0.1:{port}", "--preload"]
    command += ["--workers", "3", "--threads", "4", "app:app"]
    env = {"PEOPLE_SERVICE_RATE_LIMIT": "100000/minute"}
    with WSGIServer(command, db, env) as server:

        def get(n: int) -> tuple[int | None, str | None]:
            try:
                response = requests.get(
                    f"{server.url}/person/{n}", headers={"X-API-Key": key}, timeout=10
                )
                return response.status_code, response.json().get("name")
            except (requests.RequestException, ValueError) as error:  # a hung or broken worker
                return None, type(error).__name__

        with ThreadPoolExecutor(30) as pool:
            answers = list(pool.map(get, range(1, 301)))
        wrong = [(n, got) for n, got in enumerate(answers, 1) if got != (200, f"Person {n}")]
        assert wrong == [], f"{len(wrong)} of 300 wrong: {wrong[:5]}"
        assert server.stop() == 0
