"""The app under other WSGI servers (waitress-serve, gunicorn) and `serve --workers`."""

from __future__ import annotations

import os
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from .conftest import ServerProcess, cli, database, free_port


class WSGIServer(ServerProcess):
    """Another WSGI server command serving app:app from the repository root, on a free port."""

    def __init__(self, command: list[str], db: str, env: dict | None = None):
        super().__init__(db, env={"PEOPLE_SERVICE_DATABASE": str(db), **(env or {})})
        self.template = command

    def command(self) -> list[str]:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        return [arg.replace("{port}", str(port)) for arg in self.template]

    def __enter__(self) -> WSGIServer:
        return self.start()

    def __exit__(self, *exc):
        if not self.process.stdout.closed:
            self.stop()


def requests_count(db, name: str) -> int:
    listing = cli("keys", "list", db=db).stdout.splitlines()
    row = next(line.split() for line in listing[1:] if line.split()[0] == name)
    return int(row[-2])


def test_waitress_serve_logs_honours_the_proxy_and_flushes_usage_at_exit(tmp_path, sqlite_only):
    db = database(tmp_path)
    key = cli("keys", "create", "--name", "ops", db=db).stdout.split()[-1]  # app:app makes none
    env = {
        "PEOPLE_SERVICE_TRUSTED_PROXY": "127.0.0.1",
        "PEOPLE_SERVICE_ANONYMOUS_RATE_LIMIT": "2/day",
        "PEOPLE_SERVICE_USAGE_FLUSH_SECONDS": "3600",  # only the flush at exit can write them
    }
    command = [
        sys.executable,
        "-m",
        "waitress",
        "--listen=127.0.0.1:{port}",
        # waitress drops forwarded headers of peers it was not told to trust, before any app
        # sees them; this leaves the decision to the app's TRUSTED_PROXY
        "--no-clear-untrusted-proxy-headers",
        "app:app",
    ]
    with WSGIServer(command, db, env) as server:
        headers = {"X-API-Key": key}
        for _ in range(3):
            assert requests.get(server.url + "/people?limit=1", headers=headers).status_code == 200
        server.wait_for_log(lambda line: " ops GET /people?limit=1 200 " in line)
        anonymous = [
            requests.get(server.url + "/people", headers={"X-Forwarded-For": address})
            for address in ("9.9.9.9", "9.9.9.9", "9.9.9.9", "8.8.8.8")
        ]
        # the proxy's X-Forwarded-For names the client: 9.9.9.9 is limited, 8.8.8.8 is not
        assert [r.status_code for r in anonymous] == [401, 401, 429, 401]
        # waitress-serve stops cleanly on SIGINT (on SIGTERM it dies at once, as loading the
        # app installs no signal handler): the counts are written at exit
        assert server.stop(signal.SIGINT) == 0
    assert requests_count(db, "ops") == 3


@pytest.fixture
def gunicorn():
    pytest.importorskip("gunicorn")
    return [sys.executable, "-m", "gunicorn", "--bind", "127.0.0.1:{port}"]


def test_gunicorn_with_two_workers_shares_limits_and_logs(tmp_path, sqlite_only, gunicorn):
    db = database(tmp_path)
    key = cli("keys", "create", "--name", "tight", "--rate-limit", "10/day", db=db)
    key = key.stdout.split()[-1]
    command = [*gunicorn, "--workers", "2", "--threads", "4", "app:app"]
    with WSGIServer(command, db, {"PEOPLE_SERVICE_USAGE_FLUSH_SECONDS": "3600"}) as server:
        headers = {"X-API-Key": key}

        def get(_):
            return requests.get(server.url + "/people?limit=1", headers=headers).status_code

        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(get, range(30)))
        assert statuses.count(200) == 10 and statuses.count(429) == 20
        server.wait_for_log(lambda line: " tight GET /people?limit=1 429 " in line)
        assert server.stop() == 0
    assert requests_count(db, "tight") == 30  # every worker wrote its counts at exit


def test_serve_workers_shares_limits_replaces_a_crashed_worker_and_stops(tmp_path):
    db = database(tmp_path)
    key = cli("keys", "create", "--name", "tight", "--rate-limit", "6/day", db=db)
    key = key.stdout.split()[-1]
    server = ServerProcess(db, args=["--workers", "2", "--threads", "2"]).start()
    try:
        headers = {"X-API-Key": key}

        def get(_):
            return server.request("GET", "/people?limit=1", headers=headers).status_code

        with ThreadPoolExecutor(6) as pool:
            statuses = list(pool.map(get, range(18)))
        assert statuses.count(200) == 6 and statuses.count(429) == 12
        workers = _wait_for_workers(server.process.pid, 2)
        os.kill(workers[0], signal.SIGKILL)  # a worker crashes
        replaced = _wait_for_workers(server.process.pid, 2, gone=workers[0])
        assert workers[0] not in replaced  # the parent started another in its place
        assert server.request("GET", "/health").status_code == 200
    finally:
        assert server.stop() == 0


def _wait_for_workers(pid: int, count: int, gone: int | None = None) -> list[int]:
    """The workers once there are `count` of them (and `gone` is not among them); they are
    forked after the ready line, so right after start-up there may be fewer."""
    deadline = time.monotonic() + 20
    workers = _children(pid)
    while time.monotonic() < deadline and (len(workers) != count or gone in workers):
        time.sleep(0.1)
        workers = _children(pid)
    assert len(workers) == count and gone not in workers, workers
    return workers


def _children(pid: int) -> list[int]:
    """The process ids whose parent is `pid` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as file:
                fields = file.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return sorted(found)
