"""The store on a real database: schema, pragmas, transactions, batched reads, the files beside
it, snapshots, the usage thread, PostgreSQL's dialect and locks, errors without transport
details."""

from __future__ import annotations

import ast
import json
import logging
import os
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jwt
import pytest
import requests

from people_service import credentials, errors, service, transfer
from people_service.errors import Conflict, NotFound
from people_service.runtime import UsageTracker
from people_service.store import SCHEMA_VERSION, SQLiteStore, open_store, redacted
from people_service.web import services

from .conftest import (
    ACTIVE,
    ROOT,
    SECRET,
    WANT_POSTGRES,
    cli,
    close_app,
    count_statements,
    database,
    free_port,
    make_app,
)
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
    """werkzeug's threaded server runs every request on a new thread: a thread's connection
    goes with it, and no file descriptor is left behind."""
    from werkzeug.serving import make_server

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
    assert len(os.listdir("/proc/self/fd")) - fds_before < 2 * (16 + 8) + 10


def open_files(directory) -> list[str]:
    """The files under `directory` this process holds open."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the descriptor listdir itself used
            continue
    return [name for name in found if name.startswith(str(directory))]


def test_a_threads_connection_goes_with_it_and_close_closes_every_threads(tmp_path, sqlite_only):
    store = SQLiteStore(tmp_path / "people.db")
    store.upgrade_schema()
    store.close()
    for _ in range(20):  # threads that come and go, as a delivery's may
        thread = threading.Thread(target=store.count_people)
        thread.start()
        thread.join()
    assert open_files(tmp_path) == []
    used, done = threading.Barrier(5), threading.Event()

    def reader():
        store.count_people()
        used.wait(10)
        done.wait(10)

    readers = [threading.Thread(target=reader) for _ in range(4)]
    for thread in readers:
        thread.start()
    used.wait(10)
    assert open_files(tmp_path)
    store.close()  # while its threads live on, as waitress's do
    assert open_files(tmp_path) == []
    assert store.count_people() == 0  # a later use opens another
    done.set()
    for thread in readers:
        thread.join(10)
    store.close()
    assert open_files(tmp_path) == []


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


PACKAGE = ROOT / "people_service"


# -- files beside the database (SPEC §10) --------------------------------------------------


def serve_without_secret(directory: Path) -> subprocess.CompletedProcess:
    """`serve` with no SECRET_KEY, so it reads or makes secret.key beside the database; it
    must refuse to start (a server that starts is stopped after 30 s and fails the test)."""
    try:
        return cli(
            "serve",
            "--port",
            str(free_port()),
            db=directory / "people.db",
            env={"PEOPLE_SERVICE_SECRET_KEY": ""},
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the server started with a secret.key it must not trust")


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o602])
def test_a_secret_key_other_users_can_read_or_write_stops_start_up(tmp_path, sqlite_only, mode):
    secret = tmp_path / "secret.key"
    secret.write_text("s" * 64 + "\n")
    secret.chmod(mode)
    done = serve_without_secret(tmp_path)
    assert done.returncode == 2, done.stderr
    assert str(secret) in done.stderr
    assert "Traceback" not in done.stderr
    assert secret.read_text() == "s" * 64 + "\n"  # refused, not rewritten


def test_a_secret_key_that_is_a_symlink_stops_start_up(tmp_path, sqlite_only):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("known to whoever made the link " * 3)
    elsewhere.chmod(0o600)
    (tmp_path / "secret.key").symlink_to(elsewhere)
    done = serve_without_secret(tmp_path)
    assert done.returncode == 2, done.stderr
    assert str(tmp_path / "secret.key") in done.stderr


def test_a_new_secret_key_is_the_owners_alone_and_kept(tmp_path, sqlite_only):
    app = make_app(tmp_path, SECRET_KEY=None)
    secret = tmp_path / "secret.key"
    try:
        assert not secret.exists()  # create_app opens and writes nothing
        assert app.test_client().get("/health").status_code == 200  # the first request does
        assert secret.stat().st_mode & 0o777 == 0o600
        assert services(app).token_secret == secret.read_text().strip()
    finally:
        close_app(app)
    again = make_app(tmp_path, SECRET_KEY=None)
    try:
        assert services(again).token_secret == secret.read_text().strip()
    finally:
        close_app(again)


def test_nothing_is_written_through_a_symlink_beside_the_database(tmp_path, sqlite_only):
    """The credentials epoch file is gone: a link where it used to be is never followed."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    db = tmp_path / "people.db"
    Path(f"{db}.epoch").symlink_to(victim)
    assert cli("init-db", db=db).returncode == 0
    made = cli("keys", "create", "--name", "k", db=db)
    assert made.returncode == 0, made.stderr
    assert cli("keys", "revoke", "k", db=db).returncode == 0
    assert victim.read_bytes() == b"precious\n"
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("people.db-")) == [
        "people.db",
        "people.db.epoch",
        "victim",
    ]


