"""Round 3 GraphQL: bounded variables coerced once, public graphql-core hooks only."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import graphql.execution.values as graphql_values
import pytest

from people_service.graphql import meter

from .test_graphql_limits import charged, fresh_key, post

ADDRESSES = "mutation ($a: [AddressInput]) { deletePerson(id: 1) }"


def addresses(count: int) -> list[dict]:
    return [{"street": "s" * 8, "city": "c" * 8, "country": "x" * 8}] * count


def test_huge_variables_are_refused_quickly_and_cost_one(demo):
    """960 KB of [AddressInput] took ~1.7 s of CPU to coerce, twice, charged as 1."""
    headers = fresh_key(demo)
    variables = {"a": addresses(14_000)}  # 940 KB, under the body limit
    started = time.monotonic()
    response = post(demo, headers, ADDRESSES, variables)
    elapsed = time.monotonic() - started
    assert response.status_code == 200
    [error] = response.json()["errors"]
    assert error["extensions"]["code"] == "QUERY_TOO_COMPLEX"
    assert "variables" in error["message"]
    assert "data" not in response.json()
    assert charged(response) == 1  # SPEC 11a: every GraphQL request costs at least 1
    assert elapsed < 1.5  # generous: reading the body is most of it; coercing took seconds


@pytest.mark.parametrize("shape", ["list", "nested", "object"])
def test_the_count_of_values_holds_in_every_shape(client, headers, shape):
    many = meter.MAX_VARIABLE_VALUES + 1
    value = {
        "list": list(range(many)),
        "nested": [[[1, 2]] * 10] * (many // 30 + 1),
        "object": {f"k{i}": i for i in range(many)},
    }[shape]
    response = client.post(
        "/graphql",
        json={"query": "query ($v: [Int]) { me { name } }", "variables": {"v": value}},
        headers=headers,
    )
    assert response.status_code == 200
    assert response.json["errors"][0]["extensions"]["code"] == "QUERY_TOO_COMPLEX"


def test_variables_within_the_bound_still_run(client, headers):
    query = "query ($n: Int, $s: [PersonSort!]) { people(limit: $n, sort: $s) { id } }"
    response = client.post(
        "/graphql",
        json={"query": query, "variables": {"n": 2.0, "s": ["ID_DESC"], "x": list(range(900))}},
        headers=headers,
    )
    assert response.status_code == 200
    assert "errors" not in response.json, response.json
    assert len(response.json["data"]["people"]) <= 2


def test_variables_are_coerced_once_per_request(client, headers, monkeypatch):
    coerced = []
    original = graphql_values.coerce_input_value

    def counting(value, type_, *args, **kwargs):
        coerced.append(value)
        return original(value, type_, *args, **kwargs)

    monkeypatch.setattr(graphql_values, "coerce_input_value", counting)
    query = "query ($n: Int, $d: Boolean!) { people(limit: $n) @include(if: $d) { id } }"
    response = client.post(
        "/graphql", json={"query": query, "variables": {"n": 3, "d": True}}, headers=headers
    )
    assert "errors" not in response.json, response.json
    assert sorted(map(str, coerced)) == ["3", "True"]


def test_a_bad_variable_is_bad_user_input_and_a_missing_operation_bad_request(client, headers):
    bad = client.post(
        "/graphql",
        json={"query": "query ($n: Int!) { people(limit: $n) { id } }", "variables": {"n": "x"}},
        headers=headers,
    )
    assert [e["extensions"]["code"] for e in bad.json["errors"]] == ["BAD_USER_INPUT"]
    assert "data" not in bad.json
    missing = client.post(
        "/graphql",
        json={"query": "query A { me { name } }", "operationName": "B"},
        headers=headers,
    )
    assert [e["extensions"]["code"] for e in missing.json["errors"]] == ["BAD_REQUEST"]


# -- public graphql-core hooks only (issue 20) ----------------------------------------------


def test_repeated_fields_are_refused_before_the_pairwise_merge_check(client, headers):
    """`{ me { name } ... }` 499 times: graphql-core's overlap check compares them pairwise."""
    started = time.process_time()
    response = client.post(
        "/graphql", json={"query": "{ " + "me { name } " * 499 + "}"}, headers=headers
    )
    assert time.process_time() - started < 0.5  # it took 0.8 s of validation alone
    [error] = response.json["errors"]
    assert error["extensions"]["code"] == "QUERY_TOO_COMPLEX"
    assert error["message"] == "The query selects 'me' more than 10 times in one place."


