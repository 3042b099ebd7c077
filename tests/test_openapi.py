"""The OpenAPI document: generated from the routes, and true to the server under a fuzzer."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .conftest import GENEROUS, ROOT, ServerProcess, database

UNDOCUMENTED = {
    "/openapi.json",
    "/graphql",
    "/graphql/schema.graphql",
    "/static/<path:filename>",
    # the pages for browsers (their JSON forms are links and the document itself)
    "/",
    "/docs",
}


def test_document_is_openapi_31_with_components_from_the_schemas(client):
    document = client.get("/openapi.json").json
    assert document["openapi"] == "3.1.0"
    components = document["components"]["schemas"]
    assert {"Person", "PersonOut", "PersonPatch", "PersonUpdate", "Message", "Problem"} <= set(
        components
    )
    person = components["Person"]
    assert person["required"] == ["name"]
    assert person["additionalProperties"] is False
    assert person["properties"]["name"]["maxLength"] == 200
    assert person["properties"]["age"]["maximum"] == 150
    assert components["Message"]["properties"]["content"]["maxLength"] == 10_000
    security = document["components"]["securitySchemes"]
    assert security["ApiKey"] == {"type": "apiKey", "in": "header", "name": "X-API-Key"}


def test_every_route_is_documented_with_its_methods(app, client):
    document = client.get("/openapi.json").json
    documented = {
        (path, method.upper())
        for path, operations in document["paths"].items()
        for method in operations
    }
    served = set()
    for rule in app.url_map.iter_rules():
        if rule.rule in UNDOCUMENTED:
            continue
        path = rule.rule.replace("<id:", "{").replace(">", "}")
        served |= {(path, method) for method in rule.methods - {"HEAD", "OPTIONS"}}
    assert documented == served


def test_errors_are_documented_as_problems(client):
    document = client.get("/openapi.json").json
    get_person = document["paths"]["/person/{person_id}"]["get"]
    for status in ("401", "403", "404", "429"):
        content = get_person["responses"][status]["content"]
        assert list(content) == ["application/problem+json"]
    assert get_person["security"] == [{"ApiKey": []}, {"Bearer": []}]


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory, backend):
    db = database(tmp_path_factory.mktemp("fuzz"))
    env = {
        "PEOPLE_SERVICE_RATE_LIMIT": GENEROUS,
        "PEOPLE_SERVICE_ANONYMOUS_RATE_LIMIT": GENEROUS,
    }
    server = ServerProcess(db, env=env).start()
    server.key = server.wait_for_output(lambda line: line.startswith("ps_"))
    yield server
    server.stop()


def test_schemathesis_finds_no_server_error_and_no_mismatch(fuzz_server, tmp_path):
    """schemathesis: every check, all phases (examples, coverage, fuzzing, stateful), bounded."""
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(ROOT / "tests" / "fuzz" / "schemathesis.toml"),
        "run",
        fuzz_server.url + "/openapi.json",
        "--header",
        f"X-API-Key: {fuzz_server.key}",
        "--max-examples",
        "25",
        "--seed",
        "20261122",
        "--checks",
        "all",
        "--no-color",
    ]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.fuzz.hooks", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "Tested: 15" in result.stdout
    assert "Traceback" not in "\n".join(fuzz_server.stderr)
