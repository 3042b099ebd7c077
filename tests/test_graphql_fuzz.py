"""schemathesis' GraphQL mode against the real server: no 5xx, no internal error, ever."""

from __future__ import annotations

import json

import schemathesis
from hypothesis import settings

from .conftest import CLIENT_CODES, ROOT

# The schema file is the one the server loads; the server itself starts with the demo fixture.
schema = schemathesis.graphql.from_path(ROOT / "schema.graphql")


@schema.parametrize()
@settings(derandomize=True)  # examples: the hypothesis profile's (conftest.py)
def test_generated_queries_and_mutations_never_fail_inside(case, demo_server):
    response = case.call(
        base_url=demo_server.url + "/graphql", headers=demo_server.headers, timeout=30
    )
    assert response.status_code < 500, response.text
    body = response.json()
    for error in body.get("errors", ()):
        # every error is the client's (a rule it broke, a missing id), never the server's
        assert error["extensions"]["code"] in CLIENT_CODES, json.dumps(error)
        assert error["message"] != "Internal server error"
        assert "Traceback" not in error["message"]