@pytest.mark.parametrize(
    ("text", "code", "message"),
    [
        ("{ " + "a " * 2100 + "}", "QUERY_TOO_COMPLEX", "more than 2000 tokens"),
        ("#\n" * 2100 + "{ me { name } }", "QUERY_TOO_COMPLEX", "more than 2000 comments"),
        ("{ a " * 300 + "}" * 300, "QUERY_TOO_COMPLEX", "nested too deeply"),
        ("{ me { name } " * 10, "GRAPHQL_PARSE_FAILED", "Syntax Error"),
        ("{ me { name \u0001 } }", "GRAPHQL_PARSE_FAILED", "Unexpected character"),
        ("{ " + "a " * 1900 + "!", "GRAPHQL_PARSE_FAILED", "Syntax Error"),
    ],
)
def test_limits_and_syntax_errors_are_told_apart_by_measure(client, headers, text, code, message):
    response = client.post("/graphql", json={"query": text}, headers=headers)
    [error] = response.json["errors"]
    assert error["extensions"]["code"] == code
    assert message in error["message"]


def test_the_package_assigns_no_graphql_core_module_attribute():
    import ast

    from .conftest import ROOT

    offences = []
    for path in (ROOT / "people_service").rglob("*.py"):
        tree = ast.parse(path.read_text())
        modules = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            and (getattr(node, "module", None) or "").startswith("graphql")
            or isinstance(node, ast.Import)
            and any(a.name.startswith("graphql") for a in node.names)
            for alias in node.names
        }
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else []
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id in modules
                ):
                    offences.append(f"{path.name}:{node.lineno}")
    assert offences == []


# -- the explorer page (issue 21) --------------------------------------------------------------

BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}


@pytest.mark.parametrize("explorer", ["playground", "graphiql"])
def test_a_claimed_mount_prefix_never_reaches_the_cached_explorer(tmp_path, explorer):
    """Under gunicorn a client's SCRIPT_NAME header becomes the request's prefix: the page is
    cached for everyone, so it holds no prefix at all (its URLs are relative to /graphql)."""
    from .conftest import close_app, make_app

    app = make_app(tmp_path, EXPLORER=explorer)
    try:
        client = app.test_client()
        poisoned = client.get("/graphql", headers=BROWSER, environ_base={"SCRIPT_NAME": "/evil"})
        assert poisoned.status_code == 200
        page = client.get("/graphql", headers=BROWSER)
        assert page.data == poisoned.data
        html = page.get_data(as_text=True)
        assert "/evil" not in html and 'src="/' not in html and 'href="/' not in html
        assert 'id="key-hint"' in html and "X-API-Key" in html
        # mounted at /api, every asset the page names resolves under /api
        mounted = {"SCRIPT_NAME": "/api"}
        for url in re.findall(r'(?:src|href)="(static/[^"]+)"', html):
            with client.get("/" + url.replace("&amp;", "&"), environ_base=mounted) as asset:
                assert asset.status_code == 200, url
    finally:
        close_app(app)


# -- automatic persisted queries (issue 23) ----------------------------------------------------


def apq(query: str) -> tuple[str, dict]:
    digest = hashlib.sha256(query.encode()).hexdigest()
    return digest, {"persistedQuery": {"version": 1, "sha256Hash": digest}}


def get(server, headers, **params):
    params = {k: json.dumps(v) if isinstance(v, dict) else v for k, v in params.items()}
    return server.request("GET", "/graphql", params=params, headers=headers)


