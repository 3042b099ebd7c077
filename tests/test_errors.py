"""One error shape (RFC 9457) for every status, and SPEC §6a's bad inputs answered with 4xx."""

from __future__ import annotations

import json
import logging

import pytest

from people_service import service
from people_service.web.jsonio import dump_json

from .conftest import close_app, make_app, new_key

PROBLEM_KEYS = {"type", "title", "status", "detail"}


def assert_problem(response, status: int) -> dict:
    """A problem+json answer with this status and nothing internal in it."""
    assert response.status_code == status, response.data
    assert response.content_type == "application/problem+json"
    body = response.json
    assert PROBLEM_KEYS <= body.keys() <= PROBLEM_KEYS | {"errors"}
    assert body["status"] == status
    assert body["type"] == "about:blank"
    # the same compact JSON as every success body, ending with a newline
    assert response.data == dump_json(body)
    text = response.get_data(as_text=True)
    for leak in ("Traceback", "sqlite", 'File "', ".py", "SELECT", "INSERT"):
        assert leak not in text
    assert response.headers["X-Request-ID"]
    return body


def test_400_malformed_json(client, headers):
    body = assert_problem(
        client.post(
            "/person", data='{"name":', headers={**headers, "Content-Type": "application/json"}
        ),
        400,
    )
    assert body["detail"].startswith("The body is not valid JSON")


def test_401_and_403(client, read_headers):
    assert_problem(client.get("/people"), 401)
    assert_problem(client.post("/person", json={"name": "x"}, headers=read_headers), 403)


def test_404_unknown_path_and_unknown_person(client, headers):
    assert_problem(client.get("/nowhere", headers=headers), 404)
    assert_problem(client.get("/person/5", headers=headers), 404)


def test_405_carries_allow(client, headers):
    response = client.delete("/people", headers=headers)
    assert_problem(response, 405)
    assert set(response.headers["Allow"].split(", ")) == {"GET", "HEAD", "OPTIONS"}
    trace = client.open("/person/1", method="TRACE", headers=headers)
    assert_problem(trace, 405)


def test_409_412_422(client, headers, make_person):
    made = make_person(email="a@example.org")
    assert_problem(
        client.post("/person", json={"name": "b", "email": "A@example.org"}, headers=headers), 409
    )
    assert_problem(
        client.patch(
            f"/person/{made['id']}", json={"age": 1}, headers={**headers, "If-Match": '"no"'}
        ),
        412,
    )
    body = assert_problem(
        client.post("/person", json={"name": "", "address": {"city": 5}}, headers=headers), 422
    )
    assert body["errors"] == {
        "name": ["Length must be between 1 and 200."],
        "address": {"city": ["Not a valid string."]},
    }


def test_a_422_detail_is_a_sentence_of_the_field_messages(client, headers):
    one = client.post("/person", json={"name": ""}, headers=headers)
    assert assert_problem(one, 422)["detail"] == "name: Length must be between 1 and 200."
    several = client.post(
        "/person", json={"name": "", "age": -1, "address": {"city": 5}}, headers=headers
    )
    assert assert_problem(several, 422)["detail"] == (
        "name: Length must be between 1 and 200. "
        "age: Must be greater than or equal to 0 and less than or equal to 150. "
        "address.city: Not a valid string."
    )
    listed = client.post("/message", json=[], headers=headers)
    assert assert_problem(listed, 422)["detail"] == "Must be a JSON object, not an array."


@pytest.mark.parametrize(
    ("body", "kind"),
    [([], "an array"), ("ada", "a string"), (3.5, "a number"), (True, "true or false")],
)
@pytest.mark.parametrize(("method", "path"), [("POST", "/person"), ("PATCH", "/person/{id}")])
def test_a_body_that_is_not_an_object_says_so(
    client, headers, make_person, body, kind, method, path
):
    made = make_person()
    response = client.open(path.format(id=made["id"]), method=method, json=body, headers=headers)
    problem = assert_problem(response, 422)
    assert problem["detail"] == f"Must be a JSON object, not {kind}."
    assert client.get(f"/person/{made['id']}", headers=headers).json == made


