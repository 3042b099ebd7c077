"""deploy/nginx.conf in front of `people-service serve --workers 2` and of gunicorn with
deploy/gunicorn.conf.py, as docs/deployment.md recommends: slow clients are nginx's, the
client's address reaches the app, a mount prefix, logins limited per address, the port kept,
and 503 when the service does not answer."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import requests

from .conftest import ROOT, ServerProcess, cli, database, free_port

NGINX = shutil.which("nginx") or next(
    (path for path in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.path.exists(path)), None
)
CONF = ROOT / "deploy" / "nginx.conf"
GUNICORN_CONF = ROOT / "deploy" / "gunicorn.conf.py"
TRICKLERS = 300
HEADER_TIMEOUT = 10  # deploy/nginx.conf's client_header_timeout
ROOT_LOCATION = "    location / {\n        proxy_pass http://people_service;\n    }\n"
PREFIX_LOCATION = "    # location /api/ {\n    #     proxy_pass http://people_service;\n    # }\n"


@pytest.fixture(scope="module")
def nginx_binary() -> str:
    if NGINX is None:
        if os.environ.get("REQUIRE_NGINX_TESTS"):
            pytest.fail("REQUIRE_NGINX_TESTS is set, but there is no nginx binary")
        pytest.skip("needs nginx (Debian: apt-get install nginx; .ci/run installs it)")
    return NGINX


def replaced(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"deploy/nginx.conf no longer has {old!r}"
    return text.replace(old, new)


class Nginx:
    """nginx in the foreground with its own prefix, pid file and logs under `directory`, serving
    deploy/nginx.conf with its two ports substituted (8000 -> a free one, 8080 -> upstream)."""

    def __init__(self, binary: str, directory, upstream: str, prefix: bool = False):
        self.directory = directory
        self.port = free_port()
        site = replaced(CONF.read_text(), "listen 8000;", f"listen 127.0.0.1:{self.port};")
        site = replaced(site, "server 127.0.0.1:8080;", f"server {upstream};")
        if prefix:  # the commented variant instead of `location /`
            site = replaced(site, ROOT_LOCATION, "")
            site = replaced(site, PREFIX_LOCATION, PREFIX_LOCATION.replace("# ", ""))
        (directory / "site.conf").write_text(site)
        temp = " ".join(
            f"{kind}_temp_path {directory / kind};"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        # as root, nginx's workers would run as nobody, who cannot enter pytest's directories
        user = "user root root;" if os.geteuid() == 0 else ""
        (directory / "nginx.conf").write_text(
            f"daemon off; worker_processes 1; {user}\n"
            f"pid {directory / 'nginx.pid'}; error_log {directory / 'error.log'} info;\n"
            "events { worker_connections 1024; }\n"
            f"http {{ access_log off; {temp}\n include {directory / 'site.conf'}; }}\n"
        )
        self.process = subprocess.Popen(
            [binary, "-p", str(directory), "-e", str(directory / "error.log"), "-c", "nginx.conf"],
            cwd=directory,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("nginx did not start:\n" + self.log()) from None
                time.sleep(0.05)

    def log(self) -> str:
        path = self.directory / "error.log"
        return path.read_text() if path.exists() else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)  # graceful: workers finish, then exit
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def upstream(server) -> str:
    return server.url.removeprefix("http://")


@pytest.fixture(scope="module")
def front(nginx_binary, tmp_path_factory):
    """`serve --workers 2` trusting 127.0.0.1 (nginx), with nginx in front of it."""
    settings = {
        "PEOPLE_SERVICE_TRUSTED_PROXY": "127.0.0.1",
        "PEOPLE_SERVICE_ANONYMOUS_RATE_LIMIT": "3/minute",
    }
    server = ServerProcess(
        database(tmp_path_factory.mktemp("nginx-app")), env=settings, args=["--workers", "2"]
    ).start()
    proxy = None
    try:
        proxy = Nginx(nginx_binary, tmp_path_factory.mktemp("nginx"), upstream(server))
        proxy.server = server
        yield proxy
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()


def trickle(url: str, count: int, seconds: float, closed: dict, stop: threading.Event):
    """`count` connections sending one header line a second, never ending their headers; when
    each was closed (seconds since they started) goes into `closed`."""
    host, port = url.removeprefix("http://").split(":")
    sockets = [socket.create_connection((host, int(port)), timeout=10) for _ in range(count)]
    started = time.monotonic()
    for sock in sockets:
        sock.sendall(b"GET /people HTTP/1.1\r\nHost: x\r\n")
        sock.setblocking(False)
    for n in range(int(seconds)):  # bounded: `seconds` lines at most
        if stop.wait(1) or len(closed) == count:
            break
        for index, sock in enumerate(sockets):
            if index in closed:
                continue
            try:
                if sock.recv(4096) == b"":  # closed (nginx sends nothing on a header timeout)
                    closed[index] = time.monotonic() - started
                    continue
            except BlockingIOError:
                pass  # still open
            except OSError:
                closed[index] = time.monotonic() - started
                continue
            try:
                sock.sendall(f"X-Slow-{n}: 1\r\n".encode())
            except OSError:
                closed[index] = time.monotonic() - started
    for sock in sockets:
        sock.close()


def stalled_bodies(url: str, count: int) -> list[socket.socket]:
    """`count` requests whose headers are whole and whose body stops after 10 of 100 bytes."""
    host, port = url.removeprefix("http://").split(":")
    head = b"POST /person HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    opened = []
    for _ in range(count):
        sock = socket.create_connection((host, int(port)), timeout=HEADER_TIMEOUT + 10)
        sock.sendall(head + b'Content-Length: 100\r\n\r\n{"name": "')
        opened.append(sock)
    return opened


def test_clients_trickling_headers_are_cut_off_by_nginx_while_others_are_served(front):
    closed: dict[int, float] = {}
    stop = threading.Event()
    thread = threading.Thread(
        target=trickle, args=(front.url, TRICKLERS, HEADER_TIMEOUT + 10, closed, stop)
    )
    thread.start()
    stalled = stalled_bodies(front.url, 20)  # and bodies that stop: client_body_timeout
    try:
        time.sleep(2)  # every trickler is connected and has sent a few lines
        slowest = 0.0
        while thread.is_alive() and len(closed) < TRICKLERS:
            started = time.monotonic()
            assert requests.get(front.url + "/health", timeout=10).status_code == 200
            slowest = max(slowest, time.monotonic() - started)
            time.sleep(0.5)
        thread.join(30)
        for sock in stalled:  # closed (perhaps after a 408), never passed on to the app
            answer = sock.recv(4096)
            assert answer == b"" or answer.startswith(b"HTTP/1.1 408"), answer[:100]
    finally:
        stop.set()
        thread.join(30)
        for sock in stalled:
            sock.close()
    assert len(closed) == TRICKLERS, f"{TRICKLERS - len(closed)} trickling clients still open"
    # each is closed within nginx's header timeout (and a second of its timers), never served
    assert max(closed.values()) < HEADER_TIMEOUT + 3, sorted(closed.values())[-5:]
    assert min(closed.values()) > HEADER_TIMEOUT - 2
    assert slowest < 1, f"/health took {slowest:.2f} s through nginx"
    assert "client timed out" in front.log()


def from_address(address: str) -> requests.Session:
    """A session whose connections come from `address` (any 127.x.y.z is this machine)."""
    session = requests.Session()
    adapter = requests.adapters.HTTPAdapter()
    adapter.init_poolmanager(1, 1, source_address=(address, 0))
    session.mount("http://", adapter)
    return session


def test_the_client_address_reaches_the_app_through_trusted_proxy(front):
    """The anonymous limit (3 a minute) is counted per client address: nginx's X-Forwarded-For
    (replacing whatever the client sent) is what the app counts, not nginx's own address."""
    spoofed = {"X-Forwarded-For": "203.0.113.9"}  # what a client claims: replaced by nginx
    with from_address("127.0.0.2") as first, from_address("127.0.0.3") as second:
        answers = [first.get(front.url + "/people", headers=spoofed, timeout=10) for _ in range(4)]
        assert [answer.status_code for answer in answers] == [401, 401, 401, 429]
        # another client of the same proxy has its own budget
        assert second.get(front.url + "/people", timeout=10).status_code == 401
    # nginx itself (127.0.0.1, trusted) is never the address that was counted
    assert requests.get(front.url + "/people", timeout=10).status_code == 401


