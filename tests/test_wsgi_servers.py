"""Serving: `serve` (the demo only when asked, slow clients, workers, stop signals) and the app
under other WSGI servers (waitress-serve, gunicorn)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from .conftest import ROOT, SECRET, ServerProcess, cli, database, free_port


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


class PlainServer(ServerProcess):
    """`people-service serve --db` as an operator starts it: without --demo."""

    def command(self) -> list[str]:
        return [arg for arg in super().command() if arg != "--demo"]


def address(server) -> tuple[str, int]:
    return "127.0.0.1", int(server.url.rsplit(":", 1)[1])


def exported_people(db) -> list:
    result = cli("export", db=db)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["people"]


# -- production starts clean: the demo is opt-in ---------------------------------------------


def test_an_empty_database_named_by_db_starts_empty_and_prints_no_key(tmp_path):
    db = database(tmp_path)
    server = PlainServer(db).start()
    try:
        ready = server.wait_for_log(lambda line: "ready on" in line)
        # the hint names the database served: run as printed, it makes a key there
        assert f"`people-service keys create NAME --db {shlex.quote(str(db))}`" in ready
        assert server.request("GET", "/health").status_code == 200
        assert server.request("GET", "/people").status_code == 401
    finally:
        assert server.stop() == 0
    assert not any("ps_" in line for line in server.stdout)
    assert server.stdout == []
    assert exported_people(db) == []
    assert "ps_" not in cli("keys", "list", db=db).stdout
    assert cli("keys", "create", "NAME", "--db", str(db)).returncode == 0
    assert "NAME" in cli("keys", "list", db=db).stdout


def test_demo_loads_the_demo_into_any_empty_database(tmp_path):
    server = ServerProcess(database(tmp_path)).start()  # conftest's servers pass --demo
    try:
        key = server.wait_for_output(lambda line: line.startswith("ps_"))
        assert "keys create" not in server.wait_for_log(lambda line: "ready on" in line)
        response = server.request("GET", "/people", headers={"X-API-Key": key})
        assert response.status_code == 200
        assert int(response.headers["X-Total-Count"]) >= 50
    finally:
        assert server.stop() == 0


def test_a_database_with_data_gets_no_demo_even_with_demo(tmp_path):
    db = database(tmp_path)
    cli("keys", "create", "--name", "ops", db=db)
    server = ServerProcess(db).start()
    try:
        ready = server.wait_for_log(lambda line: "ready on" in line)
        assert "keys create" not in ready  # it has a key
    finally:
        assert server.stop() == 0
    assert not any(line.startswith("ps_") for line in server.stdout)
    assert exported_people(db) == []


def test_the_default_database_loads_the_demo_on_its_first_start(tmp_path, sqlite_only, spawn):
    env = {k: v for k, v in os.environ.items() if k != "PEOPLE_SERVICE_DATABASE"}
    port = free_port()
    process = spawn(
        [sys.executable, "-m", "people_service.cli", "serve", "--port", str(port)],
        cwd=tmp_path,  # data/people.db of a fresh directory
        env={**env, "PEOPLE_SERVICE_SECRET_KEY": SECRET},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until_it_answers(f"http://127.0.0.1:{port}", process)
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert "Loaded the demo data" in out
    assert out.strip().splitlines()[-1].startswith("ps_")
    assert (tmp_path / "data" / "people.db").exists()


def wait_until_it_answers(url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if requests.get(url + "/health", timeout=5).status_code == 200:
                return
        except requests.RequestException:  # refused, or slow to answer under load
            time.sleep(0.1)
    raise AssertionError(f"{url} did not answer")


@pytest.mark.parametrize("module", ["people_service.wsgi", "app"])
def test_importing_the_wsgi_app_prints_nothing_creates_nothing_and_keeps_signals(tmp_path, module):
    db = database(tmp_path)
    probe = (
        f"import signal; import {module} as m; "
        "assert m.app.wsgi_app; "
        "assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={**os.environ, "PEOPLE_SERVICE_DATABASE": db, "PEOPLE_SERVICE_SECRET_KEY": SECRET},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""
    if os.path.isabs(db):  # a SQLite file: not even created
        assert not os.path.exists(db)
        return
    assert exported_people(db) == []
    assert "ps_" not in cli("keys", "list", db=db).stdout


def test_waitress_serve_app_app_serves_without_demo_or_key(tmp_path, spawn):
    db = database(tmp_path)
    port = free_port()
    process = spawn(
        [sys.executable, "-m", "waitress", f"--listen=127.0.0.1:{port}", "app:app"],
        cwd=ROOT,
        env={**os.environ, "PEOPLE_SERVICE_DATABASE": db, "PEOPLE_SERVICE_SECRET_KEY": SECRET},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until_it_answers(f"http://127.0.0.1:{port}", process)
    finally:
        process.send_signal(signal.SIGINT)  # waitress-serve's own clean stop
        out, _ = process.communicate(timeout=20)
    assert process.returncode == 0
    assert out == ""
    assert exported_people(db) == []


# -- slow clients ------------------------------------------------------------------------------

SLOW = 48


def slow_sockets(server, count: int, stop: threading.Event) -> tuple[list, threading.Thread]:
    """`count` connections that send one header line a second and never finish their request."""
    sockets = [socket.create_connection(address(server), timeout=10) for _ in range(count)]
    for sock in sockets:
        sock.sendall(b"GET /people HTTP/1.1\r\nHost: x\r\n")

    def trickle():
        for n in range(60):  # bounded: a minute at most
            if stop.wait(1):
                return
            for sock in sockets:
                sock.sendall(f"X-Slow-{n}: 1\r\n".encode())

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    return sockets, thread


@pytest.mark.parametrize("workers", ["1", "2"])
def test_slow_header_clients_up_to_the_connection_limit_do_not_stop_others(tmp_path, workers):
    # each process counts its listening socket and waitress's wake-up pipe as connections:
    # SLOW + 4 leaves room for the normal client (with 2 workers, even for SLOW on one)
    limit = str(SLOW + 4)
    args = ["--workers", workers, "--connection-limit", limit, "--channel-timeout", "3"]
    server = ServerProcess(database(tmp_path), args=args).start()
    stop = threading.Event()
    try:
        server.request("GET", "/health")  # the workers are up
        sockets, thread = slow_sockets(server, SLOW, stop)
        time.sleep(2)  # the slow ones have sent a few lines each
        for _ in range(5):
            started = time.monotonic()
            response = requests.get(server.url + "/health", timeout=10)  # a new connection
            assert response.status_code == 200
            assert time.monotonic() - started < 2
        time.sleep(2)
        stop.set()
        thread.join(5)
        for sock in sockets:  # every slow socket was still open: they really held their slots
            sock.setblocking(False)
            with pytest.raises(BlockingIOError):
                sock.recv(1)
            sock.close()
    finally:
        stop.set()
        assert server.stop() == 0


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize(
    "partial",
    [
        b"GET /people HTTP/1.1\r\nHost: x\r\n",
        b'POST /person HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"name":',
    ],
    ids=["headers", "body"],
)
def test_a_client_that_stops_sending_is_closed_after_the_channel_timeout(
    tmp_path, workers, partial
):
    args = ["--workers", workers, "--channel-timeout", "1"]
    server = ServerProcess(database(tmp_path), args=args).start()
    try:
        server.request("GET", "/health")
        with socket.create_connection(address(server), timeout=15) as sock:
            sock.sendall(partial)
            started = time.monotonic()
            assert sock.recv(4096) == b""  # closed, with no answer
            assert 0.5 < time.monotonic() - started < 8
    finally:
        assert server.stop() == 0


# -- several workers on one port -------------------------------------------------------------


def workers_of(server) -> list[int]:
    """The worker processes of a `serve --workers 2` (forked after its ready line)."""
    deadline = time.monotonic() + 20
    while len(found := _children(server.process.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(found) == 2
    return found


def test_workers_stop_cleanly_on_sigterm_and_sigint(tmp_path):
    db = database(tmp_path)
    for sig in (signal.SIGTERM, signal.SIGINT):
        server = ServerProcess(db, args=["--workers", "2"]).start()
        assert server.request("GET", "/health").status_code == 200
        workers = workers_of(server)
        assert server.stop(sig) == 0
        assert "people-service stopped" in "\n".join(server.stderr)
        assert "Traceback" not in "\n".join(server.stderr)
        assert not any(alive(pid) for pid in workers)


def test_workers_finish_the_requests_they_run_when_stopped(tmp_path):
    db = database(tmp_path)
    server = ServerProcess(db, args=["--workers", "2"]).start()
    headers = {"X-API-Key": server.wait_for_output(lambda line: line.startswith("ps_"))}
    acked, stop = [], threading.Event()

    def write(index):
        session = requests.Session()
        for n in range(2000):
            if stop.is_set():
                return
            try:
                made = session.post(
                    server.url + "/person", json={"name": f"w{index}-{n}"}, headers=headers
                )
            except requests.RequestException:
                continue  # refused or closed while stopping: never acknowledged
            assert made.status_code < 500, made.text
            acked.append(made.json()["id"])

    with ThreadPoolExecutor(6) as pool:
        for index in range(6):
            pool.submit(write, index)
        deadline = time.monotonic() + 20
        while len(acked) < 60 and time.monotonic() < deadline:
            time.sleep(0.05)
        status = server.stop()
        stop.set()
    assert status == 0
    assert len(acked) >= 60
    stored = {person["id"] for person in exported_people(db)}
    assert {str(person_id) for person_id in acked} <= stored


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its parent to reap it has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_workers_end_when_their_parent_is_killed(tmp_path):
    server = ServerProcess(database(tmp_path), args=["--workers", "2"]).start()
    workers = workers_of(server)
    server.process.kill()
    deadline = time.monotonic() + 15
    while any(alive(pid) for pid in workers):
        assert time.monotonic() < deadline, "workers kept serving without their parent"
        time.sleep(0.1)
    server.stop()


def test_a_worker_that_dies_is_replaced_and_every_connection_is_served(tmp_path):
    """Its socket stays in the parent (SO_REUSEPORT): without a new worker on it, the kernel
    would keep giving it a share of new connections that nobody accepts."""
    server = ServerProcess(database(tmp_path), args=["--workers", "2"]).start()
    workers = workers_of(server)
    os.kill(workers[0], signal.SIGKILL)
    deadline = time.monotonic() + 20
    while (
        set(_children(server.process.pid)) & set(workers) != {workers[1]}
        or len(_children(server.process.pid)) < 2
    ):
        assert time.monotonic() < deadline, "no new worker"
        time.sleep(0.1)
    server.wait_for_log(lambda line: f"worker {workers[0]} ended" in line)
    for _ in range(20):  # new connections each: both sockets get some
        assert requests.get(server.url + "/health", timeout=10).status_code == 200
    assert server.stop() == 0


def connections_by_process(pids: list[int], port: int) -> dict[int, int]:
    """How many established TCP connections to `port` each process holds (Linux /proc)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as file:
            for row in list(file)[1:]:
                fields = row.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                    inodes.add(fields[9])
    held = {}
    for pid in pids:
        links = (os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd"))
        held[pid] = sum(1 for link in links if link.strip("socket:[]") in inodes)
    return held


def test_workers_share_the_connections(tmp_path):
    """Each worker listens on a socket of its own (SO_REUSEPORT): the kernel spreads new
    connections between them, instead of one worker taking most of them."""
    server = ServerProcess(database(tmp_path), args=["--workers", "2"]).start()
    sessions = [requests.Session() for _ in range(16)]
    try:
        workers = workers_of(server)
        for session in sessions:  # keep-alive: each session keeps its one connection
            assert session.get(server.url + "/health", timeout=10).status_code == 200
        held = connections_by_process(workers, address(server)[1])
        assert sum(held.values()) == 16
        assert min(held.values()) >= 2, held
    finally:
        for session in sessions:
            session.close()
        assert server.stop() == 0


def test_a_second_server_with_workers_cannot_share_the_port_of_the_first(tmp_path):
    """SO_REUSEPORT would let it join the first server's port: it is refused instead."""
    server = ServerProcess(database(tmp_path), args=["--workers", "2"]).start()
    try:
        port = str(address(server)[1])
        result = cli("serve", "--port", port, "--workers", "2", db=database(tmp_path), timeout=30)
        assert result.returncode == 1
        assert "address already in use" in result.stderr
    finally:
        assert server.stop() == 0


def open_files_limit(pid: int) -> int:
    with open(f"/proc/{pid}/limits") as limits:
        line = next(line for line in limits if line.startswith("Max open files"))
    return int(line.split()[3])


def idle_connections(server, count: int) -> list[socket.socket]:
    opened = []
    for _ in range(count):
        opened.append(socket.create_connection(address(server), timeout=5))
    return opened


@pytest.mark.skipif(not os.path.exists("/proc/self/limits"), reason="needs Linux's /proc")
@pytest.mark.parametrize(
    ("limit", "held", "select"),
    [("250", 240, True), ("1200", 1100, False)],
    ids=["select", "poll"],
)
def test_connections_near_the_limit_are_watched_by_select_or_poll(tmp_path, limit, held, select):
    # select() below 1024 descriptors, with the process's open-file limit at 1024 so that no
    # descriptor can be out of its range; poll() beyond, with the limit raised to fit
    server = ServerProcess(database(tmp_path), args=["--connection-limit", limit]).start()
    opened = []
    try:
        files = open_files_limit(server.process.pid)
        assert files == 1024 if select else files >= 3 * int(limit)
        opened = idle_connections(server, held)
        time.sleep(1)  # accepted: each holds a descriptor of the server
        response = requests.get(server.url + "/health", timeout=10)
        assert response.status_code == 200
        descriptors = len(os.listdir(f"/proc/{server.process.pid}/fd"))
        assert descriptors > held  # the idle connections really are open in the server
        assert descriptors < 1024 if select else descriptors > 1024
    finally:
        for sock in opened:
            sock.close()
        assert server.stop() == 0


def spooling_connections(server, count: int) -> list[socket.socket]:
    """Connections that each sent, with no credentials, more of a body than waitress keeps in
    memory (512 KiB): it spools each to a file, a second descriptor per connection."""
    head = b"POST /people HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    head += b"Content-Length: 1000000\r\n\r\n"
    chunk = b" " * (530 * 1024)
    opened = []
    for _ in range(count):
        sock = socket.create_connection(address(server), timeout=10)
        sock.sendall(head + chunk)
        opened.append(sock)
    return opened


class Limited(PlainServer):
    """The server under an operator's `ulimit -n 400` (hard 2200), through util-linux's prlimit."""

    def command(self) -> list[str]:
        return ["prlimit", "--nofile=400:2200", *super().command()]


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/limits"), reason="needs Linux's /proc")
@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs util-linux's prlimit")
def test_spooled_bodies_up_to_the_connection_limit_do_not_exhaust_descriptors(tmp_path):
    # each connection may hold its socket and two spool files, so the server raises its own
    # limit to fit them all (here beyond select()'s 1024), or refuses to start
    args = ["--connection-limit", "600", "--channel-timeout", "30"]
    server = Limited(database(tmp_path), args=args).start()
    opened = []
    try:
        assert open_files_limit(server.process.pid) >= 3 * 600
        opened = spooling_connections(server, 560)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # waitress reads the bodies one after another
            descriptors = len(os.listdir(f"/proc/{server.process.pid}/fd"))
            if descriptors > 2 * 560:  # every body really is spooled to a file
                break
            time.sleep(0.2)
        assert descriptors > 2 * 560
        started = time.monotonic()
        assert requests.get(server.url + "/health", timeout=10).status_code == 200
        assert time.monotonic() - started < 2
        assert not any("Too many open files" in line for line in server.stderr)
    finally:
        for sock in opened:
            sock.close()
        assert server.stop() == 0


# A finalizer drops the exception a signal's handler raises in it, as io does while it closes a
# collected file (a body waitress spooled for a client that left): the first SIGTERM is lost.
LOST_STOP = """
import os, select, signal, sys
from people_service.cli import main

class Collected:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(10))  # the handler runs here, and its SystemExit is printed and dropped

def select_once(*args, _select=select.select):
    select.select = _select
    Collected()  # collected at once, in waitress's loop
    return _select(*args)

select.select = select_once  # waitress's loop calls it once serving
sys.exit(main(sys.argv[1:]))
"""


def test_a_stop_signal_lost_in_a_finalizer_still_stops_the_server(tmp_path):
    command = [sys.executable, "-c", LOST_STOP, "serve", "--db", str(tmp_path / "people.db")]
    started = time.monotonic()
    result = subprocess.run(
        [*command, "--port", str(free_port())], capture_output=True, text=True, timeout=60
    )
    assert "Exception ignored" in result.stderr and "SystemExit" in result.stderr
    assert "people-service ready" in result.stderr  # it served after losing the signal
    assert "people-service stopped" in result.stderr
    assert result.returncode == 0
    assert time.monotonic() - started < 30  # sent again after 7 s, not waited on for ever


def test_a_second_signal_while_the_server_exits_changes_nothing(tmp_path):
    # Ctrl-C and a supervisor's SIGTERM: the second comes while Python exits, which resets
    # handlers of its own to the default (killed by the signal)
    server = PlainServer(database(tmp_path)).start()
    try:
        assert requests.get(server.url + "/health", timeout=10).status_code == 200  # serving
        server.process.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 20
        while not any("people-service stopped" in line for line in server.stderr):
            assert time.monotonic() < deadline, "no stop"
            time.sleep(0.001)
        while server.process.poll() is None and time.monotonic() < deadline:
            server.process.send_signal(signal.SIGTERM)
            time.sleep(0.005)
    finally:
        assert server.stop() == 0


def test_the_connection_limit_counts_clients_only(tmp_path):
    # waitress counts its own listening socket and wake-up pipe: limits 1 and 2 served nobody
    server = PlainServer(database(tmp_path), args=["--connection-limit", "1"]).start()
    try:
        assert requests.get(server.url + "/health", timeout=10).status_code == 200
        with socket.create_connection(address(server), timeout=5) as held:
            time.sleep(0.5)  # accepted: the one connection allowed
            waiting = socket.create_connection(address(server), timeout=1)  # in the backlog
            waiting.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            with pytest.raises(TimeoutError):
                waiting.recv(100)
            held.close()
            with waiting:
                waiting.settimeout(10)
                assert waiting.recv(100).startswith(b"HTTP/1.1 200")
    finally:
        assert server.stop() == 0


def test_waitress_serve_answers_health_503_json_from_the_first_request_on_a_bad_database(
    tmp_path, sqlite_only
):
    broken = tmp_path / "people.db"
    broken.write_bytes(b"this is not a SQLite database" * 100)
    command = [sys.executable, "-m", "waitress", "--listen=127.0.0.1:{port}", "app:app"]
    with WSGIServer(command, str(broken)) as server:
        first = requests.get(server.url + "/health", timeout=10)
        assert first.status_code == 503
        assert first.json() == {"status": "unavailable", "database": "unreadable"}
        assert first.headers["Retry-After"] == "5"
        people = requests.get(server.url + "/people", headers={"X-API-Key": "ps_x"}, timeout=10)
        assert people.status_code == 503
        assert people.headers["Content-Type"] == "application/problem+json"
        assert int(people.headers["Retry-After"]) >= 1
        assert server.stop(signal.SIGINT) == 0