def test_error_bodies_are_compact_and_end_with_a_newline(client, headers):
    response = client.get("/person/42", headers=headers)
    assert response.data == (
        b'{"type":"about:blank","title":"Not Found","status":404,'
        b'"detail":"No person with id \'42\'."}\n'
    )
    surrogate = client.post(
        "/person",
        data='{"name": "x", "\\ud800": 1}',
        headers={**headers, "Content-Type": "application/json"},
    )
    body = assert_problem(surrogate, 422)
    assert surrogate.data.endswith(b"\n") and surrogate.data.isascii()
    assert body["errors"] == {"\ud800": ["Unknown field."]}


def test_413_body_too_large(tmp_path):
    app = make_app(tmp_path, MAX_BODY_BYTES=1024)
    try:
        key = new_key(app, "k")
        client = app.test_client()
        response = client.post("/person", json={"name": "x" * 2000}, headers={"X-API-Key": key})
        assert_problem(response, 413)
        assert client.get("/people", headers={"X-API-Key": key}).json == []
    finally:
        close_app(app)


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin-1", None],
)
def test_415_for_bodies_that_are_not_json(client, headers, content_type):
    extra = {"Content-Type": content_type} if content_type else {}
    response = client.post("/person", data='{"name": "x"}', headers={**headers, **extra})
    assert_problem(response, 415)


def test_429_has_retry_after_and_limit_headers(tmp_path):
    app = make_app(tmp_path, RATE_LIMIT="2/day")
    try:
        headers = {"X-API-Key": new_key(app, "k")}
        client = app.test_client()
        for _ in range(2):
            assert client.get("/people", headers=headers).status_code == 200
        response = client.get("/people", headers=headers)
        assert_problem(response, 429)
        assert int(response.headers["Retry-After"]) >= 1
        assert response.headers["X-RateLimit-Limit"] == "2"
        assert response.headers["X-RateLimit-Remaining"] == "0"
    finally:
        close_app(app)


def test_500_hides_the_exception(client, headers, monkeypatch, caplog):
    def explode(*args, **kwargs):
        raise RuntimeError("secret internals: /etc/passwd")

    monkeypatch.setattr(service, "list_people", explode)
    with caplog.at_level(logging.ERROR, logger="people_service"):
        response = client.get("/people", headers=headers)
    body = assert_problem(response, 500)
    assert body["detail"] == "Internal server error."
    assert "secret" not in response.get_data(as_text=True)
    assert "secret internals" in caplog.text


def test_request_id_is_echoed_or_generated_and_logged(client, headers, caplog):
    with caplog.at_level(logging.INFO, logger="people_service.access"):
        echoed = client.get("/people", headers={**headers, "X-Request-ID": "abc-123"})
        generated = client.get("/nowhere", headers=headers)
    assert echoed.headers["X-Request-ID"] == "abc-123"
    assert len(generated.headers["X-Request-ID"]) == 32
    lines = [r.getMessage() for r in caplog.records if r.name == "people_service.access"]
    assert any("abc-123 ci GET /people 200" in line for line in lines)
    # the 404 authenticated no one: the log names no caller (a look-up would count a use)
    assert any(generated.headers["X-Request-ID"] + " - GET /nowhere 404" in line for line in lines)
    assert not any(headers["X-API-Key"] in line for line in lines)


def test_request_id_with_odd_characters_is_replaced(client, headers):
    response = client.get("/people", headers={**headers, "X-Request-ID": "bad id\twith spaces"})
    assert response.headers["X-Request-ID"] != "bad id\twith spaces"


# -- SPEC §6a: each bad input gets a 4xx and leaves the data as it was ------------------------

