"""The feed (SPEC 11c): GET /events after a cursor, and the same URL as an event stream."""

from __future__ import annotations

import http.client
import json
import signal
import threading
import time
from urllib.parse import urlsplit

import pytest
import requests

from people_service import feed
from people_service.web import services

from .conftest import (
    ACTIVE,
    GENEROUS,
    ServerProcess,
    cli,
    close_app,
    database,
    make_app,
    new_key,
    start_demo,
)
from .test_errors import assert_problem

SSE = {"Accept": "text/event-stream"}


def created(client, headers, count, prefix="P"):
    for number in range(count):
        response = client.post("/person", json={"name": f"{prefix}{number}"}, headers=headers)
        assert response.status_code == 201


def ids(events) -> list[str]:
    return [event["id"] for event in events]


def prune_through(store, event_id: int) -> None:
    """What retention leaves behind: the events up to `event_id` gone, and the mark."""
    with store.transaction():
        store._execute("DELETE FROM events WHERE id <= ?", (event_id,))
        store._execute(
            "INSERT INTO settings (name, value) VALUES ('events_pruned_through', ?)",
            (str(event_id),),
        )


# ---- pages ----------------------------------------------------------------------------------


def test_events_come_by_id_with_a_next_link_until_the_last_page(client, headers):
    created(client, headers, 5)
    first = client.get("/events?limit=2", headers=headers)
    assert first.status_code == 200
    assert ids(first.json) == ["1", "2"]
    assert first.headers["Link"] == '</events?after=2&limit=2>; rel="next"'
    second = client.get("/events?after=2&limit=2", headers=headers)
    assert ids(second.json) == ["3", "4"]
    last = client.get("/events?after=4&limit=2", headers=headers)
    assert ids(last.json) == ["5"]
    assert "Link" not in last.headers
    assert client.get("/events?after=5", headers=headers).json == []


def test_an_event_is_what_spec_11c_shows(client, headers):
    created(client, headers, 1)
    (event,) = client.get("/events", headers=headers).json
    assert event.keys() == {"id", "type", "timestamp", "data"}
    assert (event["id"], event["type"]) == ("1", "person.created")
    assert event["data"] == client.get("/person/1", headers=headers).json


def test_the_default_limit_is_100(client, headers, store):
    created(client, headers, 101)
    page = client.get("/events", headers=headers)
    assert len(page.json) == 100
    assert page.headers["Link"] == '</events?after=100&limit=100>; rel="next"'


def test_type_keeps_the_types_named_and_the_next_link_keeps_type(client, headers):
    created(client, headers, 3)
    client.delete("/person/1", headers=headers)
    client.delete("/person/2", headers=headers)
    page = client.get("/events?type=person.deleted,friendship.created&limit=1", headers=headers)
    assert [(e["type"], e["data"]) for e in page.json] == [("person.deleted", {"id": "1"})]
    assert page.headers["Link"] == (
        '</events?after=4&limit=1&type=person.deleted,friendship.created>; rel="next"'
    )


def test_messages_are_shown_to_their_sender_and_admin_only(
    client, headers, other_headers, admin_headers, read_headers
):
    created(client, headers, 1)
    sent = client.post("/message", json={"person_id": "1", "content": "Hi"}, headers=headers).json
    mine = client.get("/events?type=message.created", headers=headers).json
    assert [event["data"] for event in mine] == [sent]
    assert client.get("/events?type=message.created", headers=other_headers).json == []
    assert ids(client.get("/events", headers=read_headers).json) == ["1"]
    assert ids(client.get("/events", headers=admin_headers).json) == ["1", "2"]


def test_an_after_older_than_the_events_kept_is_410(client, headers, store):
    created(client, headers, 5)
    prune_through(store, 3)
    assert_problem(client.get("/events?after=2", headers=headers), 410)
    assert_problem(client.get("/events?after=0", headers=headers), 410)
    assert ids(client.get("/events?after=3", headers=headers).json) == ["4", "5"]
    # without after: from the oldest event kept
    assert ids(client.get("/events", headers=headers).json) == ["4", "5"]


