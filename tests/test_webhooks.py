"""Webhooks (SPEC 11c): the API, the address rules and delivery to a real receiver on loopback,
verified with the Standard Webhooks reference library."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
import waitress
from standardwebhooks.webhooks import Webhook

from people_service import delivery, webhooks
from people_service.store import open_store
from people_service.store.webhooks import PRUNED_THROUGH
from people_service.web import services

from .conftest import ACTIVE, ServerProcess, cli, close_app, database, make_app, new_key, start_demo


class Receiver:
    """A webhook receiver on 127.0.0.1: records each request; `answer(request)` picks the
    status (None: hang until released)."""

    def __init__(self, answer=lambda request: 204):
        self.answer, self.requests, self.release = answer, [], threading.Event()
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = {"path": self.path, "headers": dict(self.headers), "body": body}
                request["at"] = time.monotonic()
                with receiver.lock:
                    receiver.requests.append(request)
                status = receiver.answer(request)
                if status is None:
                    receiver.release.wait(30)
                    return
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, count: int, timeout: float = 15) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.requests) >= count:
                    return list(self.requests)
            time.sleep(0.05)
        raise AssertionError(f"{len(self.requests)} requests, not {count}")

    def ids(self) -> list[str]:
        return [request["headers"]["webhook-id"] for request in self.requests]

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def verify(secret: str, request: dict) -> dict:
    return Webhook(secret).verify(request["body"], request["headers"])


@pytest.fixture
def receiver():
    made = Receiver()
    yield made
    made.close()


@pytest.fixture
def hook_app(tmp_path):
    app = make_app(
        tmp_path,
        WEBHOOK_ALLOW_PRIVATE=True,
        WEBHOOK_RETRY_SCHEDULE="0.3,0.6",
        WEBHOOK_TIMEOUT=2,
    )
    yield app
    close_app(app)


@pytest.fixture
def admin(hook_app):
    return {"X-API-Key": new_key(hook_app, "admin", "read,write,admin")}


@pytest.fixture
def client(hook_app):
    return hook_app.test_client()


def create(client, admin, url, **fields):
    response = client.post("/webhooks", json={"url": url, **fields}, headers=admin)
    assert response.status_code == 201, response.json
    return response.json


def wait_for(predicate, timeout: float = 15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("not within the time")


def deliveries(client, admin, webhook_id) -> list[dict]:
    response = client.get(f"/webhooks/{webhook_id}/deliveries", headers=admin)
    assert response.status_code == 200
    return response.json


def test_an_event_is_delivered_signed_as_standard_webhooks_verifies(client, admin, receiver):
    hook = create(client, admin, receiver.url, description="crm")
    assert hook["secret"].startswith("whsec_")
    assert hook["events"] is None and hook["enabled"] is True
    person = client.post("/person", json={"name": "Ada"}, headers=admin).json
    request = receiver.wait(1)[0]
    event = verify(hook["secret"], request)
    assert event["type"] == "person.created" and event["data"] == person
    assert request["headers"]["webhook-id"] == event["id"]
    assert request["headers"]["Content-Type"] == "application/json"
    assert abs(int(request["headers"]["webhook-timestamp"]) - time.time()) < 10
    shown = wait_for(lambda: [d for d in deliveries(client, admin, hook["id"]) if d["attempts"]])
    assert shown == [
        {
            "event_id": event["id"],
            "event_type": "person.created",
            "status": "succeeded",
            "attempts": 1,
            "last_status_code": 204,
            "last_error": None,
            "next_attempt_at": None,
            "delivered_at": shown[0]["delivered_at"],
        }
    ]
    assert "secret" not in client.get(f"/webhooks/{hook['id']}", headers=admin).json


def test_only_the_types_it_names_and_only_events_after_it(client, admin, receiver):
    client.post("/person", json={"name": "Before"}, headers=admin)
    client.delete("/person/1", headers=admin)
    hook = create(client, admin, receiver.url, events=["person.deleted"])
    person = client.post("/person", json={"name": "Ada"}, headers=admin).json
    client.delete(f"/person/{person['id']}", headers=admin)
    requests = receiver.wait(1)
    # a webhook has a delivery of each event it takes, and of no other
    assert [d["event_type"] for d in deliveries(client, admin, hook["id"])] == ["person.deleted"]
    assert json.loads(requests[0]["body"])["data"] == {"id": person["id"]}


def test_retries_keep_the_id_follow_the_schedule_then_fail_and_retry_sends_again(
    client, admin, receiver, caplog
):
    receiver.answer = lambda request: 500
    hook = create(client, admin, receiver.url)
    client.post("/person", json={"name": "Ada"}, headers=admin)
    requests = receiver.wait(3)
    assert len(set(receiver.ids())) == 1  # the same webhook-id on every attempt
    gaps = [b["at"] - a["at"] for a, b in zip(requests, requests[1:], strict=False)]
    assert 0.3 <= gaps[0] < 2.5 and 0.6 <= gaps[1] < 3
    failed = wait_for(
        lambda: [d for d in deliveries(client, admin, hook["id"]) if d["status"] == "failed"]
    )
    assert failed[0]["attempts"] == 3 and failed[0]["last_status_code"] == 500
    assert failed[0]["last_error"] == "answered 500"
    assert len(receiver.requests) == 3  # failed: nothing after the schedule
    gave_up = wait_for(lambda: [r for r in caplog.records if r.name == "people_service.delivery"])
    assert len(gave_up) == 1 and "answered 500" in gave_up[0].getMessage()  # one line
    receiver.answer = lambda request: 200
    event_id = failed[0]["event_id"]
    answer = client.post(f"/webhooks/{hook['id']}/deliveries/{event_id}/retry", headers=admin)
    assert answer.status_code == 202
    receiver.wait(4)
    assert receiver.ids()[-1] == event_id
    done = wait_for(
        lambda: [d for d in deliveries(client, admin, hook["id"]) if d["status"] == "succeeded"]
    )
    assert done[0]["attempts"] == 1


def test_a_redirect_is_a_failure(client, admin, receiver):
    receiver.answer = lambda request: 302
    hook = create(client, admin, receiver.url)
    client.post("/person", json={"name": "Ada"}, headers=admin)
    receiver.wait(1)
    shown = wait_for(lambda: [d for d in deliveries(client, admin, hook["id"]) if d["attempts"]])
    assert shown[0]["status"] == "pending" and shown[0]["last_status_code"] == 302
    assert "redirects are not followed" in shown[0]["last_error"]


def test_gone_disables_and_enabling_sends_what_waited(client, admin, receiver):
    receiver.answer = lambda request: 410
    hook = create(client, admin, receiver.url)
    client.post("/person", json={"name": "Ada"}, headers=admin)
    receiver.wait(1)
    wait_for(lambda: not client.get(f"/webhooks/{hook['id']}", headers=admin).json["enabled"])
    client.post("/person", json={"name": "Bob"}, headers=admin)
    assert len(receiver.requests) == 1  # disabled: both wait, never claimed
    assert [d["status"] for d in deliveries(client, admin, hook["id"])] == ["pending", "pending"]
    receiver.answer = lambda request: 200
    answer = client.patch(f"/webhooks/{hook['id']}", json={"enabled": True}, headers=admin)
    assert answer.status_code == 200 and answer.json["enabled"] is True
    receiver.wait(3)
    assert len(set(receiver.ids())) == 2


def test_after_a_rotation_each_secret_verifies_for_a_day(client, admin, receiver):
    hook = create(client, admin, receiver.url)
    rotated = client.post(f"/webhooks/{hook['id']}/rotate-secret", headers=admin)
    assert rotated.status_code == 200 and rotated.json["secret"] != hook["secret"]
    client.post("/person", json={"name": "Ada"}, headers=admin)
    request = receiver.wait(1)[0]
    assert len(request["headers"]["webhook-signature"].split(" ")) == 2
    assert verify(hook["secret"], request) == verify(rotated.json["secret"], request)
    again = client.post(f"/webhooks/{hook['id']}/rotate-secret", headers=admin).json["secret"]
    client.post("/person", json={"name": "Bob"}, headers=admin)
    request = receiver.wait(2)[1]
    verify(again, request)
    verify(rotated.json["secret"], request)
    with pytest.raises(Exception, match="signature"):
        verify(hook["secret"], request)  # only the newest previous secret


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.org/hook",
        "http://user:password@example.org/hook",
        "http://127.0.0.1/hook",
        "http://2130706433/hook",
        "http://0x7f.1/hook",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://localhost./hook",
        "http://169.254.169.254/latest/meta-data",
        "http://100.100.100.200/latest/meta-data",  # shared address space (a cloud's metadata)
        "http://[2002:7f00:1::]/hook",  # 6to4 around 127.0.0.1
        "http://10.1.2.3/hook",
        "http://192.168.0.1/hook",
        "http://0.0.0.0/hook",
        "http://example.org/a b",
        "not a url",
    ],
)
def test_urls_against_the_rules_are_422_naming_url(tmp_path, url):
    app = make_app(tmp_path)
    try:
        admin = {"X-API-Key": new_key(app, "admin", "read,write,admin")}
        response = app.test_client().post("/webhooks", json={"url": url}, headers=admin)
        assert response.status_code == 422, response.json
        assert list(response.json["errors"]) == ["url"]
    finally:
        close_app(app)


def test_a_refusal_names_the_rule_and_the_setting_but_no_address(tmp_path):
    app = make_app(tmp_path)
    try:
        admin = {"X-API-Key": new_key(app, "admin", "read,write,admin")}
        refusals = {
            "http://[::ffff:10.0.0.1]/": "a private address",
            "http://localhost/": "loopback",
        }
        for url, rule in refusals.items():
            answer = app.test_client().post("/webhooks", json={"url": url}, headers=admin)
            (message,) = answer.json["errors"]["url"]
            assert rule in message and "PEOPLE_SERVICE_WEBHOOK_ALLOW_PRIVATE" in message
            assert "10.0.0.1" not in message and "127.0.0.1" not in message
    finally:
        close_app(app)


def test_the_101st_webhook_is_422_saying_so(client, admin):
    for number in range(100):
        create(client, admin, f"http://127.0.0.1:9/{number}")
    refused = client.post("/webhooks", json={"url": "http://127.0.0.1:9/x"}, headers=admin)
    assert refused.status_code == 422 and "100 webhooks" in refused.json["detail"]
    client.delete("/webhooks/1", headers=admin)
    create(client, admin, "http://127.0.0.1:9/x")


def test_bad_events_are_422_and_the_rest_403_404(client, admin, hook_app, receiver):
    for events in (["person.exploded"], [], "person.created"):
        response = client.post(
            "/webhooks", json={"url": receiver.url, "events": events}, headers=admin
        )
        assert response.status_code == 422 and list(response.json["errors"]) == ["events"]
        if events == ["person.exploded"]:  # the types are listed, as the feed lists them
            assert "person.created, person.updated" in str(response.json["errors"])
    writer = {"X-API-Key": new_key(hook_app, "writer")}
    assert client.get("/webhooks", headers=writer).status_code == 403
    # 403 before the query string is looked at: no scope, nothing learnt about the parameters
    assert client.get("/webhooks?bogus=1", headers=writer).status_code == 403
    assert client.post("/webhooks", json={"url": receiver.url}, headers=writer).status_code == 403
    assert client.get("/webhooks/99", headers=admin).status_code == 404
    assert client.delete("/webhooks/99", headers=admin).status_code == 404
    hook = create(client, admin, receiver.url)
    assert (
        client.post(f"/webhooks/{hook['id']}/deliveries/99/retry", headers=admin).status_code == 404
    )
    bad = client.patch(f"/webhooks/{hook['id']}", json={"enabled": "yes"}, headers=admin)
    assert bad.status_code == 422 and list(bad.json["errors"]) == ["enabled"]
    assert client.get("/webhooks", headers=admin).json == [
        {k: v for k, v in hook.items() if k != "secret"}
    ]
    assert client.delete(f"/webhooks/{hook['id']}", headers=admin).status_code == 204
    assert client.get("/webhooks", headers=admin).json == []


def test_the_address_is_checked_again_at_delivery(hook_app, receiver):
    # a store of the test's own: the app's runtime (and its lenient worker) is never made
    store = open_store(hook_app.config["DATABASE"])
    store.upgrade_schema()
    hook = webhooks.create_webhook(store, {"url": receiver.url}, hook_app.config)
    strict = delivery.Deliverer({**hook_app.config, "WEBHOOK_ALLOW_PRIVATE": False}, store)
    with store.transaction():
        store.insert_event("person.deleted", {"id": "1"})
    strict.start().wake()
    try:
        shown = wait_for(
            lambda: [d for d in webhooks.list_deliveries(store, hook["id"]) if d["attempts"]]
        )
    finally:
        strict.close()
        store.close()
    assert shown[0]["status"] == "pending" and "loopback" in shown[0]["last_error"]
    assert receiver.requests == []


def later(hook_app) -> delivery.Deliverer:
    """A worker whose clock is eight days ahead: retention's seven days have passed."""
    store = services(hook_app).store
    return delivery.Deliverer(hook_app.config, store, clock=lambda: time.time() + 8 * 86_400)


