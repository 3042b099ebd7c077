"""The app under other WSGI servers (waitress-serve, gunicorn) and `serve --workers`."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from .conftest import ROOT, SECRET, ServerProcess, cli, database, free_port

PATTERN = re.compile(r"^(ps_\S+)$")


class WSGIServer:
    """A WSGI server command serving app:app from the repository root, on a free port."""

    def __init__(self, command: list[str], db: str, env: dict):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "PEOPLE_SERVICE_SECRET_KEY": SECRET}
        self.env.update({"PEOPLE_SERVICE_DATABASE": str(db), **env})
        self.command = [arg.replace("{port}", str(self.port)) for arg in command]
        self.stdout: list[str] = []
        self.stderr: list[str] = []

    def __enter__(self) -> WSGIServer:
        self.process = subprocess.Popen(
            self.command,
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.readers = [
            threading.Thread(target=self._drain, args=(stream, lines), daemon=True)
            for stream, lines in (
                (self.process.stdout, self.stdout),
                (self.process.stderr, self.stderr),
            )
        ]
        for reader in self.readers:
            reader.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("server exited:\n" + "\n".join(self.stderr))
            try:
                requests.get(self.url + "/health", timeout=5)
                return self
            except requests.RequestException:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("server did not answer:\n" + "\n".join(self.stderr))

    @staticmethod
    def _drain(stream, lines):
        for line in stream:
            lines.append(line.rstrip("\n"))

    def key(self) -> str:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for line in self.stdout:
                if PATTERN.match(line):
                    return line
            time.sleep(0.05)
        raise AssertionError(f"no key in {self.stdout}")

    def stop(self) -> int:
        if self.process.stdout.closed:
            return self.process.returncode
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            status = self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            status = self.process.wait(5)
        for reader in self.readers:
            reader.join(5)
        self.process.stdout.close()
        self.process.stderr.close()
        return status

    def __exit__(self, *exc):
        self.stop()

    def wait_for(self, predicate, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(predicate(line) for line in list(self.stderr)):
                return
            time.sleep(0.05)
        raise AssertionError(f"no such line in {self.stderr[-20:]}")


def requests_count(db, name: str) -> int:
    listing = cli("keys", "list", db=db).stdout.splitlines()
    row = next(line.split() for line in listing[1:] if line.split()[0] == name)
    return int(row[-2])


def test_waitress_serve_logs_honours_the_proxy_and_flushes_usage_at_exit(tmp_path, sqlite_only):
    db = database(tmp_path)
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
        headers = {"X-API-Key": server.key()}
        for _ in range(3):
            assert requests.get(server.url + "/people?limit=1", headers=headers).status_code == 200
        server.wait_for(lambda line: " demo GET /people?limit=1 200 " in line)
        anonymous = [
            requests.get(server.url + "/people", headers={"X-Forwarded-For": address})
            for address in ("9.9.9.9", "9.9.9.9", "9.9.9.9", "8.8.8.8")
        ]
        # the proxy's X-Forwarded-For names the client: 9.9.9.9 is limited, 8.8.8.8 is not
        assert [r.status_code for r in anonymous] == [401, 401, 429, 401]
        assert server.stop() in (0, -signal.SIGTERM)
    assert requests_count(db, "demo") == 3


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
        server.wait_for(lambda line: " tight GET /people?limit=1 429 " in line)
        assert server.stop() == 0
    assert requests_count(db, "tight") == 30  # every worker wrote its counts at exit


def test_serve_workers_shares_limits_replaces_a_crashed_worker_and_stops(tmp_path, gunicorn):
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
        workers = _children(server.process.pid)
        assert len(workers) == 2
        os.kill(workers[0], signal.SIGKILL)  # a worker crashes
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (
            workers[0] in _children(server.process.pid) or len(_children(server.process.pid)) < 2
        ):
            time.sleep(0.2)
        assert len(_children(server.process.pid)) == 2  # replaced
        assert server.request("GET", "/health").status_code == 200
    finally:
        assert server.stop() == 0


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
