"""GraphQL limits (depth, cost, tokens, size), batching per level, and the document cache."""

from __future__ import annotations

import json
import time
import uuid

import graphql.execution.values as graphql_values
import pytest
from graphql import get_introspection_query

from people_service import transfer
from people_service.graphql import meter, view

from .conftest import count_statements


def codes(response) -> list[str]:
    return [error["extensions"]["code"] for error in response.json["errors"]]


def nested_friends(depth: int) -> str:
    """A query `depth` field levels deep: person, friends..., name."""
    inner = "name"
    for _ in range(depth - 2):
        inner = f"friends(limit: 1) {{ {inner} }}"
    return f'{{ person(id: "1") {{ {inner} }} }}'


@pytest.fixture
def crowd(store):
    """50 people, each a friend of the next ten (wrapping), through the service."""
    people = [{"id": str(i), "name": f"P{i}", "friends": []} for i in range(1, 51)]
    for i in range(50):
        people[i]["friends"] = [str((i + k) % 50 + 1) for k in range(1, 11)]
    transfer.import_people(store, {"people": people})
    return people


def test_depth_at_the_limit_runs_and_one_more_is_refused(gql, crowd):
    assert "errors" not in gql(nested_friends(10)).json
    refused = gql(nested_friends(11))
    assert codes(refused) == ["QUERY_TOO_COMPLEX"]
    assert refused.json["errors"][0]["message"] == "The query is 11 levels deep; the limit is 10."
    assert "data" not in refused.json


def test_fragments_count_towards_depth(gql, crowd):
    inner = "name"
    for _ in range(9):
        inner = f"friends(limit: 1) {{ {inner} }}"
    query = f'{{ person(id: "1") {{ ...deep }} }} fragment deep on Person {{ {inner} }}'
    assert codes(gql(query)) == ["QUERY_TOO_COMPLEX"]  # 11 levels, 10 of them in the fragment


def test_cost_multiplies_list_limits_and_uses_variables(gql, crowd):
    query = "query Q($n: Int) { people(limit: $n) { friends(limit: 100) { id } } }"
    assert "errors" not in gql(query, {"n": 49}).json  # 49 x (1 + 100) = 4949
    refused = gql(query, {"n": 50})  # 5050
    assert codes(refused) == ["QUERY_TOO_COMPLEX"]
    assert "5050" in refused.json["errors"][0]["message"]


def test_aliases_count_towards_cost(gql, crowd):
    def aliased(count, extra=""):
        fields = " ".join(f"a{i}: people(limit: 1000) {{ id }}" for i in range(count))
        return "{ " + fields + extra + " }"

    assert "errors" not in gql(aliased(5)).json  # 5000
    refused = gql(aliased(5, ' b: person(id: "1") { id }'))  # 5001
    assert codes(refused) == ["QUERY_TOO_COMPLEX"]
    assert refused.json["errors"][0]["message"].startswith("The query could return 5001 objects")


def test_more_than_2000_tokens_is_refused(gql):
    query = "{ me { " + "name " * 2100 + "} }"
    response = gql(query)
    assert codes(response) == ["QUERY_TOO_COMPLEX"]
    assert "2000 tokens" in response.json["errors"][0]["message"]


def test_more_than_100_kib_of_text_is_refused(gql):
    query = "# " + "x" * (100 * 1024) + "\n{ me { name } }"
    assert codes(gql(query)) == ["QUERY_TOO_COMPLEX"]


def test_absurd_nesting_is_refused_not_crashed(gql):
    response = gql("{" * 1000 + "}" * 1000)
    assert response.status_code == 200
    assert codes(response)[0] in {"QUERY_TOO_COMPLEX", "GRAPHQL_PARSE_FAILED"}


def test_circular_fragments_are_a_validation_error(gql):
    query = """
        { person(id: "1") { ...a } }
        fragment a on Person { friends { ...b } }
        fragment b on Person { friends { ...a } }
    """
    assert set(codes(gql(query))) == {"GRAPHQL_VALIDATION_FAILED"}


def test_the_standard_introspection_query_passes_the_limits(gql):
    response = gql(get_introspection_query())
    assert "errors" not in response.json
    assert response.json["data"]["__schema"]["queryType"]["name"] == "Query"