def test_persisted_queries_follow_apollos_protocol(demo):
    headers = fresh_key(demo)
    query = '{ person(id: "1") { name } } # ' + uuid.uuid4().hex
    digest, extensions = apq(query)
    # 1. the hash alone: not known yet (HTTP 200, as Apollo's clients expect)
    unknown = get(demo, headers, extensions=extensions)
    assert unknown.status_code == 200
    assert charged(unknown) == 1  # as any request
    assert unknown.json() == {
        "errors": [
            {
                "message": "PersistedQueryNotFound",
                "extensions": {"code": "PERSISTED_QUERY_NOT_FOUND"},
            }
        ]
    }
    # 2. the query with its hash: it runs and is stored
    stored = post_json(demo, headers, {"query": query, "extensions": extensions})
    assert stored.json() == {"data": {"person": {"name": "Ada Lovelace"}}}
    # 3. the hash alone now runs it, by GET with an ETag, and If-None-Match gets 304
    ran = get(demo, headers, extensions=extensions)
    assert ran.status_code == 200
    assert ran.json() == {"data": {"person": {"name": "Ada Lovelace"}}}
    etag = ran.headers["ETag"]
    again = get(demo, {**headers, "If-None-Match": etag}, extensions=extensions)
    assert again.status_code == 304 and again.content == b""
    assert again.headers["ETag"] == etag
    # and by POST
    posted = post_json(demo, headers, {"extensions": extensions})
    assert posted.json() == {"data": {"person": {"name": "Ada Lovelace"}}}


