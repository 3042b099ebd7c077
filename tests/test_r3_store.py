"""The data layer's third-round defects: files beside the database, error classes, snapshots,
the usage thread, PostgreSQL's dialect and locks, and errors without transport details."""

from __future__ import annotations

import ast
import logging
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import jwt
import pytest

from people_service import credentials, errors, service
from people_service.credentials import UsageTracker
from people_service.store import open_store, redacted
from people_service.web import services
from people_service.web.problems import problem_response

from .conftest import ACTIVE, ROOT, SECRET, cli, close_app, database, free_port, make_app

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


# -- SQLite errors by their result code ---------------------------------------------------


def test_a_missing_table_is_a_logged_500_not_a_503_to_retry(tmp_path, sqlite_only, caplog):
    app = make_app(tmp_path)
    try:
        client = app.test_client()
        headers = {"X-API-Key": credentials.create_key(services(app).store, "ci")}
        person = client.post("/person", json={"name": "Ada"}, headers=headers).json
        with sqlite3.connect(tmp_path / "people.db") as conn:
            conn.execute("DROP TABLE messages")
        with caplog.at_level(logging.ERROR, logger="people_service"):
            response = client.get(f"/person/{person['id']}/messages", headers=headers)
        assert response.status_code == 500
        # no Retry-After of its own (a 503's): only flask-limiter's, beside its headers (11a)
        assert "Retry-After" not in response.headers or "X-RateLimit-Reset" in response.headers
        assert response.json["detail"] == "Internal server error."
        assert "no such table" in caplog.text  # the operator sees what the client does not
    finally:
        close_app(app)


def test_a_busy_database_is_a_503_with_a_short_retry_after(tmp_path, sqlite_only):
    path = tmp_path / "people.db"
    store = open_store(str(path))
    store.upgrade_schema()
    store.close()
    impatient = type(store)(str(path), busy_timeout=0.05)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(errors.Busy) as caught:
            with impatient.transaction():
                pass
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        impatient.close()
    answer = problem_response(caught.value)
    assert (answer.status_code, answer.headers["Retry-After"]) == (503, "1")


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
        assert usage._thread.is_alive()
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


def test_domain_errors_carry_no_status_or_headers():
    for cls in [errors.ServiceError, *errors.ServiceError.__subclasses__()]:
        assert not hasattr(cls, "status"), cls
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
