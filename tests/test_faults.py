"""Faults around the real server: kill -9, full disk, read-only or missing file, bad clients."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import threading
import time
import uuid

import pytest
import requests

from people_service import credentials, errors
from people_service.store import open_store
from people_service.web import services
from people_service.web.problems import problem_response

from .conftest import ACTIVE, GENEROUS, ServerProcess, close_app, database, make_app

ENV = {"PEOPLE_SERVICE_RATE_LIMIT": GENEROUS, "PEOPLE_SERVICE_ANONYMOUS_RATE_LIMIT": GENEROUS}


def start(db, **env):
    server = ServerProcess(db, env={**ENV, **env}).start()
    server.key = server.wait_for_output(lambda line: line.startswith("ps_"))
    server.headers = {"X-API-Key": server.key}
    return server


def no_tracebacks(server):
    log = "\n".join(server.stderr)
    assert "Traceback" not in log, log[-3000:]


@contextlib.contextmanager
def small_filesystem(path, size="4m"):
    """A tmpfs of `size` at `path`: a disk that can fill up or turn read-only under the server."""
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(
            "cannot mount a small file system here (needs root): " + mounted.stderr.decode()
        )
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def writers(server, threads: int, stop: threading.Event, acked: list, lock: threading.Lock):
    """Threads that create people until `stop`, keeping (id, name) of every 201."""

    def run(index):
        session = requests.Session()
        n = 0
        while not stop.is_set() and n < 10_000:
            name = f"crash-{index}-{n}-{uuid.uuid4().hex[:6]}"
            n += 1
            try:
                response = session.post(
                    server.url + "/person", json={"name": name}, headers=server.headers, timeout=10
                )
            except requests.RequestException:
                continue
            if response.status_code == 201:
                with lock:
                    acked.append((response.json()["id"], name))
            else:
                assert response.status_code < 500 or response.status_code in (503, 507)

    workers = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(threads)]
    for worker in workers:
        worker.start()
    return workers


def assert_all_there(db, acked, headers, tmp_path):
    """After a restart every acknowledged write is there, and a SQLite file is intact."""
    if ACTIVE["backend"] == "sqlite":
        backup = tmp_path / "copy.db"
        shutil.copy(db, backup)
        with sqlite3.connect(backup) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    again = ServerProcess(db, env=ENV).start()
    try:
        for person_id, name in acked:
            response = again.request("GET", f"/person/{person_id}", headers=headers)
            assert response.status_code == 200 and response.json()["name"] == name
    finally:
        again.stop()


def busy_server(tmp_path, acknowledged: int):
    """A server with 8 threads creating people, once `acknowledged` of them got a 201."""
    db = database(tmp_path)
    server = start(db)
    acked, stop = [], threading.Event()
    workers = writers(server, 8, stop, acked, threading.Lock())
    deadline = time.monotonic() + 10
    while len(acked) < acknowledged and time.monotonic() < deadline:
        time.sleep(0.05)
    return db, server, acked, stop, workers


def test_kill_9_during_writes_loses_nothing_acknowledged(tmp_path):
    db, server, acked, stop, workers = busy_server(tmp_path, 200)
    server.process.kill()  # SIGKILL: no cleanup of any kind
    server.process.wait(10)
    stop.set()
    for worker in workers:
        worker.join(15)
    server.stop()
    assert len(acked) >= 200
    assert_all_there(db, acked, server.headers, tmp_path)


def test_full_disk_refuses_writes_keeps_reads_and_recovers(tmp_path, sqlite_only):
    with small_filesystem(tmp_path / "disk") as disk:
        server = start(disk / "people.db")
        try:
            filler = disk / "filler"
            with open(filler, "wb") as file:  # take every free byte
                with contextlib.suppress(OSError):
                    while True:
                        file.write(b"\0" * 65536)
                        file.flush()
            big = {"name": "n" * 200, "address": {"street": "s" * 200, "city": "c" * 200}}
            statuses = []
            for _ in range(3000):  # bounded: the WAL must grow into the full disk well before
                response = server.request("POST", "/person", json=big, headers=server.headers)
                statuses.append(response.status_code)
                if response.status_code != 201:
                    break
            refused = response
            assert refused.status_code == 507, statuses[-3:]
            assert refused.headers["Content-Type"] == "application/problem+json"
            assert "full" in refused.json()["detail"]
            before = int(
                server.request("GET", "/people?limit=1", headers=server.headers).headers[
                    "X-Total-Count"
                ]
            )
            assert before == statuses.count(201) + 62  # what was acknowledged, and nothing more
            filler.unlink()  # room again
            again = server.request(
                "POST", "/person", json={"name": "after"}, headers=server.headers
            )
            assert again.status_code == 201
            no_tracebacks(server)
        finally:
            server.stop()


def mount(*args):
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip("cannot mount here (needs root): " + done.stderr.strip())


def test_read_only_database_answers_503_and_recovers(tmp_path, sqlite_only):
    """The directory is swapped for a read-only view of itself while the server runs."""
    real, view = tmp_path / "real", tmp_path / "view"
    real.mkdir()
    view.mkdir()
    mount("--bind", str(real), str(view))
    server = start(view / "people.db")
    try:
        assert (
            server.request(
                "POST", "/person", json={"name": "before"}, headers=server.headers
            ).status_code
            == 201
        )
        subprocess.run(["umount", "-l", str(view)], check=True)
        mount("--bind", str(real), str(view))
        mount("-o", "remount,bind,ro", str(view))
        health = server.request("GET", "/health")
        assert health.status_code == 503
        assert health.json() == {"status": "unavailable", "database": "read-only"}
        for path, body in (
            ("/person", {"name": "during"}),
            ("/message", {"person_id": "1", "content": "x"}),
        ):
            write = server.request("POST", path, json=body, headers=server.headers)
            assert write.status_code == 503
            assert write.headers["Content-Type"] == "application/problem+json"
            assert write.json()["detail"] == "The database is read-only; nothing was written."
        read = server.request("GET", "/people?name=before", headers=server.headers)
        assert read.status_code in (200, 503)
        subprocess.run(["umount", "-l", str(view)], check=True)
        mount("--bind", str(real), str(view))
        assert server.request("GET", "/health").status_code == 200
        after = server.request("POST", "/person", json={"name": "after"}, headers=server.headers)
        assert after.status_code == 201
        names = [
            p["name"]
            for p in server.request("GET", "/people?limit=1000", headers=server.headers).json()
        ]
        assert "before" in names and "after" in names and "during" not in names
        no_tracebacks(server)
    finally:
        server.stop()
        subprocess.run(["umount", "-l", str(view)], capture_output=True)


def test_missing_database_file_answers_503_and_the_process_stays_up(tmp_path, sqlite_only):
    """Writes and /health notice a removed file at once; reads through connections already open
    may go on until the next start (SPEC 12a), but nothing makes an empty database again."""
    db = tmp_path / "people.db"
    server = start(db)
    try:
        os.unlink(db)
        for path, body in (("/person", {"name": "lost?"}), ("/person", {"name": "x"})):
            write = server.request("POST", path, json=body, headers=server.headers)
            assert write.status_code == 503  # a write checks the file every time
        health = server.request("GET", "/health")
        assert health.status_code == 503
        assert health.json()["database"] == "missing"
        for method, path, body in (
            ("GET", "/people", None),
            ("POST", "/graphql", {"query": "{ me { name } }"}),
        ):
            response = server.request(method, path, json=body, headers=server.headers)
            assert response.status_code in (200, 503), (path, response.text)
        assert not db.exists()  # nothing recreated an empty database behind the operator's back
        assert server.process.poll() is None
        no_tracebacks(server)
    finally:
        server.stop()


def test_slow_and_broken_clients_do_not_hold_up_others(tmp_path):
    server = start(database(tmp_path), PEOPLE_SERVICE_ANONYMOUS_RATE_LIMIT=GENEROUS)
    host, port = "127.0.0.1", int(server.url.rsplit(":", 1)[1])
    sockets, stop = [], threading.Event()
    try:
        for _ in range(200):  # connections that send nothing
            sockets.append(socket.create_connection((host, port), timeout=5))
        stalled = socket.create_connection((host, port), timeout=5)  # stops mid-body
        stalled.sendall(
            b"POST /person HTTP/1.1\r\nHost: x\r\nX-API-Key: "
            + server.key.encode()
            + b"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            + b'{"name": "half'
        )
        sockets.append(stalled)

        def slowloris():
            sock = socket.create_connection((host, port), timeout=5)
            sockets.append(sock)
            for byte in b"GET /people HTTP/1.1\r\nHost: slow\r\nX-Slow: " + b"a" * 100:
                if stop.is_set():
                    return
                sock.sendall(bytes([byte]))
                time.sleep(0.02)

        threading.Thread(target=slowloris, daemon=True).start()
        time.sleep(0.3)
        for _ in range(20):
            started = time.monotonic()
            assert server.request("GET", "/health", timeout=5).status_code == 200
            made = server.request(
                "POST", "/person", json={"name": "served"}, headers=server.headers, timeout=5
            )
            assert made.status_code == 201
            assert time.monotonic() - started < 1.0
        names = [
            p["name"]
            for p in server.request("GET", "/people?limit=1000", headers=server.headers).json()
        ]
        assert names.count("served") == 20
        assert not any(name.startswith("half") for name in names)
    finally:
        stop.set()
        for sock in sockets:
            sock.close()
        server.stop()


def test_sigterm_finishes_in_flight_requests_and_exits_0(tmp_path):
    db, server, acked, stop, workers = busy_server(tmp_path, 100)
    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    status = server.process.wait(15)
    stopped_in = time.monotonic() - started
    stop.set()
    for worker in workers:
        worker.join(15)
    server.stop()
    assert status == 0
    assert stopped_in < 10
    assert "people-service stopped" in "\n".join(server.stderr)
    no_tracebacks(server)
    assert_all_there(db, acked, server.headers, tmp_path)


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


def test_writers_of_one_process_wait_their_turn_at_most_the_busy_timeout(tmp_path, sqlite_only):
    """A process's writers take turns on its own lock: one that waits longer than the busy
    timeout is Busy (503), as with another process's lock, and the next turn comes after."""
    path = tmp_path / "people.db"
    store = open_store(str(path))
    store.upgrade_schema()
    store.close()
    impatient = type(store)(str(path), busy_timeout=0.2)
    held, done = threading.Event(), threading.Event()

    def hold():
        with impatient.transaction():
            held.set()
            done.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        started = time.monotonic()
        with pytest.raises(errors.Busy):
            with impatient.transaction():
                pass
        assert 0.15 <= time.monotonic() - started < 5
    finally:
        done.set()
        holder.join(10)
    with impatient.transaction():  # the turn came back
        pass
    impatient.close()