def test_limits_are_configurable(tmp_path):
    from .conftest import close_app, make_app, new_key

    app = make_app(tmp_path, GRAPHQL_MAX_DEPTH=3, GRAPHQL_MAX_COST=10)
    try:
        headers = {"X-API-Key": new_key(app, "k")}
        client = app.test_client()
        deep = client.post("/graphql", json={"query": nested_friends(4)}, headers=headers)
        assert deep.json["errors"][0]["extensions"]["code"] == "QUERY_TOO_COMPLEX"
        costly = client.post(
            "/graphql", json={"query": "{ people(limit: 11) { id } }"}, headers=headers
        )
        assert costly.json["errors"][0]["message"].startswith("The query could return 11 objects")
    finally:
        close_app(app)


def test_graphql_is_charged_its_cost_by_the_rate_limit(client, headers, crowd):
    def remaining(response):
        return int(response.headers["X-RateLimit-Remaining"])

    before = remaining(client.get("/me", headers=headers))
    after = remaining(
        client.post(
            "/graphql",
            json={"query": "{ people(limit: 5) { friends(limit: 2) { id } } }"},
            headers=headers,
        )
    )
    assert before - after == 5 * (1 + 2)
    refused = remaining(
        client.post(
            "/graphql",
            json={"query": "{ people(limit: 1000) { friends(limit: 100) { id } } }"},
            headers=headers,
        )
    )
    assert after - refused == 1  # refused before it runs: charged 1 (SPEC 11a), not 101000


def test_statements_grow_with_depth_not_with_people(gql, store, crowd):
    """No N+1: 40 people with 400 friends and 3600 friends-of-friends in as many statements as 4."""

    def query(limit):
        # distinct limits per level: an answer for the same field and limit is reused anywhere
        friends = "friends(limit: 10) { name friends(limit: 9) { name } }"
        return f"{{ people(limit: {limit}) {{ name {friends} }} }}"

    results = {}

    def run(limit):
        response = gql(query(limit))
        assert "errors" not in response.json
        results[limit] = response.json["data"]["people"]

    many = count_statements(store, lambda: run(40))
    few = count_statements(store, lambda: run(4))
    assert many == few
    # the caller's key, people, their friends, the friends of those
    assert many == 4
    assert sum(len(f["friends"]) for p in results[40] for f in p["friends"]) == 3600
    first = results[40][0]
    assert [f["name"] for f in first["friends"]] == [f"P{i}" for i in range(2, 12)]


def test_messages_and_their_people_are_batched_too(gql, store, crowd, client, headers):
    for person_id in range(1, 21):
        client.post(
            "/message", json={"person_id": str(person_id), "content": "hi"}, headers=headers
        )
    person = "person { name friends(limit: 3) { id } }"
    query = f"{{ people(limit: 20) {{ messages(limit: 5) {{ content {person} }} }} }}"
    statements = count_statements(store, lambda: gql(query))
    assert statements <= 5


def test_repeated_documents_are_parsed_and_validated_once(gql, crowd, monkeypatch):
    parsed, validated = [], []
    parse, validate = meter.parse, view.validate
    monkeypatch.setattr(meter, "parse", lambda *a, **k: parsed.append(1) or parse(*a, **k))
    monkeypatch.setattr(view, "validate", lambda *a, **k: validated.append(1) or validate(*a, **k))
    query = f'{{ person(id: "3") {{ name a{uuid.uuid4().hex}: age }} }}'  # a text not seen yet
    for _ in range(3):
        assert "errors" not in gql(query).json
    assert (len(parsed), len(validated)) == (1, 1)


# -- the limits hold against an attacker (issue 10) ------------------------------------------


def fan_out(levels: int, leaf: str = "me { name }") -> str:
    """A document whose fragments each spread the next one twice: 2^levels spreads, ~1 KB."""
    parts = ["query { ...F0 }"]
    parts += [f"fragment F{i} on Query {{ ...F{i + 1} ...F{i + 1} }}" for i in range(levels)]
    parts.append(f"fragment F{levels} on Query {{ {leaf} }}")
    return " ".join(parts)