def test_a_hash_that_is_not_the_querys_is_400_and_stores_nothing(demo):
    headers = fresh_key(demo)
    query = "{ me { name } } # " + uuid.uuid4().hex
    digest, extensions = apq(query + " ")
    refused = post_json(demo, headers, {"query": query, "extensions": extensions})
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["extensions"]["code"] == "BAD_REQUEST"
    unknown = get(demo, headers, extensions=extensions)
    assert unknown.json()["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_FOUND"


@pytest.mark.parametrize(
    "persisted",
    [{"version": 2, "sha256Hash": "0" * 64}, {"version": 1, "sha256Hash": "X" * 64}, "x"],
)
def test_malformed_persisted_query_extensions_are_400(client, headers, persisted):
    response = client.post(
        "/graphql", json={"extensions": {"persistedQuery": persisted}}, headers=headers
    )
    assert response.status_code == 400
    assert response.json["errors"][0]["extensions"]["code"] == "BAD_REQUEST"


def test_a_persisted_mutation_by_get_stays_refused(demo):
    headers = fresh_key(demo)
    query = 'mutation { sendMessage(personId: "1", content: "hi") { id } } # ' + uuid.uuid4().hex
    digest, extensions = apq(query)
    stored = post_json(demo, headers, {"query": query, "extensions": extensions})
    assert "errors" not in stored.json()
    refused = get(demo, headers, extensions=extensions)
    assert refused.status_code == 405 and refused.headers["Allow"] == "POST"


def test_persisted_queries_pass_every_limit_and_are_stored_only_when_valid(demo):
    headers = fresh_key(demo)
    for query in ("{ people(limit: 1000) { friends(limit: 100) { id } } }", "{ nosuch }"):
        query += " # " + uuid.uuid4().hex
        digest, extensions = apq(query)
        refused = post_json(demo, headers, {"query": query, "extensions": extensions})
        code = refused.json()["errors"][0]["extensions"]["code"]
        assert code in ("QUERY_TOO_COMPLEX", "GRAPHQL_VALIDATION_FAILED")
        unknown = get(demo, headers, extensions=extensions)
        assert unknown.json()["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_FOUND"


def test_persisted_queries_survive_a_restart_and_are_shared(tmp_path):
    from .conftest import ServerProcess, start_demo

    query = "{ me { kind } }"
    digest, extensions = apq(query)
    first = start_demo(tmp_path)
    try:
        headers = first.headers  # the demo key the server printed
        stored = post_json(first, headers, {"query": query, "extensions": extensions})
        assert stored.json() == {"data": {"me": {"kind": "api_key"}}}
    finally:
        first.stop()
    second = ServerProcess(first.db).start()
    try:
        ran = get(second, headers, extensions=extensions)
        assert ran.json() == {"data": {"me": {"kind": "api_key"}}}
    finally:
        second.stop()


def test_the_store_keeps_a_bounded_number_of_documents(store):
    for index in range(5):
        store.put_persisted(f"{index:064x}", f"{{ a{index} }}", f"k{index}", keep=3)
    kept = [store.get_persisted(f"{index:064x}") for index in range(5)]
    assert kept == [None, None, "{ a2 }", "{ a3 }", "{ a4 }"]


def test_the_store_keeps_a_bounded_number_of_documents_per_caller_least_used_out(store):
    import time

    def digest(index):
        time.sleep(0.002)  # the store's clock has milliseconds: one use after the other
        return f"{index:064x}"

    store.put_persisted(digest(99), "{ other }", "someone", keep=10, per_owner=3)
    for index in range(3):
        store.put_persisted(digest(index), f"{{ a{index} }}", "k", keep=10, per_owner=3)
    assert store.get_persisted(digest(0), fresh_for=0) == "{ a0 }"  # used again: 1 is least
    store.put_persisted(digest(3), "{ a3 }", "k", keep=10, per_owner=3)
    kept = [store.get_persisted(digest(index)) for index in (0, 1, 2, 3, 99)]
    assert kept == ["{ a0 }", None, "{ a2 }", "{ a3 }", "{ other }"]  # only k's own went


def test_a_stored_hash_is_not_written_again(store):
    from .conftest import count_statements

    store.put_persisted("a" * 64, "{ me { name } }", "k")
    statements = []
    again = count_statements(store, lambda: store.put_persisted("a" * 64, "{ me { name } }", "k"))
    used = count_statements(store, lambda: statements.append(store.get_persisted("a" * 64)))
    assert (again, used) == (1, 1)  # one SELECT each, no write


def post_json(server, headers, body):
    return server.request("POST", "/graphql", json=body, headers=headers)


APQ_CLIENT = Path(__file__).parent / "apq"


@pytest.fixture(scope="module")
def apollo(tmp_path_factory):
    """Apollo Client and its persisted-queries link, installed from npm into a temp folder."""
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip("node and npm are not installed")
    folder = tmp_path_factory.mktemp("apq")
    for name in ("package.json", "apq-client.mjs"):
        shutil.copy(APQ_CLIENT / name, folder / name)
    installed = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--prefer-offline"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if installed.returncode != 0:
        pytest.skip(f"npm install failed: {installed.stderr[-300:]}")
    return folder


def test_apollo_clients_persisted_query_link_works_unchanged(apollo, demo_server):
    """GET with the hash (not found), POST with the query, then GET with the hash alone."""
    ran = subprocess.run(
        ["node", "apq-client.mjs", f"{demo_server.url}/graphql", demo_server.key],
        cwd=apollo,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert report["results"] == ["Ada Lovelace", "Ada Lovelace"]
    requests = [(seen["method"], seen["status"], seen["hasQuery"]) for seen in report["seen"]]
    assert requests == [("GET", 200, False), ("POST", 200, True), ("GET", 200, False)]


def test_one_caller_flooding_persisted_queries_evicts_only_its_own(demo, monkeypatch):
    """SPEC 11b: documents are bounded per caller as well as in total, least recently used out."""
    from people_service.graphql import view

    monkeypatch.setattr(view, "PERSISTED_KEEP_PER_CALLER", 3)
    other, flooder = fresh_key(demo), fresh_key(demo)
    theirs = "{ me { name } } # " + uuid.uuid4().hex
    post_json(demo, other, {"query": theirs, "extensions": apq(theirs)[1]})
    flood = ["{ me { name } } # " + uuid.uuid4().hex for _ in range(5)]
    for query in flood:
        stored = post_json(demo, flooder, {"query": query, "extensions": apq(query)[1]})
        assert "errors" not in stored.json()
    found = ["errors" not in get(demo, flooder, extensions=apq(query)[1]).json() for query in flood]
    assert found == [False, False, True, True, True]  # its own least recently used went
    kept = get(demo, flooder, extensions=apq(theirs)[1]).json()  # any caller may run a hash
    assert "errors" not in kept and kept["data"]["me"]["name"]
