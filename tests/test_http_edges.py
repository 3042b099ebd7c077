"""HTTP at its edges, against the real server: redirects, OPTIONS, body and header limits,
connections that stay open, bounded error documents and idempotent retries."""

from __future__ import annotations

import http.client
import json
import select
import socket
import time
import uuid

import pytest

from .conftest import CLIENT_CODES, ServerProcess, database, start_demo

PROBLEM = "application/problem+json"
SMALL_BODY = 1024  # MAX_BODY_BYTES of the small_server


@pytest.fixture(scope="module")
def small_server(tmp_path_factory, backend):
    """A real server whose body limit is 1 KiB, so that bodies over it are cheap to send."""
    server = start_demo(tmp_path_factory.mktemp("small"), MAX_BODY_BYTES=SMALL_BODY)
    yield server
    server.stop()


def address(server) -> tuple[str, int]:
    return "127.0.0.1", int(server.url.rsplit(":", 1)[1])


def parse(raw: bytes) -> tuple[int, dict, bytes]:
    """Status, headers (lower-case names) and body of one raw HTTP answer."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, body


def read_answer(sock, timeout: float = 10) -> bytes:
    """Everything the server sends until it closes the connection."""
    sock.settimeout(timeout)
    received = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return received
        received += chunk


def assert_problem_answer(raw: bytes, status: int) -> dict:
    code, headers, body = parse(raw)
    assert code == status, raw[:300]
    assert headers["content-type"] == PROBLEM
    assert headers["x-request-id"]
    document = json.loads(body)
    assert document["status"] == status
    assert document["type"] == "about:blank"
    return document


# -- no redirect is ever built from the Host header --------------------------------------------


def route_paths(app) -> list[str]:
    """One concrete path for every route the app serves (ids and file names filled in)."""
    paths = set()
    for rule in app.url_map.iter_rules():
        path = rule.rule
        for name in rule.arguments:
            path = path.replace(f"<id:{name}>", "1").replace(f"<path:{name}>", "x")
        paths.add(path)
    return sorted(paths)


def shapes(path: str) -> list[str]:
    """Paths that are not routes but look like one: a trailing slash, or one slash doubled."""
    variants = {path + "/", path + "//"}
    for index, char in enumerate(path):
        if char == "/" and index > 0:
            variants.add(path[:index] + "/" + path[index:])
    return sorted(variants - {path})


def test_no_route_shape_answers_a_redirect_built_from_host(app, demo_server):
    paths = route_paths(app)
    assert "/people" in paths and "/person/1/friends/1" in paths
    checked = 0
    for path in paths:
        for variant in shapes(path):
            for method in ("GET", "POST", "DELETE"):
                response = demo_server.request(
                    method,
                    variant,
                    headers={**demo_server.headers, "Host": "evil.example"},
                    allow_redirects=False,
                )
                assert not 300 <= response.status_code < 400, (method, variant)
                assert "Location" not in response.headers, (method, variant)
                if variant.strip("/") == "":
                    # waitress itself reads leading slashes as one: `//` is the front page,
                    # answered as `/` is (no redirect either)
                    continue
                if (method, variant) == ("GET", "/people/"):
                    assert response.status_code == 200  # the list, not a redirect
                    continue
                # 405: /static/<path:...> also matches its own variants, for GET only
                assert response.status_code in (404, 405), (method, variant)
                assert response.headers["Content-Type"] == PROBLEM
                checked += 1
    assert checked > 60


def test_double_slash_person_path_is_a_404_problem(demo_server):
    response = demo_server.request(
        "GET",
        "/person//2",
        headers={**demo_server.headers, "Host": "evil.example"},
        allow_redirects=False,
    )
    assert response.status_code == 404
    assert response.headers["Content-Type"] == PROBLEM
    assert response.json()["detail"] == "No such resource."
    assert "Location" not in response.headers


def test_people_with_a_trailing_slash_answers_the_list_without_a_redirect(demo_server):
    headers = {**demo_server.headers, "Host": "evil.example"}
    response = demo_server.request(
        "GET", "/people/?limit=2", headers=headers, allow_redirects=False
    )
    assert response.status_code == 200
    assert response.json() == demo_server.request("GET", "/people?limit=2", headers=headers).json()
    assert response.headers["Link"] == '</people?limit=2&offset=2>; rel="next"'
    assert "Location" not in response.headers
    for other in ("/people//", "/person/1/", "/person/1/friends/"):
        refused = demo_server.request("GET", other, headers=headers, allow_redirects=False)
        assert refused.status_code == 404, other
        assert refused.headers["Content-Type"] == PROBLEM


# -- OPTIONS ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/people", {"GET", "HEAD", "OPTIONS"}),
        ("/person", {"POST", "OPTIONS"}),
        ("/person/1", {"GET", "HEAD", "PUT", "PATCH", "POST", "DELETE", "OPTIONS"}),
        ("/person/1/friends/2", {"PUT", "DELETE", "OPTIONS"}),
        ("/graphql", {"GET", "HEAD", "POST", "OPTIONS"}),
        ("/health", {"GET", "HEAD", "OPTIONS"}),
    ],
)
def test_options_answers_204_with_allow_and_no_body(demo_server, path, allowed):
    response = demo_server.request("OPTIONS", path)
    assert response.status_code == 204
    assert set(response.headers["Allow"].split(", ")) == allowed
    assert response.content == b""
    assert "Content-Type" not in response.headers
    assert response.headers["X-Request-ID"]


def test_options_is_204_on_every_route(app, demo_server):
    for path in route_paths(app):
        response = demo_server.request("OPTIONS", path)
        assert response.status_code == 204, path
        assert "OPTIONS" in response.headers["Allow"]
        assert "Content-Type" not in response.headers, path


def test_options_on_an_unknown_path_is_a_404_problem(demo_server):
    response = demo_server.request("OPTIONS", "/nowhere")
    assert response.status_code == 404
    assert response.headers["Content-Type"] == PROBLEM


# -- bodies and headers over the limit ----------------------------------------------------------
# The app refuses bodies over MAX_BODY_BYTES (413 problem+json). waitress reads a request whole
# before the app sees it, so it refuses by itself what it will not read (bodies beyond the
# limit plus 64 KiB, headers over 64 KiB, requests it cannot parse), with its own plain-text
# answer: it has no public hook for those (README, "Errors").

WAITRESS_PLAIN = "text/plain"


def assert_waitress_refusal(sock, status: int) -> None:
    """waitress's answer, or a reset: it closes with the rest of the request unread, and the
    kernel's reset then may destroy the answer before the client reads it."""
    try:
        answer = read_answer(sock)
    except ConnectionResetError:
        return
    assert_waitress_answer(answer, status)


