"""Logging: one line per record whatever a client sent, a bounded queue, any WSGI server."""

from __future__ import annotations

import io
import logging
import logging.handlers
import sys
import time

from people_service import logs


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
    producer = logging.handlers.QueueHandler(logs.Batches(2))
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
        assert producer.queue.dropped == 3
        listener.start()  # the output flows again
        drain(producer.queue)
        log.warning("line 5")
        drain(producer.queue)
        listener.stop()
    finally:
        log.removeHandler(producer)
    written = stream.getvalue().splitlines()
    assert written == [
        "line 0",
        "line 1",
        "3 log lines were dropped: stderr did not keep up",
        "line 5",
    ]


def drain(lines: logs.Batches) -> None:
    deadline = time.monotonic() + 5
    while (lines.items or lines.dropped) and time.monotonic() < deadline:
        time.sleep(0.01)


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