def test_anonymous_requests_are_refused_before_the_document_is_read(client, monkeypatch):
    parsed = []
    original = meter.parse_document
    monkeypatch.setattr(meter, "parse_document", lambda text: parsed.append(text) or original(text))
    response = client.post("/graphql", json={"query": fan_out(23) + f" # {uuid.uuid4()}"})
    assert response.status_code == 401
    assert response.json["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    assert parsed == []


def test_callers_over_their_limit_are_refused_before_the_document_runs(tmp_path, monkeypatch):
    """A request is priced before it is refused: parsed once, never validated or run."""
    from .conftest import close_app, make_app, new_key

    app = make_app(tmp_path, RATE_LIMIT="2/day")
    try:
        client, headers = app.test_client(), {"X-API-Key": new_key(app, "k")}
        for _ in range(2):
            assert client.post("/graphql", json={"query": "{ me { name } }"}, headers=headers)
        parsed = []
        original = meter.parse  # graphql-core's parser, behind the cache by text
        monkeypatch.setattr(
            meter, "parse", lambda text, **limits: parsed.append(text) or original(text, **limits)
        )
        query = fan_out(23) + f" # {uuid.uuid4()}"  # a text no cache has seen
        refused = client.post("/graphql", json={"query": query}, headers=headers)
        assert refused.status_code == 429
        assert refused.json["errors"][0]["extensions"]["code"] == "RATE_LIMITED"
        assert len(parsed) <= 1
    finally:
        close_app(app)


def test_a_query_refused_as_too_complex_costs_one(tmp_path):
    """SPEC 11a, 12b: no separate window for refusals; a refused query is charged its size."""
    from .conftest import close_app, make_app, new_key

    app = make_app(tmp_path, RATE_LIMIT="100/day")
    try:
        client, headers = app.test_client(), {"X-API-Key": new_key(app, "k")}
        too_big = {"query": "{ people(limit: 1000) { friends(limit: 100) { id } } }"}
        for remaining in ("99", "98"):
            refused = client.post("/graphql", json=too_big, headers=headers)
            assert refused.json["errors"][0]["extensions"]["code"] == "QUERY_TOO_COMPLEX"
            assert refused.headers["X-RateLimit-Remaining"] == remaining
        assert client.get("/me", headers=headers).status_code == 200
    finally:
        close_app(app)


@pytest.mark.parametrize("limit", ["100/day", "1000/minute;20000/hour"])
def test_a_request_is_read_and_parsed_once_whatever_the_windows_and_the_outcome(
    tmp_path, monkeypatch, limit
):
    """The request is read, parsed and priced once, refused or run, whatever the windows. Long
    texts (no cache) show it: each parse would be paid again."""
    from .conftest import close_app, make_app, new_key

    parses = []
    real_parse = meter.parse
    monkeypatch.setattr(meter, "parse", lambda *a, **k: parses.append(1) or real_parse(*a, **k))
    app = make_app(tmp_path, RATE_LIMIT=limit)
    try:
        client, headers = app.test_client(), {"X-API-Key": new_key(app, "k")}
        padding = "#" + "a" * (2 * meter.CACHED_TEXT_BYTES) + "\n"  # one long comment
        refused = "PAD{ people(limit: 1000) { friends(limit: 100) { id } } }"
        runs = "PAD{ people(limit: 2) { name } }"
        for text, code in ((refused, "QUERY_TOO_COMPLEX"), (runs, None)):
            parses.clear()
            answer = client.post(
                "/graphql", json={"query": text.replace("PAD", padding)}, headers=headers
            )
            assert [e["extensions"]["code"] for e in answer.json.get("errors", [])] == (
                [code] if code else []
            )
            assert len(parses) == 1, text  # validation too takes the parsed document
    finally:
        close_app(app)


def test_aliases_and_fragments_on_two_levels_batch_per_level(gql, store, crowd):
    """Statements grow with depth only: aliases and fragments reuse a level's batch."""
    gql("{ me { name } }")  # the caller's key is looked up once, then cached
    base = count_statements(store, lambda: gql("{ people(limit: 40) { id } }"))
    # distinct limits per level: an answer for the same field and limit is reused anywhere
    queries = [
        "{ people(limit: 40) { a: friends(limit: 5) { id }"
        " b: friends(limit: 5) { friends(limit: 4) { id } } } }",
        "{ people(limit: 40) { ...One } }"
        " fragment One on Person { a: friends(limit: 5) { ...Two }"
        " b: friends(limit: 5) { ...Two } }"
        " fragment Two on Person { x: friends(limit: 4) { id } y: friends(limit: 4) { name } }",
        "{ people(limit: 40) { ... on Person { a: friends(limit: 5) { id } } ...More } }"
        " fragment More on Person { b: friends(limit: 5) { c: friends(limit: 4) { id }"
        " ... on Person { d: friends(limit: 4) { name } } } }",
    ]
    for query in queries:
        results = []
        statements = count_statements(store, lambda q=query, r=results: r.append(gql(q).json))
        assert "errors" not in results[0], results[0]
        assert statements == base + 2, query  # people, their friends, the friends of those


def test_a_batch_only_fetches_for_the_objects_that_asked(gql, crowd, monkeypatch):
    """A sibling list never widens a batch: `b`'s friends are fetched for person 1 only."""
    from people_service.graphql import resolvers

    asked = []
    original = resolvers.service.friends_of

    def recording(store, ids, limit):
        asked.append(sorted(ids, key=int))
        return original(store, ids, limit)

    monkeypatch.setattr(resolvers.service, "friends_of", recording)
    query = (
        '{ a: people(limit: 40) { id } b: person(id: "1") { friends(limit: 2) { name'
        " friends(limit: 2) { id } } } c: people(limit: 3) { friends(limit: 2) { id } } }"
    )
    response = gql(query)
    assert "errors" not in response.json
    assert asked and all(len(ids) <= 3 for ids in asked), asked  # never the 40 people of `a`


# -- on the demo (in-process; the hostile documents on the real server too) ----------------


def fresh_key(server, limit: str = "1000000/day") -> dict:
    """A new key with its own limit: a day's window with nothing before it counts exactly."""
    from .conftest import new_key

    return {"X-API-Key": new_key(server.app, f"k{uuid.uuid4().hex[:10]}", rate_limit=limit)}


def post(server, headers, query, variables=None):
    body = {"query": query} if variables is None else {"query": query, "variables": variables}
    return server.request("POST", "/graphql", json=body, headers=headers)


def charged(response, amount: int = 1000000) -> int:
    return amount - int(response.headers["X-RateLimit-Remaining"])


def chain(length: int) -> str:
    """Fragments that each spread the next: nesting without fields."""
    parts = ["query { ...C0 }"]
    parts += [f"fragment C{i} on Query {{ ...C{i + 1} }}" for i in range(length)]
    parts.append(f"fragment C{length} on Query {{ me {{ name }} }}")
    return " ".join(parts)


HOSTILE = {
    # 2^23 spreads in 905 bytes: 27 s to answer, even 401, when fragments were walked per spread
    "fan-out": (fan_out(23), "QUERY_TOO_COMPLEX"),
    # 490 fields of one name: graphql-core's overlap check spent 2 s on it by default
    "repeated-fields": ("{ " + "me { name } " * 490 + "}", "QUERY_TOO_COMPLEX"),
    # fragments nested 150 deep: deeper than a walk may recurse
    "fragment-chain": (chain(150), "QUERY_TOO_COMPLEX"),
}


@pytest.mark.parametrize("authenticated", [False, True], ids=["no-credentials", "with-key"])
@pytest.mark.parametrize("shape", list(HOSTILE))
def test_hostile_documents_are_decided_in_seconds(demo_server, authenticated, shape):
    """Through waitress: a real server answers each in bounded time and stays up."""
    import time

    query, code = HOSTILE[shape]
    assert len(query) < 8000
    headers = demo_server.headers if authenticated else {}
    started = time.monotonic()
    response = post(demo_server, headers, query)
    elapsed = time.monotonic() - started
    assert elapsed < 5, f"{elapsed:.1f} s"
    expected = (code, 200) if authenticated else ("UNAUTHENTICATED", 401)
    assert (response.json()["errors"][0]["extensions"]["code"], response.status_code) == expected
    assert demo_server.request("GET", "/health", timeout=5).status_code == 200


@pytest.mark.parametrize(
    ("query", "variables", "cost"),
    [
        ("{ people { id } }", None, 100),  # omitted: the schema's default
        ("{ people(limit: 7) { id } }", None, 7),  # literal
        ("query Q($n: Int) { people(limit: $n) { id } }", {"n": 7}, 7),  # variable
        ("query Q($n: Int = 7) { people(limit: $n) { id } }", {}, 7),  # defaulted variable
        ("query Q($n: Int) { people(limit: $n) { id } }", {}, 100),  # variable left out
        ("query Q($n: Int) { people(limit: $n) { id } }", {"n": 7.0}, 7),  # float variable
        ("{ people(limit: null) { id } }", None, 100),  # null: the service's default
        ('{ person(id: "1") { friends { id } } }', None, 1 + 10),  # nested, omitted
        ('query Q($n: Int!) { person(id: "1") { friends(limit: $n) { id } } }', {"n": 2.0}, 3),
        (
            "query Q($no: Boolean!) { a: people(limit: 4) { id } b: people(limit: 9) @skip(if: $no)"
            " { id } }",
            {"no": True},
            13,
        ),  # whatever the directives (SPEC 11a): an all-@skip query is paid for too
    ],
    ids=[
        "omitted",
        "literal",
        "variable",
        "defaulted-variable",
        "variable-left-out",
        "float-variable",
        "null",
        "nested-omitted",
        "nested-float",
        "skipped",
    ],
)
def test_each_way_of_giving_a_limit_is_charged_what_runs(demo, query, variables, cost):
    response = post(demo, fresh_key(demo), query, variables)
    body = response.json()
    assert "errors" not in body, body
    assert charged(response) == cost
    people = body["data"].get("people") or body["data"].get("a") or [body["data"]["person"]]
    assert len(people) <= cost


@pytest.mark.parametrize(
    ("query", "variables", "cost"),
    [
        # the list fails before it loads a row: nothing below it counts as returned, and the
        # request pays the fields it writes (SPEC 11a)
        ('{ person(id: "1") { name friends(limit: 500) { name friends { name } } } }', None, 6),
        ('query Q($n: Int) { person(id: "1") { messages(limit: $n) { id } } }', {"n": -3}, 3),
        ("{ people(limit: 5000) { id friends { id } } }", None, 4),
        ("{ people(limit: 0) { id } }", None, 2),  # people's limit starts at 1
    ],
    ids=["friends-above-100", "negative-variable", "people-above-1000", "people-zero"],
)
def test_a_limit_out_of_its_range_fails_and_is_charged_what_it_writes(demo, query, variables, cost):
    response = post(demo, fresh_key(demo), query, variables)
    body = response.json()
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT", body
    assert "between" in body["errors"][0]["message"]
    assert charged(response) == cost


def test_an_omitted_limit_no_longer_hides_a_huge_query(demo):
    query = "{ people { friends { friends { friends { friends { friends { name } } } } } } }"
    response = post(demo, demo.headers, query)
    body = response.json()
    assert "data" not in body
    assert body["errors"][0]["extensions"]["code"] == "QUERY_TOO_COMPLEX"


def count_objects(value) -> int:
    if isinstance(value, dict):
        return 1 + sum(count_objects(item) for item in value.values())
    if isinstance(value, list):
        return sum(count_objects(item) for item in value)
    return 0


EXPLORER_INTROSPECTION = {
    "graphql-core's": {},
    "the fullest": {
        "descriptions": True,
        "specified_by_url": True,
        "directive_is_repeatable": True,
        "schema_description": True,
        "input_value_deprecation": True,
    },
}


@pytest.mark.parametrize(
    "options", list(EXPLORER_INTROSPECTION.values()), ids=list(EXPLORER_INTROSPECTION)
)
def test_the_explorers_introspection_costs_at_most_100(demo, options):
    """Below __schema each field written counts once (SPEC 11a), so the explorers load at the
    default limit; the request still pays at least the fields and spreads it writes."""
    query = get_introspection_query(**options) + " # " + uuid.uuid4().hex
    full = post(demo, fresh_key(demo), query)
    assert "errors" not in full.json()
    assert 70 <= charged(full) <= 100
    small = post(demo, fresh_key(demo), '{ __type(name: "Person") { name } }')
    assert small.json()["data"] == {"__type": {"name": "Person"}} and charged(small) == 2


def schema_walk() -> tuple[str, str]:
    """The standard introspection query's `__schema { ... }` selection, and its fragments."""
    text = get_introspection_query()
    start = text.index("{", text.index("__schema"))
    depth = 0
    for end in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            break
    return text[start : end + 1], text[text.index("fragment") :]


def test_many_introspection_aliases_are_refused_and_fewer_pay_each_field(demo):
    selection, fragments = schema_walk()
    aliases = " ".join(f"s{i}: __schema {selection}" for i in range(50))  # over the alias cap
    body = post(demo, demo.headers, "query { " + aliases + " }" + fragments).json()
    assert "data" not in body
    assert {e["extensions"]["code"] for e in body["errors"]} == {"QUERY_TOO_COMPLEX"}
    document = "query { " + " ".join(f"s{i}: __schema {selection}" for i in range(20)) + " }"
    answer = post(demo, fresh_key(demo), document + fragments)
    assert "errors" not in answer.json()
    assert charged(answer) >= 20 * selection.count("{")  # each alias's fields, written


def test_the_alias_cap(demo):
    def aliased(count):
        return "{ " + " ".join(f"a{i}: me {{ name }}" for i in range(count)) + " }"

    assert "errors" not in post(demo, demo.headers, aliased(30)).json()
    refused = post(demo, demo.headers, aliased(31)).json()
    assert refused["errors"][0]["extensions"]["code"] == "QUERY_TOO_COMPLEX"
    assert refused["errors"][0]["message"] == "The query has 31 aliases; the limit is 30."


def test_a_query_above_the_whole_window_is_too_complex_and_costs_one(demo):
    headers = fresh_key(demo, "600/minute")
    refused = post(demo, headers, "{ people(limit: 700) { id } }")
    assert refused.status_code == 200
    error = refused.json()["errors"][0]
    assert error["extensions"]["code"] == "QUERY_TOO_COMPLEX"
    assert "600/minute" in error["message"]
    assert int(refused.headers.get("Retry-After", "1")) >= 1  # SPEC 11a: flask-limiter's
    strict = post(
        demo,
        {**headers, "Accept": "application/graphql-response+json"},
        "{ people(limit: 601) { id } }",
    )
    assert strict.status_code == 400
    after = post(demo, headers, "{ people(limit: 5) { id } }")
    assert after.status_code == 200
    assert after.headers["X-RateLimit-Remaining"] == "593"  # the refused ones cost 1 each


def test_a_later_window_refusing_charges_no_earlier_window(demo):
    """The headers describe the shortest window (flask-limiter's `current_limit`); that the
    day is not charged for the refusal is tests/test_r3_limits.py's to see."""
    headers = fresh_key(demo, "100/day;3/hour")
    first = post(demo, headers, "{ people(limit: 2) { id } }")
    assert first.status_code == 200 and first.headers["X-RateLimit-Remaining"] == "1"
    refused = post(demo, headers, "{ people(limit: 2) { id } }")  # the hour has 1 left
    assert refused.status_code == 429
    assert refused.headers["X-RateLimit-Limit"] == "3" and "Retry-After" in refused.headers
    assert "costs 2" in refused.json()["errors"][0]["message"]
    last = post(demo, headers, "{ __typename }")  # costs 1
    assert last.status_code == 200
    assert last.headers["X-RateLimit-Remaining"] == "0"  # the 429 charged the hour nothing


def test_a_document_nested_past_the_parser_is_too_complex(demo):
    for query in (
        "{ a " * 1000 + "}" * 1000,
        "{ people(name: " + "[" * 300 + "]" * 300 + ") { id } }",
        "{ me " + "{ a " * 150 + "}" * 151,
    ):
        body = post(demo, demo.headers, query).json()
        assert [e["extensions"]["code"] for e in body["errors"]] == ["QUERY_TOO_COMPLEX"], query


def test_no_suggestions_when_introspection_is_off(tmp_path):
    from .conftest import InProcess, close_app, make_app, new_key

    queries = [
        ('{ persn(id: "1") { name } }', None),
        ('{ person(idd: "1") { name } }', None),
        ('{ person(id: "1") { nme } }', None),
        ("query Q($p: PersonInpt!) { me { name } }", None),
        ('mutation { createPerson(input: {nme: "x"}) { id } }', None),
        ("mutation M($p: PersonInput!) { createPerson(input: $p) { id } }", {"p": {"nme": "x"}}),
    ]
    for introspection in ("false", "true"):
        directory = tmp_path / introspection
        directory.mkdir()
        app = make_app(directory, INTROSPECTION=introspection == "true")
        try:
            server = InProcess(app, new_key(app, "k"))
            texts = [post(server, server.headers, q, v).text for q, v in queries]
        finally:
            close_app(app)
        assert all('"errors"' in text for text in texts), texts
        hinted = [text for text in texts if "Did you mean" in text]
        # on, every query above gets a suggestion; off, none may reveal a name
        assert len(hinted) == (len(texts) if introspection == "true" else 0), hinted


def test_an_input_object_of_many_unknown_fields_gets_a_short_answer(demo):
    """graphql-core prints the whole object in each error about one of its fields: 100 such
    errors over 640 fields took 0.65 s and answered 640 KB to a 5 KB document (any key, any
    scope: a document is validated before its mutation is refused). Ten errors are reported."""
    fields = ", ".join(f"f{index}: 1" for index in range(640))
    query = f"mutation {{ createPerson(input: {{ {fields} }}) {{ id }} }}"
    assert len(query) < 6000
    response = post(demo, demo.headers, query)
    assert response.status_code == 200
    errors = response.json()["errors"]
    assert 1 <= len(errors) <= 11
    assert {error["extensions"]["code"] for error in errors} == {"GRAPHQL_VALIDATION_FAILED"}
    assert len(response.content) < 100_000


def test_variables_of_many_unknown_fields_get_ten_errors(demo):
    """Each coercion error of a variable inspects the whole value: ten of them, not fifty."""
    fields = {f"unknown_{index}": index for index in range(900)}  # under MAX_VARIABLE_VALUES
    query = "mutation ($input: PersonInput!) { createPerson(input: $input) { id } }"
    response = post(demo, demo.headers, query, {"input": {"name": "x", **fields}})
    assert response.status_code == 200
    errors = response.json()["errors"]
    assert 1 <= len(errors) <= 11
    assert {error["extensions"]["code"] for error in errors} == {"BAD_USER_INPUT"}


# -- SPEC 11a: every request pays for what it writes, whatever its directives ------------------


def test_an_all_skipped_query_is_charged(demo):
    query = "query { a: people(limit: 5) @skip(if: true) { id } b: me @skip(if: true) { name } }"
    response = post(demo, fresh_key(demo), query)
    assert response.json() == {"data": {}}
    assert charged(response) == 5 + 1  # the nodes that could come back, had it run


# -- SPEC 12b: GraphQL is charged by size as well ---------------------------------------------


def test_a_document_is_charged_a_unit_per_started_kib(demo):
    query = "{ me { name } }"
    padded = "#" + "x" * (50_000 - len(query) - 2) + "\n" + query
    assert len(padded.encode()) == 50_000
    assert charged(post(demo, fresh_key(demo), padded)) >= 45
    assert charged(post(demo, fresh_key(demo), query)) <= 2


def test_variables_are_charged_a_unit_per_started_kib(demo):
    variables = {"n": "x" * (30_000 - 8)}
    assert len(json.dumps(variables, separators=(",", ":"))) == 30_000
    query = "query ($n: String) { person(name: $n) { id } }"
    assert charged(post(demo, fresh_key(demo), query, variables)) >= 28


def test_a_bad_request_is_charged_its_size(demo):
    response = demo.request(
        "POST",
        "/graphql",
        data="[" * 20_000,
        headers={**fresh_key(demo), "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert charged(response) >= 19


def test_a_document_larger_than_the_window_is_too_complex_and_costs_one(demo):
    headers = fresh_key(demo, "20/hour")
    refused = post(demo, headers, "#" + "x" * 30_000 + "\n{ me { name } }")
    [error] = refused.json()["errors"]
    assert error["extensions"]["code"] == "QUERY_TOO_COMPLEX"
    assert "20/hour" in error["message"]
    assert charged(post(demo, headers, "{ __typename }"), 20) == 2


def spread_fragments(count: int) -> str:
    spreads = " ".join(f"...F{i}" for i in range(count))
    fragments = " ".join(f"fragment F{i} on Query {{ __typename }}" for i in range(count))
    return f"query {{ {spreads} }} {fragments}"


def test_215_fragment_spreads_cost_at_least_215_and_are_refused_quickly(demo):
    query = spread_fragments(215)
    response = post(demo, fresh_key(demo), query)
    [error] = response.json()["errors"]
    assert error["extensions"]["code"] == "QUERY_TOO_COMPLEX"  # before graphql-core's rules
    assert charged(response) >= 215  # 215 fields and 215 spreads written
    headers = fresh_key(demo, "300/hour")  # not enough for its cost: refused before validation
    refused = post(demo, headers, query)
    assert refused.json()["errors"][0]["extensions"]["code"] == "QUERY_TOO_COMPLEX"
    assert "300/hour" in refused.json()["errors"][0]["message"]
    # the refusal cost its size (SPEC 12b: a unit per KiB), not its estimate
    size = -(-len(query) // 1024)
    assert size > 1 and charged(post(demo, headers, "{ __typename }"), 300) == size + 1


def test_a_900_field_document_under_the_cost_limit_runs(demo):
    fields = " ".join(["id name age email"] * 10)  # each name 10 times: the most allowed
    address = "address { " + " ".join(["street city country"] * 10) + " }"
    person = 'person(id: "1") { ' + fields + " " + " ".join([address] * 9) + " }"
    query = "{ " + " ".join([person] * 3) + " }"
    written = query.count(" ") - query.count("{") - query.count("}") - 1
    assert written >= 900
    response = post(demo, fresh_key(demo), query)
    body = response.json()
    assert "errors" not in body, body["errors"][:1]
    assert body["data"]["person"]["name"] == "Ada Lovelace"
    assert 900 <= charged(response) < 5000


def test_a_person_asked_for_at_several_paths_is_loaded_once_per_level(gql, store, crowd):
    """Person 1's friends load at `person` first; `people` then loads the rest of its level in
    one statement (it used to break the batch: 5 statements became 39)."""
    gql("{ me { name } }")  # the caller's key is looked up once, then cached
    query = (
        '{ person(id: "1") { friends(limit: 10) { name } }'
        " people(limit: 10) { friends(limit: 10) { friends(limit: 10) { id } } } }"
    )
    results = []
    statements = count_statements(store, lambda: results.append(gql(query).json))
    assert "errors" not in results[0]
    # the key, person 1, their friends, the people, the rest of their friends, and the friends
    # of those that no level loaded yet
    assert statements == 6
    people = results[0]["data"]["people"]
    assert all(len(friend["friends"]) == 10 for person in people for friend in person["friends"])


# -- variables bounded and coerced once; public graphql-core hooks only (round 3) ----------

ADDRESSES = "mutation ($a: [AddressInput]) { deletePerson(id: 1) }"


def addresses(count: int) -> list[dict]:
    return [{"street": "s" * 8, "city": "c" * 8, "country": "x" * 8}] * count


def test_huge_variables_are_refused_quickly_and_charged_their_size(demo):
    """960 KB of [AddressInput] took ~1.7 s of CPU to coerce, twice."""
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
    assert charged(response) >= 900  # SPEC 12b: a unit per KiB of variables
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


def test_an_unused_fragment_is_held_to_the_limits_too(client, headers):
    """Validation reads every fragment, spread or not."""
    query = "{ me { name } } fragment U on Query { " + "me { name } " * 499 + "}"
    started = time.process_time()
    response = client.post("/graphql", json={"query": query}, headers=headers)
    assert time.process_time() - started < 0.5
    assert [e["extensions"]["code"] for e in response.json["errors"]] == ["QUERY_TOO_COMPLEX"]


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


def test_a_document_with_a_type_definition_is_priced_and_refused_by_validation(client, headers):
    """A definition with no selection set (SDL in a query) once failed the cost walk: a 500."""
    response = client.post(
        "/graphql", json={"query": "type X { a: Int } { me { name } }"}, headers=headers
    )
    assert response.status_code == 200
    assert [e["extensions"]["code"] for e in response.json["errors"]] == [
        "GRAPHQL_VALIDATION_FAILED"
    ]