def test_a_key_revoked_by_another_process_is_refused_at_once(tmp_path):
    app = make_app(tmp_path)
    try:
        client = app.test_client()
        key = credentials.create_key(services(app).store, "elsewhere")
        for _ in range(2):  # seen, and seen again: nothing may remember it
            assert client.get("/people", headers={"X-API-Key": key}).status_code == 200
        revoked = cli("keys", "revoke", "elsewhere", db=database(tmp_path))
        assert revoked.returncode == 0, revoked.stderr
        assert client.get("/people", headers={"X-API-Key": key}).status_code == 401
    finally:
        close_app(app)


def test_a_token_without_its_generation_and_user_id_is_refused(tmp_path):
    app = make_app(tmp_path)
    try:
        store = services(app).store
        credentials.create_user(store, "grace", "a long enough passphrase 1906")
        issued = credentials.issue_token(store.user_by_name("grace"), SECRET, 600)
        claims = jwt.decode(
            issued["access_token"], SECRET, algorithms=["HS256"], issuer="people-service"
        )
        client = app.test_client()

        def status(token_claims):
            token = jwt.encode(token_claims, SECRET, algorithm="HS256")
            return client.get("/me", headers={"Authorization": f"Bearer {token}"}).status_code

        assert status(claims) == 200
        for old in ("gen", "uid"):  # formats of earlier releases, long expired
            assert status({k: v for k, v in claims.items() if k != old}) == 401
    finally:
        close_app(app)


# -- one snapshot for a page and its total ------------------------------------------------


@pytest.mark.parametrize("listing", ["/people", "/person/1/friends"])
def test_the_total_count_and_the_page_come_from_one_snapshot(tmp_path, listing):
    app = make_app(tmp_path)
    try:
        store = services(app).store
        client = app.test_client()
        headers = {"X-API-Key": credentials.create_key(store, "ci")}
        for name in ("A", "B", "C"):
            client.post("/person", json={"name": name}, headers=headers)
        for friend in ("2", "3"):
            client.put(f"/person/1/friends/{friend}", headers=headers)
        method = "list_people" if listing == "/people" else "list_friends"
        original = getattr(store, method)

        def page_then_a_concurrent_write(*args, **kwargs):
            rows = original(*args, **kwargs)
            late = threading.Thread(target=service.create_person, args=(store, {"name": "Late"}))
            late.start()
            late.join(10)
            friend = threading.Thread(target=service.add_friend, args=(store, "1", "4"))
            friend.start()
            friend.join(10)
            assert not late.is_alive() and not friend.is_alive()
            return rows

        setattr(store, method, page_then_a_concurrent_write)
        response = client.get(listing, headers=headers)
        delattr(store, method)
        seen = len(response.json)
        assert response.headers["X-Total-Count"] == str(seen)  # what the page saw, not one more
        assert client.get(listing, headers=headers).headers["X-Total-Count"] == str(seen + 1)
    finally:
        close_app(app)


# -- the usage thread ---------------------------------------------------------------------


class Caller:
    kind, id = "api_key", 1


def test_the_usage_flush_thread_survives_any_exception(tmp_path, caplog):
    store = open_store(database(tmp_path))
    store.upgrade_schema()
    credentials.create_key(store, "counted")
    original = store.add_usage
    calls = []

    def flaky(counts):
        calls.append(counts)
        if len(calls) == 1:
            raise RuntimeError("a bug, not a ServiceError")
        return original(counts)

    store.add_usage = flaky
    usage = UsageTracker(store, interval=0.02)
    try:
        with caplog.at_level(logging.WARNING, logger="people_service"):
            usage.hit(Caller())
            deadline = time.monotonic() + 10
            while len(calls) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            usage.hit(Caller())
            while len(calls) < 3 and time.monotonic() < deadline:
                time.sleep(0.02)
        assert len(calls) >= 3, "the flush thread stopped"
        assert usage.thread.is_alive()
        usage.flush()  # waits for a flush still writing (the third call may not have committed)
        assert store.usage("api_key", 1)["request_count"] == 2  # nothing counted was lost
        assert "a bug, not a ServiceError" in caplog.text
    finally:
        usage.stop()
        store.close()