NESTED = "[" * 1000 + "]" * 1000
BAD_BODIES = [
    ("nested 1000 deep", '{"name": "x", "age": ' + NESTED + "}", (400, 422)),
    ("nested array body", NESTED, (400, 422)),
    ("lone surrogate", '{"name": "\\ud800"}', (422,)),
    ("NUL", '{"name": "a\\u0000b"}', (422,)),
    ("NaN age", '{"name": "x", "age": NaN}', (400,)),
    ("Infinity age", '{"name": "x", "age": Infinity}', (400,)),
    ("1e400 age", '{"name": "x", "age": 1e400}', (422,)),
    ("12.5 age", '{"name": "x", "age": 12.5}', (422,)),
    ("string age", '{"name": "x", "age": "12"}', (422,)),
    ("true age", '{"name": "x", "age": true}', (422,)),
    ("huge age", '{"name": "x", "age": 99999999999999999999999}', (422,)),
    ("negative age", '{"name": "x", "age": -1}', (422,)),
    ("top-level array", '[{"name": "x"}]', (422,)),
    ("top-level string", '"x"', (422,)),
    ("unknown field", '{"name": "x", "is_admin": true}', (422,)),
    ("long name", json.dumps({"name": "x" * 201}), (422,)),
    ("bad email", '{"name": "x", "email": "nope"}', (422,)),
    ("long email", json.dumps({"name": "x", "email": "a" * 250 + "@b.co"}), (422,)),
    (
        "header injection email",
        json.dumps({"name": "x", "email": "x@y.com\r\nBcc: z@y.com"}),
        (422,),
    ),
    ("long city", json.dumps({"name": "x", "address": {"city": "c" * 201}}), (422,)),
    ("address not object", '{"name": "x", "address": "London"}', (422,)),
    ("invalid utf-8", b'{"name": "\xff"}', (400,)),
    ("empty body", "", (400,)),
]


@pytest.mark.parametrize(("label", "body", "statuses"), BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_bad_person_bodies_are_4xx_and_change_nothing(
    client, headers, make_person, label, body, statuses
):
    made = make_person("Kept", age=7)
    for method, path in (
        ("POST", "/person"),
        ("PUT", f"/person/{made['id']}"),
        ("PATCH", f"/person/{made['id']}"),
    ):
        response = client.open(
            path, method=method, data=body, headers={**headers, "Content-Type": "application/json"}
        )
        assert response.status_code in statuses, (method, response.json)
        assert_problem(response, response.status_code)
    assert client.get("/people", headers=headers).json == [{"id": made["id"], "name": "Kept"}]
    assert client.get(f"/person/{made['id']}", headers=headers).json == made


@pytest.mark.parametrize(
    "path",
    [
        "/person/-1",
        "/person/1.0",
        "/person/99999999999999999999",
        "/person/%2e%2e%2f",
        "/person/..%2F..",
        "/person/1%00",
        "/person/0",
        "/person/01",
        "/person/%EF%BC%91",  # a full-width digit one
        "/person/1e3",
        "/person/1%0A",  # `$` alone matches before a final newline: ids are matched in full
    ],
)
def test_ids_that_are_not_ids_are_404(client, headers, make_person, path):
    make_person()
    assert_problem(client.get(path, headers=headers), 404)
    assert_problem(client.delete(path, headers=headers), 404)
    assert client.get("/people", headers=headers).headers["X-Total-Count"] == "1"


def test_bad_message_bodies_are_4xx(client, headers, make_person):
    make_person()
    for body in (
        '{"person_id": 1, "content": "x"}',
        '{"person_id": "1"}',
        '{"person_id": "1", "content": "\\ud800"}',
        "[]",
    ):
        response = client.post(
            "/message", data=body, headers={**headers, "Content-Type": "application/json"}
        )
        assert_problem(response, 422)
    assert client.get("/person/1/messages", headers=headers).json == []


def test_an_id_with_a_final_newline_names_no_one(client, headers, make_person, gql):
    """`^[1-9][0-9]*$` matches "10\\n" with re.match: ids must be matched in full."""
    ada = make_person("Ada")
    before = client.get(f"/person/{ada['id']}", headers=headers).json
    update = client.post("/person", json={"id": ada["id"] + "\n", "name": "Eve"}, headers=headers)
    assert update.status_code == 422
    assert update.json["errors"] == {"id": ["Not a valid id."]}
    assert client.get(f"/person/{ada['id']}", headers=headers).json == before
    message = client.post(
        "/message", json={"person_id": ada["id"] + "\n", "content": "hi"}, headers=headers
    )
    assert message.status_code == 422
    found = gql("query ($id: ID!) { person(id: $id) { name } }", {"id": ada["id"] + "\n"})
    assert found.json["data"] == {"person": None}
    assert found.json["errors"][0]["extensions"]["code"] == "NOT_FOUND"