def test_retention_removes_old_events_and_records_the_highest(hook_app, client, admin):
    store = services(hook_app).store
    with store.transaction():
        first = store.insert_event("person.deleted", {"id": "1"})
        second = store.insert_event("person.deleted", {"id": "2"})
    worker = later(hook_app)
    worker.prune(worker.clock())
    assert store.events_after(0, 10) == []
    row = store._execute("SELECT value FROM settings WHERE name = ?", (PRUNED_THROUGH,))
    assert row.fetchone()["value"] == second["id"] and int(first["id"]) < int(second["id"])
    delivery.Deliverer(hook_app.config, store).prune(time.time())  # nothing younger goes
    assert store._execute("SELECT value FROM settings WHERE name = ?", (PRUNED_THROUGH,))


def test_retention_keeps_the_events_a_pending_delivery_waits_for(hook_app, client, admin):
    hook = create(client, admin, "http://127.0.0.1:9/hook")
    client.patch(f"/webhooks/{hook['id']}", json={"enabled": False}, headers=admin)
    store = services(hook_app).store
    with store.transaction():
        waiting = store.insert_event("person.deleted", {"id": "1"})
    worker = later(hook_app)
    worker.prune(worker.clock())
    assert [event["id"] for event in store.events_after(0, 10)] == [waiting["id"]]
    assert [entry["status"] for entry in deliveries(client, admin, hook["id"])] == ["pending"]