def assert_waitress_answer(raw: bytes, status: int) -> None:
    code, headers, _ = parse(raw)
    assert code == status, raw[:300]
    assert headers["content-type"].startswith(WAITRESS_PLAIN)
    assert headers["connection"] == "close"


def post_head(server, length_header: str, path: str = "/person") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nX-API-Key: {server.key}\r\n"
        f"Content-Type: application/json\r\n{length_header}\r\n\r\n"
    ).encode()


def test_an_announced_body_far_over_the_limit_is_413_before_it_is_sent(small_server):
    # 10 GB announced and never sent: the answer comes at once, so nothing was waited for
    with socket.create_connection(address(small_server), timeout=10) as sock:
        sock.sendall(post_head(small_server, "Content-Length: 10000000000"))
        assert_waitress_answer(read_answer(sock), 413)


@pytest.mark.parametrize("size", [SMALL_BODY + 1, 20 * SMALL_BODY, 60 * SMALL_BODY])
def test_bodies_over_the_limit_are_413_problem_at_every_size(small_server, size):
    body = b'{"name": "' + b"x" * size + b'"}'
    response = small_server.request(
        "POST",
        "/person",
        data=body,
        headers={**small_server.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 413
    assert response.headers["Content-Type"] == PROBLEM
    assert response.json()["status"] == 413


def test_a_body_at_the_limit_is_read(small_server):
    body = json.dumps({"name": "at the limit"}).ljust(SMALL_BODY).encode()  # JSON may pad
    assert len(body) == SMALL_BODY
    response = small_server.request(
        "POST",
        "/person",
        data=body,
        headers={**small_server.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 201


def test_a_body_over_the_limit_is_413_even_where_no_body_is_read(small_server):
    response = small_server.request(
        "GET", "/people", data=b"x" * (2 * SMALL_BODY), headers=small_server.headers
    )
    assert response.status_code == 413
    assert response.headers["Content-Type"] == PROBLEM


def chunked(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def test_a_small_chunked_body_over_the_limit_is_413_problem(small_server):
    with socket.create_connection(address(small_server), timeout=10) as sock:
        sock.sendall(post_head(small_server, "Transfer-Encoding: chunked\r\nConnection: close"))
        sock.sendall(chunked(b"x" * (2 * SMALL_BODY)) + b"0\r\n\r\n")
        assert_problem_answer(read_answer(sock), 413)


def test_an_endless_chunked_body_is_413_and_never_buffered_whole(small_server):
    """The server answers while the client is still sending: it read a bounded part only."""
    piece = chunked(b"x" * 65536)
    sent = 0
    with socket.create_connection(address(small_server), timeout=10) as sock:
        sock.sendall(post_head(small_server, "Transfer-Encoding: chunked"))
        answered = False
        while sent < 256 * 1024 * 1024:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                answered = True
                break
            try:
                sock.sendall(piece)
            except OSError:  # the server stopped reading after a while: read its answer
                answered = True
                break
            sent += len(piece)
        assert answered, "no answer after 256 MiB"
        assert_waitress_refusal(sock, 413)
    assert sent < 64 * 1024 * 1024
    assert small_server.request("GET", "/health").status_code == 200


def test_a_chunked_body_at_the_limit_is_read(small_server):
    body = json.dumps({"name": "chunked"}).encode()
    with socket.create_connection(address(small_server), timeout=10) as sock:
        sock.sendall(post_head(small_server, "Transfer-Encoding: chunked\r\nConnection: close"))
        sock.sendall(b"".join(chunked(body[i : i + 3]) for i in range(0, len(body), 3)))
        sock.sendall(b"0\r\n\r\n")
        status, _, answer = parse(read_answer(sock))
    assert status == 201
    assert json.loads(answer)["name"] == "chunked"


def test_headers_over_the_limit_are_431(small_server):
    with socket.create_connection(address(small_server), timeout=10) as sock:
        sock.sendall(b"GET /people HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n")
        assert_waitress_refusal(sock, 431)
    assert small_server.request("GET", "/health").status_code == 200


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /people HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n", 400),
        (b"GARBAGE\r\n\r\n", 400),
        (b"POST /person HTTP/1.1\r\nHost: x\r\nContent-Length: 12abc\r\n\r\n", 400),
        (b"POST /person HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
    ],
    ids=["bad header", "bad request line", "bad content-length", "unknown transfer coding"],
)
def test_requests_the_server_cannot_parse_get_its_answer(small_server, request_bytes, status):
    with socket.create_connection(address(small_server), timeout=10) as sock:
        sock.sendall(request_bytes)
        assert_waitress_answer(read_answer(sock), status)
    assert small_server.request("GET", "/health").status_code == 200


def test_refusals_are_in_the_access_log_with_their_request_id(small_server):
    body = b"x" * (2 * SMALL_BODY)
    with socket.create_connection(address(small_server), timeout=10) as sock:
        length = f"Content-Length: {len(body)}\r\nX-Request-ID: big-1\r\nConnection: close"
        sock.sendall(post_head(small_server, length) + body)
        _, headers, _ = parse(read_answer(sock))
    assert headers["x-request-id"] == "big-1"
    deadline = time.monotonic() + 5
    while not any(" big-1 " in line and " 413 " in line for line in small_server.stderr):
        assert time.monotonic() < deadline, small_server.stderr[-5:]
        time.sleep(0.05)


# -- answers without a body ------------------------------------------------------------------


def test_204_and_304_answers_carry_no_body_and_no_content_type(demo_server):
    """waitress closes the connection after an answer without Content-Length, as these are
    (RFC 9110 forbids it on a 204): the client opens another one (README, "Errors")."""
    host, port = address(demo_server)
    made = demo_server.request(
        "POST", "/person", json={"name": "Kept"}, headers=demo_server.headers
    )
    other = demo_server.request(
        "POST", "/person", json={"name": "Other"}, headers=demo_server.headers
    )
    person, friend = made.json()["id"], other.json()["id"]
    connection = http.client.HTTPConnection(host, port, timeout=10)
    headers = demo_server.headers

    def ask(method, path, extra=None):
        connection.request(method, path, headers={**headers, **(extra or {})})
        response = connection.getresponse()
        body = response.read()
        return response, body

    first, _ = ask("GET", f"/person/{person}")
    for method, path, extra, status in [
        ("GET", f"/person/{person}", {"If-None-Match": first.getheader("ETag")}, 304),
        ("PUT", f"/person/{person}/friends/{friend}", None, 204),
        ("DELETE", f"/person/{person}/friends/{friend}", None, 204),
        ("OPTIONS", "/people", None, 204),
        ("DELETE", f"/person/{person}", None, 204),
    ]:
        response, body = ask(method, path, extra)
        assert response.status == status, (method, path)
        assert body == b""
        assert response.getheader("Connection") == "close", (method, path)
        assert response.getheader("Content-Type") is None, (method, path)
        assert response.getheader("X-Request-ID")
    after, _ = ask("GET", "/people?limit=1")  # http.client reconnects after a close
    assert after.status == 200
    connection.close()


def test_a_client_that_asks_to_close_after_a_204_gets_its_close(demo_server):
    made = demo_server.request(
        "POST", "/person", json={"name": "Gone"}, headers=demo_server.headers
    )
    with socket.create_connection(address(demo_server), timeout=10) as sock:
        sock.sendall(
            f"DELETE /person/{made.json()['id']} HTTP/1.1\r\nHost: x\r\n"
            f"X-API-Key: {demo_server.key}\r\nConnection: close\r\n\r\n".encode()
        )
        status, headers, body = parse(read_answer(sock))
    assert status == 204
    assert headers["connection"] == "close"
    assert body == b""


# -- error documents stay small whatever the body ----------------------------------------------


def test_a_body_of_many_unknown_fields_gets_a_bounded_422(demo_server):
    fields = {f"unknown_field_{index:06d}": index for index in range(28_500)}
    body = json.dumps({"name": "", **fields}).encode()
    assert 860_000 < len(body) < 1 << 20  # the 869 KB, under MAX_BODY_BYTES
    response = demo_server.request(
        "POST",
        "/person",
        data=body,
        headers={**demo_server.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert response.headers["Content-Type"] == PROBLEM
    assert len(response.content) < 16_000
    document = response.json()
    # the message about the field the client meant, ten unknown fields, and how many more
    assert len(document["errors"]) == 12
    assert document["errors"]["name"] == ["Length must be between 1 and 200."]
    assert document["errors"]["_schema"] == ["And 28490 more unknown fields."]
    assert len(document["detail"]) < 1_000


def test_one_huge_unknown_field_name_is_not_echoed_whole(demo_server):
    body = json.dumps({"name": "x", "n" * 500_000: 1}).encode()
    response = demo_server.request(
        "POST",
        "/person",
        data=body,
        headers={**demo_server.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert len(response.content) < 2_000
    (name,) = response.json()["errors"]
    assert name.startswith("nnn") and name.endswith("…") and len(name) == 100


def test_graphql_errors_for_a_big_hostile_input_stay_small(demo_server):
    fields = {f"unknown_field_{index:06d}": index for index in range(28_000)}
    query = "mutation ($input: PersonInput!) { createPerson(input: $input) { id } }"
    response = demo_server.request(
        "POST",
        "/graphql",
        json={"query": query, "variables": {"input": {"name": "x", **fields}}},
        headers=demo_server.headers,
    )
    assert response.status_code == 200
    assert len(response.content) < 64_000
    errors = response.json()["errors"]
    assert 1 <= len(errors) <= 100
    # 28,000 values are over the variables' bound: refused before they are coerced
    assert errors[0]["extensions"]["code"] == "QUERY_TOO_COMPLEX"
    assert {error["extensions"]["code"] for error in errors} <= CLIENT_CODES


@pytest.mark.parametrize(
    ("method", "path", "extra"),
    [
        ("POST", "/message", {}),
        ("POST", "/person", {}),
        ("POST", "/person", {"Idempotency-Key": "deep"}),
        ("PATCH", "/person/1", {}),
        ("POST", "/auth/token", {}),
    ],
)
def test_json_nested_600_deep_is_a_400_problem_on_every_body(demo_server, method, path, extra):
    """Python's parser takes about 990 levels; 600 once made the Idempotency-Key fingerprint
    (computed on every POST /message and POST /person) recurse past the stack: a 500."""
    nested = "[" * 600 + "]" * 600
    body = '{"person_id": "1", "content": "x", "name": "x", "extra": ' + nested + "}"
    headers = {**demo_server.headers, **extra, "Content-Type": "application/json"}
    response = demo_server.request(method, path, data=body.encode(), headers=headers)
    assert response.status_code == 400, response.text
    assert response.headers["Content-Type"] == PROBLEM
    assert response.json()["detail"] == "The JSON is nested too deeply."


def test_graphql_variables_nested_600_deep_are_a_400_by_post_and_by_get(demo_server):
    nested = "[" * 600 + "]" * 600
    query = "query ($a: [Int]) { me { name } }"
    posted = demo_server.request(
        "POST",
        "/graphql",
        data=('{"query": "' + query + '", "variables": {"a": ' + nested + "}}").encode(),
        headers={**demo_server.headers, "Content-Type": "application/json"},
    )
    by_get = demo_server.request(
        "GET",
        "/graphql",
        params={"query": query, "variables": '{"a": ' + nested + "}"},
        headers=demo_server.headers,
    )
    for response in (posted, by_get):
        assert response.status_code == 400, response.text
        (error,) = response.json()["errors"]
        assert error == {
            "message": "The JSON is nested too deeply.",
            "extensions": {"code": "BAD_REQUEST"},
        }


def test_a_number_too_long_to_read_is_a_400_that_names_no_python_internals(demo_server):
    response = demo_server.request(
        "POST",
        "/person",
        data=b'{"name": "x", "age": 1' + b"0" * 5000 + b"}",
        headers={**demo_server.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert "sys." not in detail and "int_max_str_digits" not in detail
    assert detail == "The body is not valid JSON: a number has more than 4300 digits."


# -- idempotent retries: 3 and 3.0 are the same number ---------------------------------------


def test_an_idempotent_retry_with_3_0_for_3_is_the_same_request(demo_server):
    key = {"Idempotency-Key": uuid.uuid4().hex}
    headers = {**demo_server.headers, **key, "Content-Type": "application/json"}
    first = demo_server.request(
        "POST", "/person", data=b'{"name": "Three", "age": 3}', headers=headers
    )
    again = demo_server.request(
        "POST", "/person", data=b'{"name": "Three", "age": 3.0}', headers=headers
    )
    assert first.status_code == 201
    assert again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    different = demo_server.request(
        "POST", "/person", data=b'{"name": "Three", "age": 4}', headers=headers
    )
    assert different.status_code == 422
    named = demo_server.request("GET", "/people?name=Three&limit=1000", headers=demo_server.headers)
    assert [entry["id"] for entry in named.json()] == [first.json()["id"]]


# -- the same answers under several workers -------------------------------------------------


def test_under_serve_workers_waitress_answers_what_it_cannot_parse_and_the_app_the_rest(
    tmp_path,
):
    env = {"PEOPLE_SERVICE_MAX_BODY_BYTES": str(SMALL_BODY)}
    server = ServerProcess(database(tmp_path), env=env, args=["--workers", "2"]).start()
    try:
        with socket.create_connection(address(server), timeout=10) as sock:
            sock.sendall(
                b"GET /people HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n"
            )
            assert_waitress_refusal(sock, 431)
        body = b"x" * (2 * SMALL_BODY)
        with socket.create_connection(address(server), timeout=10) as sock:
            sock.sendall(
                f"POST /person HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + body
            )
            assert_problem_answer(read_answer(sock), 413)
    finally:
        server.stop()