@pytest.mark.parametrize(
    "query, name",
    [
        ("after=x", "after"),
        ("after=-1", "after"),
        ("after=01", "after"),
        ("after=", "after"),
        ("after=99999999999999999999", "after"),
        ("after=5%0A", "after"),  # Python's `$` alone would take the newline
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=ten", "limit"),
        ("type=person.born", "type"),
        ("type=", "type"),
        ("type=person.created,,person.deleted", "type"),
        ("type=person.created%0A", "type"),
        ("offset=3", "offset"),
    ],
)
def test_a_bad_parameter_is_400_naming_it(client, headers, query, name):
    body = assert_problem(client.get(f"/events?{query}", headers=headers), 400)
    assert list(body["errors"]) == [name]
    assert name in body["detail"]


def test_the_feed_needs_credentials(client):
    assert_problem(client.get("/events"), 401)
    assert_problem(client.get("/events", headers=SSE), 401)


def test_openapi_documents_the_feed(client):
    operation = client.get("/openapi.json").json["paths"]["/events"]["get"]
    assert operation["operationId"] == "list_events"
    assert {"200", "default"} <= operation["responses"].keys()
    assert "text/event-stream" in operation["description"]
    assert {p.get("name") for p in operation["parameters"]} >= {"Last-Event-ID"}


# ---- the stream in this process -------------------------------------------------------------


@pytest.fixture
def short(tmp_path):
    from .conftest import close_app

    app = make_app(tmp_path, EVENT_STREAM_SECONDS=1, EVENT_STREAMS=1)
    yield app
    close_app(app)


def read_stream(response) -> str:
    try:
        return b"".join(response.response).decode()
    finally:
        response.close()


def parse(text: str) -> list[dict]:
    """Server-sent events as dicts of their fields (comments kept under ':')."""
    blocks = []
    for block in text.split("\n\n"):
        if not block:
            continue
        fields: dict = {}
        for line in block.split("\n"):
            name, _, value = line.partition(":")
            fields.setdefault(name, []).append(value.removeprefix(" "))
        blocks.append({name: "\n".join(values) for name, values in fields.items()})
    return blocks


def test_the_stream_sends_id_event_and_data_after_last_event_id_then_a_retry_hint(short):
    client, headers = short.test_client(), {"X-API-Key": new_key(short, "s")}
    created(client, headers, 3)
    response = client.get(
        "/events?after=1", headers={**headers, **SSE, "Last-Event-ID": "2"}, buffered=False
    )
    assert response.status_code == 200
    assert response.mimetype == "text/event-stream"
    assert response.headers["Cache-Control"] == "no-store"
    blocks = parse(read_stream(response))
    sent = [block for block in blocks if "id" in block]
    assert [(b["id"], b["event"]) for b in sent] == [("3", "person.created")]
    assert json.loads(sent[0]["data"]) == client.get("/events?after=2", headers=headers).json[0]
    assert blocks[-1] == {"retry": "1000"}


def test_the_stream_starts_after_after_without_last_event_id_and_filters_types(short):
    client, headers = short.test_client(), {"X-API-Key": new_key(short, "s")}
    created(client, headers, 3)
    client.delete("/person/3", headers=headers)
    response = client.get(
        "/events?after=1&type=person.deleted", headers={**headers, **SSE}, buffered=False
    )
    sent = [block for block in parse(read_stream(response)) if "id" in block]
    assert [(b["id"], b["event"]) for b in sent] == [("4", "person.deleted")]


def test_a_stream_without_a_cursor_starts_from_now(short):
    client, headers = short.test_client(), {"X-API-Key": new_key(short, "s")}
    created(client, headers, 2)
    response = client.get("/events", headers={**headers, **SSE}, buffered=False)
    assert [b for b in parse(read_stream(response)) if "id" in b] == []


def test_a_bad_or_pruned_last_event_id_is_refused(short):
    client, headers = short.test_client(), {"X-API-Key": new_key(short, "s")}
    created(client, headers, 3)
    bad = assert_problem(
        client.get("/events", headers={**headers, **SSE, "Last-Event-ID": "x"}), 400
    )
    assert list(bad["errors"]) == ["Last-Event-ID"]
    from people_service.web import services

    prune_through(services(short).store, 2)
    gone = client.get("/events", headers={**headers, **SSE, "Last-Event-ID": "1"})
    assert_problem(gone, 410)