def test_openapi_documents_the_endpoints_and_each_event(client):
    document = client.get("/openapi.json").json
    assert set(document["webhooks"]) == {
        "person.created",
        "person.updated",
        "person.deleted",
        "friendship.created",
        "friendship.deleted",
        "message.created",
    }
    assert "/webhooks/{webhook_id}/deliveries/{event_id}/retry" in document["paths"]


def test_metrics_count_deliveries_and_the_backlog(client, admin, receiver):
    create(client, admin, receiver.url)
    client.post("/person", json={"name": "Ada"}, headers=admin)
    receiver.wait(1)
    succeeded = 'people_service_webhook_deliveries_total{outcome="succeeded"}'

    def scraped():
        text = client.get("/metrics", headers=admin).text
        return text if succeeded in text and "pending 0.0" in text else None

    text = wait_for(scraped)
    assert "people_service_webhook_deliveries_pending 0.0" in text
    assert "people_service_webhook_oldest_pending_seconds" in text


def test_the_cli_creates_lists_and_deletes(tmp_path):
    db = database(tmp_path)
    made = cli(
        "webhooks", "create", "https://example.org/hook", "--events", "person.created", db=db
    )
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip().splitlines()[-1]
    assert secret.startswith("whsec_")
    listed = cli("webhooks", "list", db=db)
    assert listed.stdout.splitlines()[1].split()[:3] == [
        "1",
        "https://example.org/hook",
        "person.created",
    ]
    refused = cli("webhooks", "create", "http://127.0.0.1/x", db=db)
    assert refused.returncode == 1 and "loopback" in refused.stderr
    assert cli("webhooks", "delete", "1", db=db).returncode == 0
    assert cli("webhooks", "delete", "1", db=db).returncode == 1
    assert cli("webhooks", "list", db=db).stdout.splitlines()[1:] == []


