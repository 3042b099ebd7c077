"""Fixtures: an app on a temporary SQLite file, credentials, and real servers on loopback."""

from __future__ import annotations

import functools
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import requests
from click.testing import CliRunner
from hypothesis import HealthCheck, settings

from people_service import config, create_app, credentials, transfer
from people_service.cli import main
from people_service.web import services

ROOT = Path(__file__).resolve().parent.parent
SECRET = "test-secret-that-is-long-enough-for-hs256-0123456789"
GENEROUS = "100000/minute"
POSTGRES = "postgresql://127.0.0.1:5432/test"
# GraphQL error codes that say the client asked for something wrong, never that the server failed
CLIENT_CODES = frozenset(
    {
        "BAD_USER_INPUT",
        "NOT_FOUND",
        "FORBIDDEN",
        "GRAPHQL_PARSE_FAILED",
        "GRAPHQL_VALIDATION_FAILED",
        "QUERY_TOO_COMPLEX",
        "BAD_REQUEST",
    }
)

# A background job (`pytest &` in a script) starts with SIGINT ignored, and a child inherits an
# ignored signal through exec: servers under test would not stop on SIGINT as they do for an
# operator's Ctrl-C. A handled signal is reset to the default in the child instead.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Tests hash passwords with a cheap work factor: in this process, the CLI's and every server's
CHEAP_HASH = "pbkdf2:sha256:1000"
os.environ.setdefault("PEOPLE_SERVICE_PASSWORD_HASH_METHOD", CHEAP_HASH)

# The backend the running tests use; the `backend` fixture switches it for a whole session pass.
ACTIVE = {"backend": "sqlite", "databases": {}, "schemas": []}


# Backends beyond the embedded ones run when asked (.ci/run asks): PostgreSQL runs every test
# a second time; Redis runs the tests marked `redis`. Asked for and not answering fails.
WANT_POSTGRES = os.environ.get("PEOPLE_SERVICE_TEST_POSTGRES", "") not in ("", "0")
WANT_REDIS = os.environ.get("PEOPLE_SERVICE_TEST_REDIS", "") not in ("", "0")

