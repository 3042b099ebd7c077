"""Logging: one line per record whatever a client sent, a bounded queue, any WSGI server."""

from __future__ import annotations

import io
import logging
import logging.handlers
import queue
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from people_service import logs

from .conftest import ROOT, ServerProcess, database
from .test_wsgi_servers import WSGIServer


def test_escape_turns_control_characters_into_visible_text():
    assert logs.escape("plain /people?name=ada") == "plain /people?name=ada"
    escaped = logs.escape("a\nb\rc\td\x1b[31m\x00\u2028\x85")
    assert escaped == "a\\nb\\rc\\td\\x1b[31m\\x00\\u2028\\x85"


def test_a_record_is_one_line_and_a_traceback_is_indented():
    formatter = logs.OneLineFormatter()
    try:
        raise ValueError("bad\n2026-11-23T00:00:00 forged line")
    except ValueError:
        record = logging.getLogger("t").makeRecord(
            "t", logging.ERROR, __file__, 1, "got %s", ("x\ny",), exc_info=sys.exc_info()
        )
    lines = formatter.format(record).splitlines()
    assert lines[0] == "ERROR t [-]: got x\\ny"
    assert all(line.startswith("    ") for line in lines[1:])
    assert any("forged line" in line for line in lines[1:])


def test_a_full_queue_drops_lines_counts_them_and_never_blocks():
    producer = logs.DroppingQueueHandler(queue.Queue(3))
    producer.setFormatter(logging.Formatter("%(message)s"))
    log = logging.getLogger("people_service.test_full_queue")
    log.addHandler(producer)
    log.propagate = False
    stream = io.StringIO()
    listener = logging.handlers.QueueListener(producer.queue, logging.StreamHandler(stream))
    try:
        started = time.monotonic()
        for number in range(5):
            log.warning("line %d", number)
        assert time.monotonic() - started < 1  # nothing waited for the stalled output
        assert producer.dropped == 2
        listener.start()  # the output flows again
        deadline = time.monotonic() + 5
        while not producer.queue.empty() and time.monotonic() < deadline:
            time.sleep(0.01)
        log.warning("line 5")
        listener.stop()  # writes what is queued
    finally:
        log.removeHandler(producer)
    written = stream.getvalue().splitlines()
    assert written == [
        "line 0",
        "line 1",
        "line 2",
        "2 log lines were dropped: stderr did not keep up",
        "line 5",
    ]


def test_a_newline_in_the_path_cannot_forge_an_access_line(live):
    forged = "2026-11-23T00:00:00 0000 admin DELETE /person/1 204 1.0ms"
    path = "/x%0A" + forged.replace(" ", "%20")
    assert live.request("GET", path).status_code == 404
    # the access line is written by a thread: wait for it
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any("/x%0A2026" in line for line in live.stderr):
        time.sleep(0.05)
    assert any("GET /x%0A2026-11-23T00:00:00" in line for line in live.stderr)
    assert not any(line.startswith(forged[:19]) for line in live.stderr)


def test_credentials_a_client_puts_in_the_url_are_not_written_to_the_log(live):
    """Keys and tokens are never read from a URL, but a client may still put them there (curl
    -G, params=...): the access line must not keep them, nor a password given that way."""
    import jwt

    from .conftest import SECRET

    token = jwt.encode({"sub": "ada", "scope": "read", "iat": 1, "exp": 2}, SECRET)
    sent = [
        f"/me?api_key={live.key}",
        f"/people?token={token}",
        "/auth/token?username=ada&password=correct%20horse%20battery%20staple",
        f"/person/{live.key}",
        f"/graphql?query=%7Bme%7Bname%7D%7D&access_token={live.key}",
    ]
    for path in sent:
        assert live.request("GET", path).status_code in (400, 401, 404, 405)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and sum("[redacted]" in x for x in live.stderr) < 5:
        time.sleep(0.05)
    logged = "\n".join(live.stderr)
    assert live.key not in logged and token not in logged and "battery" not in logged
    for start in ("/me?api_key=[redacted]", "/people?token=[redacted]", "password=[redacted]"):
        assert start in logged
    assert "GET /person/[redacted] 404" in logged