def hook_env(**more) -> dict:
    settings = {"WEBHOOK_ALLOW_PRIVATE": "true", "WEBHOOK_TIMEOUT": "2", **more}
    return {f"PEOPLE_SERVICE_{name}": value for name, value in settings.items()}


def cli_webhook(db, url) -> str:
    made = cli("webhooks", "create", url, db=db, env=hook_env())
    assert made.returncode == 0, made.stderr
    return made.stdout.strip().splitlines()[-1]


def test_kill_9_loses_neither_the_pending_nor_the_delivery_in_flight(tmp_path):
    seen: dict[str, list[int]] = {}
    lock = threading.Lock()

    def answer(request):
        event_id = request["headers"]["webhook-id"]
        with lock:
            first = event_id not in seen
            order = len(seen)
            status = (None if order == 0 else 500) if first else 200
            seen.setdefault(event_id, []).append(status)
        return status

    receiver = Receiver(answer)
    server = start_demo(
        tmp_path, **{k[15:]: v for k, v in hook_env(WEBHOOK_RETRY_SCHEDULE="1").items()}
    )
    try:
        secret = cli_webhook(server.db, receiver.url)
        for name in ("Ada", "Bob"):
            made = server.request("POST", "/person", json={"name": name}, headers=server.headers)
            assert made.status_code == 201
        receiver.wait(2)  # the first hangs in flight; the second failed and waits its retry
        server.stop(signal.SIGKILL)
        server.start()
        wait_for(lambda: len(seen) == 2 and all(200 in answers for answers in seen.values()), 30)
        for request in receiver.requests:
            verify(secret, request)
    finally:
        server.stop()
        receiver.close()