def test_a_body_over_the_limit_is_refused_by_nginx_as_problem_json(front):
    answer = requests.post(
        front.url + "/person",
        data=b"x" * (1024 * 1024 + 1),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert answer.status_code == 413
    assert answer.headers["Content-Type"] == "application/problem+json"
    assert answer.json()["status"] == 413


def test_a_chunked_body_reaches_the_app_whole(front):
    """nginx reads a chunked body itself and passes it on with a length."""

    def one_byte_chunks():
        yield from (bytes([byte]) for byte in b'{"name": "Ada"}')

    answer = requests.post(
        front.url + "/person",
        data=one_byte_chunks(),
        headers={"Content-Type": "application/json", "X-API-Key": "ps_unknown"},
        timeout=30,
    )
    assert answer.status_code == 401  # read and answered by the app, not a framing error
    assert answer.headers["Content-Type"] == "application/problem+json"


def test_the_app_works_under_a_prefix(nginx_binary, tmp_path):
    server = ServerProcess(
        database(tmp_path), args=["--workers", "2", "--url-prefix", "/api"]
    ).start()
    (tmp_path / "nginx").mkdir()
    proxy = None
    try:
        key = {"X-API-Key": server.wait_for_output(lambda line: line.startswith("ps_"))}
        proxy = Nginx(nginx_binary, tmp_path / "nginx", upstream(server), prefix=True)
        api = proxy.url + "/api"
        assert requests.get(api + "/health", timeout=10).json()["status"] == "ok"
        made = requests.post(api + "/person", json={"name": "Ada"}, headers=key, timeout=10)
        assert made.status_code == 201
        assert made.headers["Location"] == f"/api/person/{made.json()['id']}"
        assert requests.get(proxy.url + made.headers["Location"], headers=key).status_code == 200
        front_page = requests.get(api + "/", headers={"Accept": "text/html"}, timeout=10).text
        assert 'href="/api/docs"' in front_page
        explorer = requests.get(api + "/graphql", headers={"Accept": "text/html"}, timeout=10)
        assets = [part.split('"')[0] for part in explorer.text.split('src="static/')[1:]]
        assert assets
        for asset in assets:  # relative to /api/graphql: under the prefix
            got = requests.get(f"{api}/static/{asset.replace('&amp;', '&')}", timeout=10)
            assert got.status_code == 200, asset
        assert requests.get(proxy.url + "/health", timeout=10).status_code == 404  # only /api/
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()


def test_logins_are_limited_per_address_by_nginx(front):
    """1 a second and a burst of 5 per address; beyond that nginx answers 429 itself."""
    login = {"username": "nobody", "password": "not a password at all"}
    with from_address("127.0.0.4") as flood, from_address("127.0.0.5") as other:
        answers = [flood.post(front.url + "/auth/token", json=login, timeout=10) for _ in range(9)]
        refused = [a for a in answers if a.json().get("detail", "").startswith("Too many logins")]
        assert len(refused) >= 3
        for answer in refused:
            assert answer.status_code == 429
            assert answer.headers["Content-Type"] == "application/problem+json"
            assert answer.headers["Retry-After"] == "1"
        # another address is not limited by the first one's logins
        assert (
            "Too many logins"
            not in other.post(front.url + "/auth/token", json=login, timeout=10).text
        )
    assert requests.get(front.url + "/health", timeout=10).status_code == 200  # only logins


class Gunicorn(ServerProcess):
    """`gunicorn -c deploy/gunicorn.conf.py app:app`, bound to a free port instead of 8080."""

    def command(self) -> list[str]:
        self.url = f"http://127.0.0.1:{free_port()}"
        bind = self.url.removeprefix("http://")
        return [sys.executable, "-m", "gunicorn", "-c", str(GUNICORN_CONF), "-b", bind, "app:app"]


def gunicorn(db, **env) -> Gunicorn:
    pytest.importorskip("gunicorn")
    return Gunicorn(db, env={"PEOPLE_SERVICE_DATABASE": str(db), **env}).start()


def test_gunicorn_conf_binds_where_nginx_proxies_to():
    site = CONF.read_text()
    namespace = {}
    exec(GUNICORN_CONF.read_text(), namespace)
    assert f"server {namespace['bind']};" in site
    assert (namespace["workers"], namespace["threads"]) == (2, 8)
    assert namespace["worker_class"] == "gthread"


def test_behind_nginx_and_gunicorn_the_port_is_kept_and_a_stopped_service_is_503(
    nginx_binary, tmp_path
):
    server = gunicorn(database(tmp_path))
    (tmp_path / "nginx").mkdir()
    proxy = None
    try:
        proxy = Nginx(nginx_binary, tmp_path / "nginx", upstream(server))
        page = requests.get(proxy.url + "/", headers={"Accept": "text/html"}, timeout=10)
        assert page.status_code == 200
        assert f"curl -i &#39;{proxy.url}/people?limit=5&#39;" in page.text  # nginx's port
        assert server.stop() == 0
        for method in ("GET", "POST"):
            answer = requests.request(method, proxy.url + "/people", timeout=10)
            assert answer.status_code == 503
            assert answer.headers["Retry-After"] == "5"
            assert answer.headers["Content-Type"] == "application/problem+json"
            assert answer.json()["status"] == 503
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()


def test_sigterm_ends_open_streams_under_gunicorn_conf(tmp_path):
    """A stream is not an in-flight request to wait graceful_timeout (30 s) for."""
    if not (ROOT / "people_service" / "runtime.py").exists():
        pytest.skip("needs people_service/runtime.py (end_streams)")
    db = database(tmp_path)
    key = cli("keys", "create", "--name", "reader", db=db).stdout.split()[-1]
    server = gunicorn(db)
    try:
        headers = {"X-API-Key": key, "Accept": "text/event-stream"}
        with requests.get(server.url + "/events", headers=headers, stream=True, timeout=10) as got:
            assert got.status_code == 200
            started = time.monotonic()
            server.process.terminate()
            for _ in got.iter_content(None):  # until the server ends the stream
                pass
            assert time.monotonic() - started < 3
        assert server.stop() == 0
    finally:
        server.stop()