def test_redact_leaves_ordinary_paths_alone_and_hides_credentials():
    assert logs.redact("/people?name=monkey&sort=-age") == "/people?name=monkey&sort=-age"
    assert logs.redact("/person/17") == "/person/17"
    key = "ps_" + "A" * 43
    assert logs.redact(f"/x?apiKey={key}&a=1") == "/x?apiKey=[redacted]&a=1"
    assert logs.redact(f"/x?q={key}") == "/x?q=[redacted]"
    assert logs.redact("/auth/token?PASSWORD=x%20y&u=1") == "/auth/token?PASSWORD=[redacted]&u=1"


def logged(server, request_id: str) -> str:
    """The access line of the request with this X-Request-ID (written by a thread: wait)."""
    return server.wait_for_log(lambda line: f" {request_id} " in line)


def fields(line: str) -> list[str]:
    """time, request id, caller, method, URL, status, duration."""
    return line.split(" ")


HOSTILE = {
    # each about 60 KB, under the 64 KB header limit; without credentials
    "key-repeated": "/nowhere?" + "key" * 20_000,
    "key-parameters": "/nowhere?" + "&key" * 15_000,
    "secret-names": "/nowhere?" + "passwordtoken&" * 4_200,
    "jwt-prefix-path": "/" + "eyJ" * 20_000,
    "jwt-prefix-query": "/nowhere?a=" + "eyJ" * 20_000,
    "jwt-dots": "/nowhere/" + "eyJ." * 15_000,
    "key-prefix": "/nowhere/" + "ps_" * 20_000,
    "percent-spaces": "/nowhere/" + "%20" * 20_000,
    "key-then-words": "/nowhere?api_key={key}&" + "key" * 20_000,
}


@pytest.mark.parametrize("shape", HOSTILE.keys())
def test_hostile_urls_cost_little_and_their_log_line_is_bounded(live, shape):
    url, request_id = HOSTILE[shape].replace("{key}", live.key), "hostile-" + shape
    started = time.monotonic()
    response = live.request("GET", url, headers={"X-Request-ID": request_id}, timeout=30)
    elapsed = time.monotonic() - started
    assert response.status_code == 404
    assert elapsed < 1.0  # the quadratic redaction took seconds
    line = logged(live, request_id)
    assert len(line) < 10_000 and line.endswith("ms")
    assert fields(line)[5] == "404" and len(fields(line)) == 7
    assert live.key not in line