@pytest.mark.parametrize("mode", ["two workers", "two instances"])
def test_each_of_40_events_is_delivered_once(tmp_path, mode):
    if mode == "two instances" and ACTIVE["backend"] != "postgresql":
        pytest.skip("two instances share a database on PostgreSQL")
    receiver = Receiver(lambda request: 200)
    env = hook_env(RATE_LIMIT="100000/minute")
    args = ["--workers", "2"] if mode == "two workers" else []
    db = database(tmp_path)
    servers = [ServerProcess(db, env=env, args=args).start()]
    try:
        key = servers[0].wait_for_output(lambda line: line.startswith("ps_"))
        if mode == "two instances":
            servers.append(ServerProcess(db, env=env).start())
        cli_webhook(db, receiver.url)
        for n in range(40):
            server = servers[n % len(servers)]
            made = server.request(
                "POST", "/person", json={"name": f"P{n}"}, headers={"X-API-Key": key}
            )
            assert made.status_code == 201
        receiver.wait(40, timeout=30)
        store = open_store(db)
        try:  # once each is recorded as delivered, no second attempt can start
            wait_for(
                lambda: {d["status"] for d in store.list_deliveries(1, 100, 0)} == {"succeeded"}
            )
        finally:
            store.close()
        assert len(receiver.requests) == 40 and len(set(receiver.ids())) == 40
    finally:
        for server in servers:
            server.stop()
        receiver.close()


