"""schemathesis' GraphQL mode against the app (in-process): no 5xx, no internal error, ever."""

from __future__ import annotations

import json

import schemathesis
from hypothesis import settings

from .conftest import CLIENT_CODES, ROOT

# The schema file is the one the app loads; the app holds the demo data.
schema = schemathesis.graphql.from_path(ROOT / "schema.graphql")


@schema.parametrize()
@settings(derandomize=True)  # examples: the hypothesis profile's (conftest.py)
def test_generated_queries_and_mutations_never_fail_inside(case, demo):
    response = case.call(app=demo.app, base_url=demo.url + "/graphql", headers=demo.headers)
    assert response.status_code < 500, response.text
    body = response.json()
    for error in body.get("errors", ()):
        # every error is the client's (a rule it broke, a missing id), never the server's
        assert error["extensions"]["code"] in CLIENT_CODES, json.dumps(error)
        assert error["message"] != "Internal server error"
        assert "Traceback" not in error["message"]