# -- PostgreSQL: its dialect, its pool and its locks ----------------------------------------


def test_question_marks_and_percent_signs_in_literals_are_text(tmp_path):
    store = open_store(database(tmp_path))
    store.upgrade_schema()
    try:
        row = store._execute("SELECT '?' AS q, '100%' AS p, 'it''s ?%' AS s, ? AS v", (7,))
        assert row.fetchone() == {"q": "?", "p": "100%", "s": "it's ?%", "v": 7}
        made = service.create_person(store, {"name": "50% ? off"})[0]
        found, total, _ = service.list_people(store, name="% ?")
        assert (found, total) == ([{"id": made["id"], "name": "50% ? off"}], 1)
    finally:
        store.close()


def test_threads_opening_a_new_store_at_once_all_succeed(tmp_path):
    store = open_store(database(tmp_path))
    store.upgrade_schema()
    store.close()
    fresh = open_store(database(tmp_path))
    start = threading.Barrier(8)
    results = []

    def first_use():
        start.wait(10)
        results.append(fresh.check())

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    fresh.close()
    assert results == ["ok"] * 8


def test_writes_to_different_people_do_not_wait_for_each_other(tmp_path):
    """Only a write that touches the same rows waits (PostgreSQL's row locks); SQLite has one
    writer at a time by design. (The lock that orders event ids is taken by a change's last
    statement, just before its commit: a transaction kept open after it would hold others.)"""
    if ACTIVE["backend"] != "postgresql":
        pytest.skip("SQLite serializes writers by design")
    store = open_store(database(tmp_path))
    store.upgrade_schema()
    first = service.create_person(store, {"name": "First"})[0]
    second = service.create_person(store, {"name": "Second"})[0]
    holding, other_done = threading.Event(), threading.Event()

    def hold_the_first():
        with store.transaction():
            service.get_person(store, first["id"], lock=True)  # a write's first step: its row
            holding.set()
            other_done.wait(10)  # still inside the transaction, the row locked
            service.update_person(store, first["id"], {"age": 1})

    holder = threading.Thread(target=hold_the_first)
    holder.start()
    try:
        assert holding.wait(10)
        started = time.monotonic()
        service.update_person(store, second["id"], {"age": 2})
        waited = time.monotonic() - started
        other_done.set()
        assert waited < 5, "the second write waited for the first transaction"
        holder.join(15)
        assert service.get_person(store, first["id"])["age"] == 1
    finally:
        other_done.set()
        holder.join(15)
        store.close()


def test_concurrent_retries_with_one_idempotency_key_create_once(tmp_path):
    app = make_app(tmp_path)
    try:
        headers = {
            "X-API-Key": credentials.create_key(services(app).store, "ci"),
            "Idempotency-Key": "once",
        }
        start = threading.Barrier(6)
        answers = []

        def post():
            client = app.test_client()
            start.wait(10)
            answers.append(client.post("/person", json={"name": "Once"}, headers=headers))

        threads = [threading.Thread(target=post) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(a.status_code for a in answers) == [201] * 6
        assert len({a.json["id"] for a in answers}) == 1
        assert sum(a.headers.get("Idempotent-Replayed") == "true" for a in answers) == 5
        listed = app.test_client().get("/people", headers=headers)
        assert listed.headers["X-Total-Count"] == "1"
    finally:
        close_app(app)


# -- errors carry no transport details; one home per concern --------------------------------


def names_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.arg | ast.keyword) and node.arg:
            found.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.update(word for word in ("Retry-After",) if word in node.value)
    return found


def test_domain_errors_carry_no_headers():
    """errors.py is the code table (status, GraphQL code); headers are the web layer's."""
    for cls in [errors.ServiceError, *errors.ServiceError.__subclasses__()]:
        assert not hasattr(cls("x"), "headers"), cls
    layers = [PACKAGE / "errors.py", PACKAGE / "service.py", *(PACKAGE / "store").glob("*.py")]
    for path in layers:
        if path.name == "counters.py":  # the limiter's storage: not a domain layer
            continue
        assert not names_in(path) & {"headers", "retry_after", "Retry-After"}, path


def test_database_passwords_are_hidden_by_one_function():
    assert (
        redacted("postgresql://app:s3cr:et@db:5432/people") == "postgresql://app:***@db:5432/people"
    )
    assert redacted("data/people.db") == "data/people.db"