def test_a_slow_receiver_gets_every_delivery_and_none_fails_waiting_for_its_turn(tmp_path):
    """A process sends a few attempts at a time to one receiver: one that waits its turn past
    WEBHOOK_TIMEOUT goes back to the queue unspent, never recorded as a failed attempt."""
    app = make_app(
        tmp_path, WEBHOOK_ALLOW_PRIVATE=True, WEBHOOK_RETRY_SCHEDULE="30", WEBHOOK_TIMEOUT=1
    )
    slow = Receiver(lambda request: time.sleep(0.6) or 204)
    try:
        client = app.test_client()
        admin = {"X-API-Key": new_key(app, "admin", "read,write,admin")}
        hook = create(client, admin, slow.url)
        for n in range(3 * delivery.PER_RECEIVER):  # three turns of 0.6 s: past the 1 s timeout
            client.post("/person", json={"name": f"P{n}"}, headers=admin)

        def all_succeeded():
            found = deliveries(client, admin, hook["id"])
            return found if all(d["status"] == "succeeded" for d in found) else None

        shown = wait_for(all_succeeded, timeout=30)
        assert len(shown) == 3 * delivery.PER_RECEIVER
        assert {(d["attempts"], d["last_error"]) for d in shown} == {(1, None)}
        assert sorted(slow.ids()) == sorted(d["event_id"] for d in shown)  # each sent once
    finally:
        slow.close()
        close_app(app)


def test_a_hanging_receiver_never_delays_a_healthy_one(tmp_path):
    hanging, healthy = Receiver(lambda request: None), Receiver()
    server = start_demo(tmp_path, WEBHOOK_ALLOW_PRIVATE="true", WEBHOOK_TIMEOUT="10")
    try:
        cli_webhook(server.db, hanging.url)
        cli_webhook(server.db, healthy.url)
        for number in range(8):  # eight events half a second apart
            person = {"name": f"P{number}"}
            made = server.request("POST", "/person", json=person, headers=server.headers)
            committed = time.monotonic()
            assert made.status_code == 201
            arrived = healthy.wait(number + 1, timeout=2)[number]["at"]
            assert arrived - committed < 2
            while time.monotonic() - committed < 0.5:
                time.sleep(0.05)
        assert len(hanging.requests) >= 1  # it was tried, and hangs
    finally:
        server.stop()
        hanging.close()
        healthy.close()


def test_an_idle_process_without_webhooks_queries_nothing(tmp_path):
    """Nothing is polled while nothing is pending: no webhook, no stream, no query for 10 s."""
    app = make_app(tmp_path)
    store, statements = services(app).store, []
    real = store._execute
    store._execute = lambda sql, params=(): statements.append(sql) or real(sql, params)
    server = waitress.create_server(app, host="127.0.0.1", port=0, threads=2)
    threading.Thread(target=server.run, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.effective_port}/health"
        assert requests.get(url, timeout=10).status_code == 200  # the process is serving
        started = time.monotonic()
        quiet = (started, len(statements))
        while time.monotonic() - quiet[0] < 10:
            if len(statements) != quiet[1]:  # start-up's look (retention) may still run
                quiet = (time.monotonic(), len(statements))
                assert quiet[0] - started < 3, statements
            time.sleep(0.2)
    finally:
        server.close()
        close_app(app)


def test_deliver_alone_sends_what_is_pending_and_stops_on_sigterm(tmp_path, spawn):
    receiver = Receiver()
    db = database(tmp_path)
    try:
        secret = cli_webhook(db, receiver.url)
        store = open_store(db)
        with store.transaction():
            store.insert_event("person.deleted", {"id": "1"})
        store.close()
        env = {**os.environ, "PEOPLE_SERVICE_SECRET_KEY": "x" * 32, **hook_env()}
        command = [sys.executable, "-m", "people_service.cli", "deliver", "--db", str(db)]
        worker = spawn(command, env=env, stderr=subprocess.PIPE, text=True)
        verify(secret, receiver.wait(1)[0])
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(10) == 0
    finally:
        receiver.close()