def test_one_stream_more_than_event_streams_is_503_with_retry_after(short):
    client, headers = short.test_client(), {"X-API-Key": new_key(short, "s")}
    first = client.get("/events", headers={**headers, **SSE}, buffered=False)
    assert first.status_code == 200
    refused = client.get("/events", headers={**headers, **SSE})
    assert_problem(refused, 503)
    assert int(refused.headers["Retry-After"]) >= 5  # its own, never lowered (SPEC 11a)
    assert client.get("/events", headers=headers).status_code == 200  # pages still answer
    first.close()  # the stream ends (the client left): its slot is free again
    again = client.get("/events", headers={**headers, **SSE}, buffered=False)
    assert again.status_code == 200
    again.close()


class Reader:
    """An in-process stream read in a thread: its text so far, and whether it ended."""

    def __init__(self, app, headers: dict):
        self.response = app.test_client().get("/events", headers={**SSE, **headers}, buffered=False)
        self.chunks, self.ended = [], threading.Event()
        self.thread = threading.Thread(target=self.read, daemon=True)
        if self.response.status_code == 200:
            self.thread.start()

    def read(self) -> None:
        for chunk in self.response.response:
            self.chunks.append(chunk.decode())
        self.response.close()  # its slot is free again
        self.ended.set()

    def text(self) -> str:
        return "".join(self.chunks)


def test_an_idle_stream_costs_at_most_a_query_a_second(tmp_path):
    app = make_app(tmp_path, EVENT_STREAM_SECONDS=3)
    try:
        headers = {"X-API-Key": new_key(app, "s")}
        store, statements = services(app).store, []
        real = store._execute

        def counted(sql, params=()):
            statements.append(threading.get_ident())
            return real(sql, params)

        store._execute = counted
        readers = [Reader(app, headers) for _ in range(2)]
        for reader in readers:
            assert reader.ended.wait(10)
        streams = {threading.get_ident(), *(reader.thread.ident for reader in readers)}
        # each: its key and its start, then a look a second (or its caller checked again)
        assert sum(ident in streams for ident in statements) <= 2 * (2 + 3 + 1)
    finally:
        close_app(app)


def test_one_caller_holds_at_most_half_of_the_streams(tmp_path):
    app = make_app(tmp_path, EVENT_STREAMS=4, EVENT_STREAM_SECONDS=1)
    try:
        one, other = ({"X-API-Key": new_key(app, name)} for name in ("one", "other"))
        readers = [Reader(app, one) for _ in range(3)] + [Reader(app, other)]
        assert [reader.response.status_code for reader in readers] == [200, 200, 503, 200]
        assert int(readers[2].response.headers["Retry-After"]) >= 5
        for reader in readers[:2] + readers[3:]:
            assert reader.ended.wait(10)
    finally:
        close_app(app)


def test_a_revoked_keys_stream_ends_and_sends_nothing_committed_after(tmp_path):
    app = make_app(tmp_path)
    try:
        store, writer = services(app).store, {"X-API-Key": new_key(app, "writer")}
        idle = Reader(app, {"X-API-Key": new_key(app, "idle")})
        assert store.revoke_key("idle")
        revoked = time.monotonic()
        assert idle.ended.wait(7) and time.monotonic() - revoked < 7  # checked while idle
        busy = Reader(app, {"X-API-Key": new_key(app, "busy")})
        created(app.test_client(), writer, 1, "Before")
        wait_for(lambda: "Before0" in busy.text())
        assert store.revoke_key("busy")
        created(app.test_client(), writer, 1, "After")  # committed at once after it
        assert busy.ended.wait(7)
        assert "After0" not in busy.text() and busy.text().endswith("retry: 1000\n\n")
    finally:
        close_app(app)