# Property tests: a short run by default, many examples with HYPOTHESIS_PROFILE=long (.ci/run)
settings.register_profile(
    "default", max_examples=25, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.register_profile("long", settings.get_profile("default"), max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
LONG_FUZZ = os.environ.get("HYPOTHESIS_PROFILE") == "long"  # schemathesis runs longer too


@functools.cache
def postgres_available() -> bool:
    try:
        import psycopg

        with psycopg.connect(POSTGRES, connect_timeout=2):
            return True
    except Exception:
        return False


@functools.cache
def redis_available() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture
def redis():
    """The Redis URL of the tests that need one: skipped unless PEOPLE_SERVICE_TEST_REDIS=1."""
    if not WANT_REDIS:
        pytest.skip("needs Redis: run with PEOPLE_SERVICE_TEST_REDIS=1")
    if not redis_available():
        pytest.fail("PEOPLE_SERVICE_TEST_REDIS is set, but no Redis answers on 127.0.0.1:6379")
    return "redis://127.0.0.1:6379"


@pytest.fixture(
    scope="session", params=["sqlite", "postgresql"] if WANT_POSTGRES else ["sqlite"], autouse=True
)
def backend(request):
    """Every test runs on SQLite, and again on PostgreSQL with PEOPLE_SERVICE_TEST_POSTGRES=1."""
    if request.param == "postgresql" and not postgres_available():
        pytest.fail(
            "PEOPLE_SERVICE_TEST_POSTGRES is set, but no PostgreSQL answers on "
            "127.0.0.1:5432 (database 'test')"
        )
    ACTIVE["backend"] = request.param
    yield request.param
    ACTIVE["backend"] = "sqlite"
    if request.param == "postgresql":
        import psycopg

        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            for schema in ACTIVE["schemas"]:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        ACTIVE["schemas"].clear()


def database(directory: Path) -> str:
    """The database of a test directory: a SQLite file in it, or a fresh PostgreSQL schema."""
    if ACTIVE["backend"] == "sqlite":
        return str(directory / "people.db")
    known = ACTIVE["databases"]
    if directory not in known:
        import psycopg

        schema = f"test_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        ACTIVE["schemas"].append(schema)
        known[directory] = f"{POSTGRES}?options=-csearch_path%3D{schema}"
    return known[directory]


@pytest.fixture
def sqlite_only():
    """For tests of what only a SQLite file has (pragmas, the file on disk)."""
    if ACTIVE["backend"] != "sqlite":
        pytest.skip("about the SQLite file itself")


def count_statements(store, run) -> int:
    """SQL statements the store runs in this thread during `run()`: SQLite's trace of this
    thread's connection, or the store's calls."""
    statements = []
    if ACTIVE["backend"] == "sqlite":
        conn = store._db().conn
        conn.set_trace_callback(statements.append)
        try:
            run()
        finally:
            conn.set_trace_callback(None)
        return len(statements)
    original, mine = store._execute, threading.get_ident()

    def counted(sql, params=()):
        if threading.get_ident() == mine:  # not the webhook worker's or the usage flush's
            statements.append(sql)
        return original(sql, params)

    store._execute = counted
    try:
        run()
    finally:
        del store._execute
    return len(statements)


def make_app(tmp_path, **overrides):
    config = {
        "DATABASE": database(tmp_path),
        "SECRET_KEY": SECRET,
        "RATE_LIMIT": GENEROUS,
        "ANONYMOUS_RATE_LIMIT": GENEROUS,
        "AUTH_RATE_LIMIT": GENEROUS,
        "LOG_LEVEL": "WARNING",
    }
    config.update(overrides)
    return create_app(config)


def close_app(app):
    services(app).close()  # its webhook worker, usage counts and connections


@pytest.fixture
def app(tmp_path):
    app = make_app(tmp_path)
    yield app
    close_app(app)


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def store(app):
    return services(app).store


def new_key(app, name, scopes="read,write", rate_limit=None):
    return credentials.create_key(services(app).store, name, scopes, rate_limit)


@pytest.fixture
def key(app):
    return new_key(app, "ci")


@pytest.fixture
def headers(key):
    """Credentials with scopes read and write."""
    return {"X-API-Key": key}


@pytest.fixture
def read_headers(app):
    return {"X-API-Key": new_key(app, "reader", "read")}


@pytest.fixture
def other_headers(app):
    """A second caller with read and write."""
    return {"X-API-Key": new_key(app, "other")}


@pytest.fixture
def admin_headers(app):
    return {"X-API-Key": new_key(app, "admin", "read,write,admin")}


@pytest.fixture
def make_person(client, headers):
    """Create a person through the API; returns its JSON."""

    def make(name="Ada Lovelace", **fields):
        response = client.post("/person", json={"name": name, **fields}, headers=headers)
        assert response.status_code == 201, response.json
        return response.json

    return make


@pytest.fixture
def gql(client, headers):
    """POST a GraphQL request through the test client; returns the response."""

    def run(query, variables=None, *, auth=None, **extra):
        body = {"query": query, **extra}
        if variables is not None:
            body["variables"] = variables
        return client.post("/graphql", json=body, headers=headers if auth is None else auth)

    return run


class Answer:
    """A test-client response with the parts of requests' Response the tests read."""

    def __init__(self, response, body):
        self.status_code = response.status_code
        self.headers = response.headers
        self.content = response.get_data()
        self.text = response.get_data(as_text=True)
        self.request = SimpleNamespace(body=body)

    def json(self):
        import json

        return json.loads(self.content)


class InProcess:
    """An app answered through Flask's test client, with ServerProcess's `request` (no port, no
    child process): for tests of what the app answers rather than of how it is served."""

    url = "http://localhost"

    def __init__(self, app, key):
        self.app, self.client = app, app.test_client()
        self.db = app.config["DATABASE"]
        self.key, self.headers = key, {"X-API-Key": key}

    def request(self, method, path, *, params=None, data=None, json=None, headers=None, **_):
        response = self.client.open(
            path, method=method, query_string=params, data=data, json=json, headers=headers
        )
        return Answer(response, data if json is None else json)


def demo_app(directory) -> InProcess:
    """The demo data and a key with generous limits, in this process."""
    app = make_app(directory)
    transfer.load_demo(services(app).store)
    return InProcess(app, new_key(app, "demo"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory, backend):
    """The demo in this process, for one test module (what `demo_server` answers, no server)."""
    served = demo_app(tmp_path_factory.mktemp("demo"))
    yield served
    close_app(served.app)


_GIVEN: set[int] = set()  # ports handed out in this test process: never the same one twice
_GIVEN_LOCK = threading.Lock()


def free_port() -> int:
    """A free loopback port no other server of this test process was given (two servers
    starting at once could otherwise both be told the same one)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        with _GIVEN_LOCK:
            if port not in _GIVEN:
                _GIVEN.add(port)
                return port


RUNNING: list[ServerProcess] = []  # started and not yet stopped: the finalizers below stop them


@pytest.fixture(autouse=True)
def stop_servers_left_running():
    """Stop every server a test started and left running, whether or not it failed."""
    before = list(RUNNING)
    yield
    for server in [server for server in RUNNING if server not in before]:
        server.stop()


@pytest.fixture(autouse=True, scope="session")
def stop_servers_at_the_end():
    """Stop the servers of fixtures that failed before their own finalizer was registered."""
    yield
    for server in list(RUNNING):
        server.stop()


@pytest.fixture
def spawn():
    """subprocess.Popen for a process a test starts itself: killed after the test if it still
    runs (a failed assertion, a stop that timed out), its pipes closed."""
    started: list[subprocess.Popen] = []

    def popen(*args, **kwargs) -> subprocess.Popen:
        started.append(subprocess.Popen(*args, **kwargs))
        return started[-1]

    yield popen
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()


class ServerProcess:
    """`people-service serve` in a child process on a free loopback port; stopped by a
    finalizer after the test (or the fixture) that started it, if it did not stop it."""

    READY = re.compile(r"ready on (http://127\.0\.0\.1:\d+)")

    def __init__(self, db, env: dict | None = None, args=()):
        self.db = str(db)
        self.env = {**os.environ, "PEOPLE_SERVICE_SECRET_KEY": SECRET, **(env or {})}
        self.args = list(args)
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.url = None
        self.process = None

    def command(self) -> list[str]:
        """The command line that starts the server (people-service serve on a free port).

        With PEOPLE_SERVICE_TEST_WORKERS=N in the environment, servers run N worker processes
        (gunicorn), unless a test chose for itself: CI runs the end-to-end tests that way too.
        """
        command = [sys.executable, "-m", "people_service.cli", "serve", "--db", self.db, "--demo"]
        workers = os.environ.get("PEOPLE_SERVICE_TEST_WORKERS")
        extra = ["--workers", workers] if workers and "--workers" not in self.args else []
        return [*command, "--port", str(free_port()), *extra, *self.args]

    def start(self, timeout: float = 30) -> ServerProcess:
        self.stdout.clear()
        self.stderr.clear()
        self.url = None
        self.process = subprocess.Popen(
            self.command(),
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        RUNNING.append(self)
        ready = threading.Event()

        def drain(stream, lines, watch):
            for line in stream:
                lines.append(line.rstrip("\n"))
                match = self.READY.search(line) if watch else None
                if match:
                    self.url = match.group(1)
                    ready.set()

        self.readers = [
            threading.Thread(target=drain, args=(self.process.stdout, self.stdout, False)),
            threading.Thread(target=drain, args=(self.process.stderr, self.stderr, True)),
        ]
        for reader in self.readers:
            reader.daemon = True
            reader.start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.1) and not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("server did not start:\n" + "\n".join(self.stderr))
        return self

    def answers(self) -> bool:
        """Whether a server whose URL is known up front answers /health (other WSGI servers
        print no ready line of ours)."""
        if self.url is None:
            return False
        try:
            return requests.get(self.url + "/health", timeout=5).status_code in (200, 503)
        except requests.RequestException:
            return False

    def wait_for_log(self, predicate, timeout: float = 10) -> str:
        """The first stderr line that satisfies `predicate` (the log is written by a thread)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.stderr):
                if predicate(line):
                    return line
            time.sleep(0.05)
        raise AssertionError(f"no such line in {self.stderr[-20:]}")

    def wait_for_output(self, predicate, timeout: float = 10) -> str:
        """The first stdout line that satisfies `predicate` (the drain thread may lag)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.stdout):
                if predicate(line):
                    return line.strip()
            time.sleep(0.05)
        raise AssertionError(f"no such line in {self.stdout}")

    def stop(self, sig=None, timeout: float = 20) -> int:
        """Signal the server (SIGTERM by default) and wait; returns its exit status."""
        if self.process is None:
            return 0
        if self in RUNNING:
            RUNNING.remove(self)
        if self.process.poll() is None:
            if sig is None:
                self.process.terminate()
            else:
                self.process.send_signal(sig)
        try:
            status = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            status = self.process.wait(5)
        for reader in self.readers:
            reader.join(5)
        self.process.stdout.close()
        self.process.stderr.close()
        return status

    def request(self, method, path, **kwargs):
        kwargs.setdefault("timeout", 30)
        return requests.request(method, self.url + path, **kwargs)


def start_demo(directory, **settings) -> ServerProcess:
    """The one way the fixtures start a real server on the demo: `people-service serve` on a
    fresh database in `directory`, generous limits unless `settings` (NAME=value, without the
    PEOPLE_SERVICE_ prefix) say otherwise, and the key it prints as `key` and `headers`."""
    env = {"RATE_LIMIT": GENEROUS, "ANONYMOUS_RATE_LIMIT": GENEROUS, **settings}
    env = {f"PEOPLE_SERVICE_{name}": str(value) for name, value in env.items()}
    server = ServerProcess(database(directory), env=env).start()
    server.key = server.wait_for_output(lambda line: line.startswith("ps_"))
    server.headers = {"X-API-Key": server.key}
    return server


@pytest.fixture(scope="session")
def live(tmp_path_factory, backend):
    """One real server for the end-to-end tests, started as the README says (demo data)."""
    anonymous = config.DEFAULTS["ANONYMOUS_RATE_LIMIT"]  # as a fresh install has it
    server = start_demo(tmp_path_factory.mktemp("live"), ANONYMOUS_RATE_LIMIT=anonymous)
    yield server
    server.stop()


def cli(*args, db=None, input=None, env=None, timeout=120):
    """Run the people-service command as `people-service ARGS --db DB` would: `serve` in a
    child process, every other command in this process (main() under click's CliRunner
    isolation: the same exit status, stdout and stderr, without starting Python again)."""
    argv = [*map(str, args), *(["--db", str(db)] if db is not None else [])]
    env = {"PEOPLE_SERVICE_SECRET_KEY": SECRET, **(env or {})}
    if args[:1] == ("serve",):
        return subprocess.run(
            [sys.executable, "-m", "people_service.cli", *argv],
            cwd=ROOT,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **env},
        )
    with CliRunner().isolation(input=input, env=env) as (stdout, stderr, _):
        status = main(argv)
    return subprocess.CompletedProcess(
        argv, status, stdout.getvalue().decode(), stderr.getvalue().decode()
    )


def demo_people() -> dict[str, dict]:
    """data/demo.json by id: the values a fresh demo server holds."""
    import json

    people = json.loads((ROOT / "data" / "demo.json").read_text())["people"]
    return {person["id"]: person for person in people}


class GraphQLClient:
    """Sends GraphQL requests to a real server by GET or by POST."""

    def __init__(self, server, headers):
        self.server, self.headers = server, headers

    def __call__(self, method, query, variables=None, operation=None, headers=None, **params):
        import json

        headers = {**self.headers, **(headers or {})}
        if method == "GET":
            args = {"query": query, **params}
            if variables is not None:
                args["variables"] = json.dumps(variables)
            if operation is not None:
                args["operationName"] = operation
            return self.server.request("GET", "/graphql", params=args, headers=headers)
        body = {"query": query}
        if variables is not None:
            body["variables"] = variables
        if operation is not None:
            body["operationName"] = operation
        return self.server.request("POST", "/graphql", json=body, headers=headers)


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory, backend):
    """A real server on a fresh copy of the demo, for one test module."""
    server = start_demo(tmp_path_factory.mktemp("demo"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def graphql(demo):
    """GraphQL by GET or POST to the demo, in this process."""
    return GraphQLClient(demo, demo.headers)
