"""GET /metrics: Prometheus text through prometheus-client, for admins, with bounded labels."""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

from .conftest import close_app, make_app, new_key


def samples(text: str) -> dict[tuple, float]:
    """{(sample name, sorted labels): value} of a Prometheus text answer."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(text: str, name: str, **labels) -> float:
    wanted = tuple(sorted(labels.items()))
    return samples(text).get((name, wanted), 0.0)


def test_metrics_need_the_admin_scope(client, headers, admin_headers):
    assert client.get("/metrics").status_code == 401
    refused = client.get("/metrics", headers=headers)
    assert refused.status_code == 403
    assert refused.content_type == "application/problem+json"
    answer = client.get("/metrics", headers=admin_headers)
    assert answer.status_code == 200
    assert answer.content_type.startswith("text/plain")


def test_requests_are_counted_by_route_template_method_and_status(
    client, headers, admin_headers, make_person
):
    before = client.get("/metrics", headers=admin_headers).get_data(as_text=True)
    person = make_person()
    for _ in range(3):
        assert client.get(f"/person/{person['id']}", headers=headers).status_code == 200
    assert client.get("/person/999999", headers=headers).status_code == 404
    after = client.get("/metrics", headers=admin_headers).get_data(as_text=True)
    route = "/person/<id:person_id>"
    name = "people_service_requests_total"
    ok = dict(route=route, method="GET", status="200")
    assert value(after, name, **ok) - value(before, name, **ok) == 3
    missing = dict(route=route, method="GET", status="404")
    assert value(after, name, **missing) - value(before, name, **missing) == 1
    histogram = "people_service_request_duration_seconds_count"
    assert value(after, histogram, route=route, method="GET") >= 4


def test_unknown_paths_and_methods_share_one_label_each(client, admin_headers):
    for n in range(20):
        client.get(f"/nowhere/{n}")
        client.open("/people", method=f"FOO{n}")
    text = client.get("/metrics", headers=admin_headers).get_data(as_text=True)
    routes = {dict(labels).get("route") for (name, labels) in samples(text)}
    methods = {dict(labels).get("method") for (name, labels) in samples(text)}
    assert not any(route and route.startswith("/nowhere") for route in routes)
    assert "unmatched" in routes
    assert not any(method and method.startswith("FOO") for method in methods)


def test_rate_limit_refusals_are_counted(app, client, admin_headers):
    tight = {"X-API-Key": new_key(app, "tight", "read", "2/minute")}
    statuses = [client.get("/people", headers=tight).status_code for _ in range(4)]
    assert statuses == [200, 200, 429, 429]
    text = client.get("/metrics", headers=admin_headers).get_data(as_text=True)
    assert value(text, "people_service_rate_limit_refusals_total", route="/people") >= 2


def test_graphql_operations_are_counted_by_name_and_cost(gql, client, admin_headers):
    before = client.get("/metrics", headers=admin_headers).get_data(as_text=True)
    answer = gql("query CountMe { people(limit: 3) { id } }")
    assert answer.status_code == 200 and "errors" not in answer.json
    after = client.get("/metrics", headers=admin_headers).get_data(as_text=True)
    name = "people_service_graphql_operations_total"
    labels = dict(operation="CountMe", type="query")
    assert value(after, name, **labels) - value(before, name, **labels) == 1
    cost = "people_service_graphql_operation_cost_count"
    assert value(after, cost, operation="CountMe") - value(before, cost, operation="CountMe") == 1


def test_client_operation_names_cannot_grow_the_scrape_without_bound(gql, client, admin_headers):
    for n in range(130):
        gql(f"query Name{n} {{ __typename }}")
    gql("query Q { __typename }", operationName="Q")
    text = client.get("/metrics", headers=admin_headers).get_data(as_text=True)
    names = {
        dict(labels)["operation"]
        for (name, labels) in samples(text)
        if name == "people_service_graphql_operations_total"
    }
    assert len(names) <= 102  # at most 100 names, "other" and "anonymous"
    assert "other" in names
    assert all(re.fullmatch(r"[_A-Za-z][_0-9A-Za-z]*", name) for name in names)


def test_metrics_can_be_switched_off(tmp_path):
    app = make_app(tmp_path, METRICS=False)
    try:
        client = app.test_client()
        key = {"X-API-Key": new_key(app, "admin", "read,write,admin")}
        answer = client.get("/metrics", headers=key)
        assert answer.status_code == 404
        assert answer.content_type == "application/problem+json"
    finally:
        close_app(app)


def test_metrics_add_up_every_worker_of_serve_workers(tmp_path, sqlite_only):
    import requests

    from .conftest import ServerProcess, database

    server = ServerProcess(database(tmp_path), args=["--workers", "2"]).start()
    try:
        admin = cli_key(server.db)
        for _ in range(40):  # a new connection each: SO_REUSEPORT spreads them over both workers
            assert requests.get(server.url + "/health", timeout=10).status_code == 200
        for _ in range(6):  # whichever worker answers the scrape, it counts all 40
            scrape = requests.get(server.url + "/metrics", headers={"X-API-Key": admin}, timeout=10)
            assert scrape.status_code == 200
            health = dict(route="/health", method="GET", status="200")
            assert value(scrape.text, "people_service_requests_total", **health) == 40
    finally:
        server.stop()


def cli_key(db: str) -> str:
    from .conftest import cli

    result = cli("keys", "create", "scraper", "--scopes", "read,admin", db=db)
    return result.stdout.strip().splitlines()[-1]


def test_metrics_add_up_every_gunicorn_worker_with_a_multiprocess_directory(tmp_path, sqlite_only):
    import sys

    import pytest
    import requests

    from .conftest import database
    from .test_wsgi_servers import WSGIServer

    pytest.importorskip("gunicorn")
    db = database(tmp_path)
    admin = cli_key(db)
    shared = tmp_path / "metrics"
    shared.mkdir()
    command = [sys.executable, "-m", "gunicorn", "--bind", "127.0.0.1:{port}", "-w", "2"]
    command += ["--reuse-port", "app:app"]
    health = dict(route="/health", method="GET", status="200")
    with WSGIServer(command, db, {"PROMETHEUS_MULTIPROC_DIR": str(shared)}) as server:

        def scraped() -> float:
            scrape = requests.get(server.url + "/metrics", headers={"X-API-Key": admin}, timeout=10)
            return value(scrape.text, "people_service_requests_total", **health)

        before = scraped()  # the start-up checks asked /health too
        for _ in range(30):  # a new connection each: both workers answer some
            assert requests.get(server.url + "/health", timeout=10).status_code == 200
        for _ in range(6):  # whichever worker answers the scrape, it counts all of them
            assert scraped() == before + 30
    assert len(list(shared.glob("*.db"))) >= 2  # one file per worker process at least