def test_a_stream_from_a_cursor_sends_1000_written_events_then_a_reconnect_the_rest(tmp_path):
    app = make_app(tmp_path, EVENT_STREAM_SECONDS=1)
    try:
        store, headers = services(app).store, {"X-API-Key": new_key(app, "s")}
        with store.transaction():
            for number in range(1100):
                store.insert_event("person.deleted", {"id": str(number)})
        first = Reader(app, {**headers, "Last-Event-ID": "0"})
        assert first.ended.wait(10)
        blocks = parse(first.text())
        sent = [block["id"] for block in blocks if "id" in block]
        assert len(sent) <= 1000 and blocks[-1] == {"retry": "1000"}
        again = Reader(app, {**headers, "Last-Event-ID": sent[-1]})
        assert again.ended.wait(10)
        rest = [block["id"] for block in parse(again.text()) if "id" in block]
        assert sent + rest == [str(number) for number in range(1, 1101)]
    finally:
        close_app(app)


def wait_for(predicate, timeout: float = 5):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.05)


def test_json_is_the_default_when_both_are_accepted(client, headers):
    answer = client.get("/events", headers={**headers, "Accept": "*/*"})
    assert answer.mimetype == "application/json"
    assert answer.headers["Vary"] == "Accept"


def test_the_settings_are_checked():
    from people_service import config

    assert config.load({"EVENT_STREAMS": 0}, environ={})["EVENT_STREAMS"] == 0
    with pytest.raises(config.ConfigError, match="EVENT_STREAMS must be 0 or more"):
        config.load({"EVENT_STREAMS": -1}, environ={})
    with pytest.raises(config.ConfigError, match="EVENT_STREAM_SECONDS"):
        config.load({"EVENT_STREAM_SECONDS": 0}, environ={})


def test_parse_last_event_id_takes_an_id_and_0():
    assert feed.parse_last_event_id(" 17 ") == 17
    assert feed.parse_last_event_id("0") == 0


# ---- real servers ---------------------------------------------------------------------------


class Stream:
    """An event stream from a real server, read as it arrives (http.client, no buffering)."""

    def __init__(self, url: str, headers: dict, path: str = "/events"):
        parts = urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        self.conn.connect()
        self.sock = self.conn.sock  # the response takes it over from the connection
        self.conn.request("GET", path, headers={**SSE, **headers})
        self.response = self.conn.getresponse()
        self.status = self.response.status
        self.buffer = ""
        self.ended = False

    def block(self, timeout: float = 10) -> dict | None:
        """The next server-sent block (an event, a comment or a retry hint); None at the end."""
        deadline = time.monotonic() + timeout
        while "\n\n" not in self.buffer:
            if self.ended:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"nothing in {timeout} s; have {self.buffer!r}")
            self.sock.settimeout(left)
            data = self.response.read1(65536)
            if not data:
                self.ended = True
            self.buffer += data.decode()
        block, self.buffer = self.buffer.split("\n\n", 1)
        return parse(block + "\n\n")[0]

    def events(self, count: int, timeout: float = 10) -> list[dict]:
        found = []
        deadline = time.monotonic() + timeout
        while len(found) < count:
            block = self.block(max(0.01, deadline - time.monotonic()))
            assert block is not None, f"the stream ended after {len(found)} events"
            if "id" in block:
                found.append(block)
        return found

    def close(self) -> None:
        self.response.close()
        self.conn.close()
        self.sock.close()


def open_stream(server, headers=None, timeout: float = 5) -> Stream:
    """A stream, once a slot is free (streams of earlier tests end at their next heartbeat)."""
    deadline = time.monotonic() + timeout
    while True:
        stream = Stream(server.url, headers or server.headers)
        if stream.status != 503 or time.monotonic() > deadline:
            return stream
        stream.close()
        time.sleep(0.2)