def test_a_credential_cut_off_by_the_length_bound_is_not_logged_in_part(live):
    # the bound falls inside the key: none of it is written, nor the password after it
    filler = "/nowhere?" + "a=b&" * ((logs.MAX_URL - 12) // 4)
    assert len(filler) == logs.MAX_URL - 3
    url = filler + "x=" + live.key + "&password=" + "p" * 5000
    live.request("GET", url, headers={"X-Request-ID": "cut-credential"})
    line = logged(live, "cut-credential")
    assert live.key[:6] not in line and "pppp" not in line
    assert "&a=b&" in line and "[cut]" in line


def test_spaces_and_bidi_characters_cannot_forge_access_line_fields(live):
    live.request("GET", "/people%20200%200.4ms%20FAKE", headers={"X-Request-ID": "forge-1"})
    line = logged(live, "forge-1")
    assert fields(line)[2:] == ["-", "GET", "/people%20200%200.4ms%20FAKE", "404", fields(line)[6]]
    # a right-to-left override (U+202E) in the path reaches the app decoded
    live.request("GET", "/x%E2%80%AEabc?q=%E2%80%AE1%20", headers={"X-Request-ID": "forge-2"})
    line = logged(live, "forge-2")
    assert "\u202e" not in line and "\\u202e" not in line
    assert fields(line)[4] == "/x%E2%80%AEabc?q=%E2%80%AE1%20"


def test_a_404_with_a_key_is_not_a_use_of_the_key(live):
    """The access log names only a caller the request itself authenticated: looking one up
    for the log would count a use, so counts would depend on the log level."""

    def count() -> int:
        return live.request("GET", "/me", headers=live.headers).json()["request_count"]

    before = count()
    for _ in range(3):
        response = live.request("GET", "/nowhere", headers={**live.headers, "X-Request-ID": "k404"})
        assert response.status_code == 404
    assert count() == before + 1  # the second /me only
    assert fields(logged(live, "k404"))[2] == "-"


def test_no_answer_sets_a_cookie(live):
    for path, headers in [
        ("/", {"Accept": "text/html"}),
        ("/graphql", {"Accept": "text/html"}),
        ("/docs", {}),
        ("/people", live.headers),
        ("/people", {}),
        ("/nowhere", live.headers),
    ]:
        response = live.request("GET", path, headers=headers)
        assert "Set-Cookie" not in response.headers, path
    response = live.request("POST", "/auth/token", data={"username": "x", "password": "y" * 20})
    assert "Set-Cookie" not in response.headers


def test_loading_the_app_sets_up_no_logging_and_the_first_request_does(tmp_path):
    script = f"""
import logging, sys, threading
from people_service import create_app
app = create_app({{"DATABASE": {str(tmp_path / "people.db")!r}, "SECRET_KEY": "x" * 40}})
package = logging.getLogger("people_service")
assert not package.handlers and not logging.getLogger().handlers and package.propagate
assert not any(thread.name.endswith("(_monitor)") for thread in threading.enumerate())
logging.basicConfig()  # as waitress-serve does, after loading the app
app.test_client().get("/people", headers={{"X-Request-ID": "first-1"}})
assert package.handlers and not package.propagate
assert any(thread.name.endswith("(_monitor)") for thread in threading.enumerate())
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if " first-1 " in line]
    assert len(lines) == 1 and lines[0].endswith("ms") and " GET /people 401 " in lines[0]


def _serve(db, workers: str):
    return ServerProcess(db, args=["--workers", workers, "--threads", "4"])


def _wsgi(command: list[str]):
    return lambda db: WSGIServer(command, db, {})


MODES = {
    "serve": lambda db: _serve(db, "1"),
    "serve-workers": lambda db: _serve(db, "2"),
    "waitress-serve": _wsgi(
        [sys.executable, "-m", "waitress", "--listen=127.0.0.1:{port}", "app:app"]
    ),
    "gunicorn": _wsgi(
        [sys.executable, "-m", "gunicorn", "--bind", "127.0.0.1:{port}", "-w", "2", "app:app"]
    ),
}


@pytest.mark.parametrize("mode", MODES.keys())
def test_one_access_line_per_request_and_unique_ids_in_every_serving_mode(
    tmp_path, sqlite_only, mode
):
    if mode != "serve" and mode != "waitress-serve":
        pytest.importorskip("gunicorn")
    server = MODES[mode](database(tmp_path)).start()
    try:

        def get(number: int) -> str:
            path = "/health" if number % 2 else f"/nowhere-{number}"
            response = requests.get(server.url + path, headers={"Connection": "close"}, timeout=30)
            return response.headers["X-Request-ID"]

        with ThreadPoolExecutor(8) as pool:
            ids = list(pool.map(get, range(40)))
        assert len(set(ids)) == len(ids)
        for request_id in ids:
            logged(server, request_id)
        time.sleep(0.5)  # a second line, if any, would be written by now
        for request_id in ids:
            assert sum(f" {request_id} " in line for line in server.stderr) == 1, request_id
    finally:
        server.stop()


def test_a_logged_url_is_one_field_in_the_form_it_was_sent():
    plain = "/people/17?name=Ada%20L&limit=1"
    assert logs.logged_url("/people/17", b"name=Ada%20L&limit=1") == plain
    assert (
        logs.logged_url("/a b\n\u202e%?", b"q=\xe2\x80\xae ")
        == "/a%20b%0A%E2%80%AE%25%3F?q=%E2%80%AE%20"
    )
    key = "ps_" + "A" * 43
    expected = "/x/[redacted]?password=[redacted]&a=1"
    assert logs.logged_url(f"/x/{key}", b"password=x&a=1") == expected