@pytest.fixture(scope="module")
def server(tmp_path_factory, backend):
    """A real server with 4 threads: EVENT_STREAMS is then 2, one a caller; heartbeats every
    second. `other` is a second caller's headers."""
    settings = {"RATE_LIMIT": GENEROUS, "EVENT_HEARTBEAT_SECONDS": 1, "EVENT_STREAM_SECONDS": 30}
    env = {f"PEOPLE_SERVICE_{name}": str(value) for name, value in settings.items()}
    db = database(tmp_path_factory.mktemp("feed"))
    served = ServerProcess(db, env=env, args=["--threads", "4"]).start()
    served.headers = {"X-API-Key": served.wait_for_output(lambda line: line.startswith("ps_"))}
    served.other = {"X-API-Key": cli("keys", "create", "--name", "other", db=db).stdout.split()[-1]}
    yield served
    served.stop()


def test_a_stream_gets_an_event_within_2_seconds_and_a_comment_every_heartbeat(server):
    stream = open_stream(server)
    try:
        assert stream.status == 200
        assert "" in stream.block()  # the opening comment
        started = time.monotonic()
        made = server.request("POST", "/person", json={"name": "Live"}, headers=server.headers)
        (event,) = stream.events(1, timeout=2)
        assert time.monotonic() - started < 2
        assert json.loads(event["data"])["data"] == made.json()
        assert event["event"] == "person.created"
        assert stream.block(timeout=2.5) == {"": ""}  # a heartbeat: a bare comment
    finally:
        stream.close()


def test_every_stream_open_leaves_ordinary_requests_answered_and_one_more_is_503(server):
    streams = [open_stream(server, headers) for headers in (server.headers, server.other)]
    try:
        assert [stream.status for stream in streams] == [200, 200]
        refused = server.request("GET", "/events", headers={**server.headers, **SSE})
        assert refused.status_code == 503
        assert int(refused.headers["Retry-After"]) >= 5  # its own, never lowered (SPEC 11a)
        assert refused.headers["Content-Type"] == "application/problem+json"
        for _ in range(5):
            started = time.monotonic()
            answer = server.request("GET", "/person/1", headers=server.headers, timeout=5)
            assert answer.status_code == 200
            assert time.monotonic() - started < 1
    finally:
        for stream in streams:
            stream.close()


def test_a_stream_whose_client_left_frees_its_slot_by_the_next_heartbeat(server):
    streams = [open_stream(server, headers) for headers in (server.headers, server.other)]
    assert [stream.status for stream in streams] == [200, 200]
    streams[0].close()  # gone without a word
    try:
        slot_freed_within(server, 4)  # a heartbeat (1 s), the write noticed, and slack
    finally:
        streams[1].close()


def slot_freed_within(server, seconds: float) -> None:
    """A stream of `server`'s caller is served again within `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        again = Stream(server.url, server.headers)
        again.close()
        if again.status == 200:
            return
        assert time.monotonic() < deadline, "the slot of the stream that left was kept"
        time.sleep(0.2)


def test_a_stream_resumes_with_last_event_id_without_gap_or_repeat(server):
    after = server.request("GET", "/events?limit=1000", headers=server.headers).json()
    start = int(after[-1]["id"]) if after else 0
    stream = open_stream(server, {**server.headers, "Last-Event-ID": str(start)})
    for number in range(3):
        server.request("POST", "/person", json={"name": f"R{number}"}, headers=server.headers)
    first = stream.events(2)
    stream.close()  # the connection drops; the client resumes after the last id it saw
    for number in range(3, 5):
        server.request("POST", "/person", json={"name": f"R{number}"}, headers=server.headers)
    resumed = open_stream(server, {**server.headers, "Last-Event-ID": first[-1]["id"]})
    rest = resumed.events(3)
    resumed.close()
    seen = [json.loads(block["data"])["data"]["name"] for block in first + rest]
    assert seen == [f"R{number}" for number in range(5)]


def test_a_stream_ends_after_event_stream_seconds_with_a_retry_hint(tmp_path):
    served = start_demo(tmp_path, EVENT_STREAM_SECONDS=1)
    try:
        stream = Stream(served.url, served.headers)
        blocks = []
        while (block := stream.block(timeout=5)) is not None:
            blocks.append(block)
        assert blocks[-1] == {"retry": "1000"}
        stream.close()
    finally:
        served.stop()


def test_a_stopping_server_ends_its_streams_at_once(tmp_path):
    served = start_demo(tmp_path)
    stream = Stream(served.url, served.headers)
    stream.block()
    started = time.monotonic()
    served.process.send_signal(signal.SIGTERM)
    try:
        blocks = []
        while (block := stream.block(timeout=5)) is not None:
            blocks.append(block)
        assert time.monotonic() - started < 2
        assert blocks[-1:] == [{"retry": "1000"}]
        assert served.process.wait(5) == 0
        assert time.monotonic() - started < 3
    finally:
        stream.close()
        served.stop()


# ---- never skip, never repeat ---------------------------------------------------------------

WRITERS, PEOPLE = 8, 200


def follow_while_writing(urls: list[str], headers: dict) -> None:
    """Eight writers through `urls` create 200 people while a reader follows `after` (small
    pages, as fast as it can) and a stream listens: both see each creation once, in id order."""
    start = requests.get(urls[0] + "/events?limit=1000", headers=headers, timeout=30).json()
    cursor = int(start[-1]["id"]) if start else 0
    stream = Stream(urls[-1], {**headers, "Last-Event-ID": str(cursor)})
    names = [f"W{n:03d}" for n in range(PEOPLE)]
    failures: list = []

    def write(mine: list[str], url: str) -> None:
        with requests.Session() as session:
            for name in mine:
                answer = session.post(url + "/person", json={"name": name}, headers=headers)
                if answer.status_code != 201:
                    failures.append(answer.text)

    writers = [
        threading.Thread(target=write, args=(names[n::WRITERS], urls[n % len(urls)]))
        for n in range(WRITERS)
    ]
    for thread in writers:
        thread.start()
    seen: list[dict] = []
    with requests.Session() as session:
        deadline = time.monotonic() + 120
        while len(seen) < PEOPLE and time.monotonic() < deadline:
            url = urls[len(seen) % len(urls)]  # the reader too moves between instances
            page = session.get(
                f"{url}/events?after={cursor}&limit=7&type=person.created", headers=headers
            ).json()
            seen += page
            if page:
                cursor = int(page[-1]["id"])
    for thread in writers:
        thread.join()
    assert not failures
    created = [event["data"]["name"] for event in seen]
    assert sorted(created) == names  # each exactly once
    event_ids = [int(event["id"]) for event in seen]
    assert event_ids == sorted(event_ids)
    streamed = stream.events(PEOPLE, timeout=30)
    stream.close()
    assert [block["id"] for block in streamed] == [event["id"] for event in seen]


def test_a_reader_sees_each_creation_once_under_serve_with_two_workers(tmp_path):
    if ACTIVE["backend"] != "sqlite":
        pytest.skip("the SQLite proof; PostgreSQL has its own with two instances")
    served = ServerProcess(
        database(tmp_path),
        env={"PEOPLE_SERVICE_RATE_LIMIT": GENEROUS},
        args=["--workers", "2"],
    ).start()
    try:
        key = served.wait_for_output(lambda line: line.startswith("ps_"))
        follow_while_writing([served.url], {"X-API-Key": key})
    finally:
        served.stop()


def test_a_reader_sees_each_creation_once_through_two_postgresql_instances(tmp_path):
    if ACTIVE["backend"] != "postgresql":
        pytest.skip("needs PostgreSQL (PEOPLE_SERVICE_TEST_POSTGRES=1)")
    first = start_demo(tmp_path)
    env = {"PEOPLE_SERVICE_RATE_LIMIT": GENEROUS, "PEOPLE_SERVICE_ANONYMOUS_RATE_LIMIT": GENEROUS}
    second = ServerProcess(first.db, env=env).start()
    try:
        follow_while_writing([first.url, second.url], first.headers)
    finally:
        second.stop()
        first.stop()


def test_a_client_that_left_frees_its_slot_within_20_seconds_at_the_default_settings(tmp_path):
    served = start_demo(tmp_path)  # 8 threads: 4 slots, 2 for the demo key
    try:
        streams = [open_stream(served) for _ in range(2)]
        assert [stream.status for stream in streams] == [200, 200]
        streams[0].close()  # gone without a word
        slot_freed_within(served, 20)
        streams[1].close()
    finally:
        served.stop()
