"""The query language of the seed's rules and SPEC §5, by GET and POST (the demo, in-process)."""

from __future__ import annotations

import pytest

from .conftest import demo_people, new_key

DEMO = demo_people()
BOTH = pytest.mark.parametrize("method", ["GET", "POST"])


def person_of(person_id: str, *fields: str) -> dict:
    person = DEMO[person_id]
    return {field: person[field] for field in fields}


def friends_of(person_id: str, limit: int = 10) -> list[str]:
    return sorted(DEMO[person_id]["friends"], key=int)[:limit]


def data(response) -> dict:
    assert response.status_code == 200, response.text
    body = response.json()
    assert "errors" not in body, body
    return body["data"]


def codes(response) -> list[str]:
    return [error["extensions"]["code"] for error in response.json()["errors"]]


@BOTH
def test_fields_and_nested_selections(graphql, method):
    response = graphql(method, '{ person(id: "1") { name address { city } } }')
    assert response.json() == {
        "data": {
            "person": {"name": DEMO["1"]["name"], "address": {"city": DEMO["1"]["address"]["city"]}}
        }
    }


@BOTH
def test_only_the_fields_asked_for_come_back(graphql, method):
    person = data(graphql(method, '{ person(id: "2") { email } }'))["person"]
    assert person == {"email": DEMO["2"]["email"]}


@BOTH
def test_every_person_field(graphql, method):
    query = '{ person(id: "3") { id name age email address { street city country } } }'
    expected = {key: value for key, value in DEMO["3"].items() if key != "friends"}
    assert data(graphql(method, query)) == {"person": expected}


@BOTH
def test_person_by_name_ignores_case(graphql, method):
    name = DEMO["5"]["name"]
    found = data(graphql(method, f'{{ person(name: "{name.upper()}") {{ id name }} }}'))
    assert found == {"person": {"id": "5", "name": name}}


@BOTH
def test_person_needs_exactly_one_of_id_and_name(graphql, method):
    for query in ("{ person { name } }", '{ person(id: "1", name: "x") { name } }'):
        response = graphql(method, query)
        assert response.json()["data"] == {"person": None}
        assert codes(response) == ["BAD_USER_INPUT"]


@BOTH
def test_missing_person_is_null_with_not_found(graphql, method):
    response = graphql(method, '{ person(id: "999999") { name } }')
    body = response.json()
    assert body["data"] == {"person": None}
    assert body["errors"][0]["path"] == ["person"]
    assert codes(response) == ["NOT_FOUND"]


@BOTH
def test_aliases_ask_the_same_field_twice(graphql, method):
    query = '{ first: person(id: "1") { name } second: person(id: "2") { who: name } }'
    assert data(graphql(method, query)) == {
        "first": {"name": DEMO["1"]["name"]},
        "second": {"who": DEMO["2"]["name"]},
    }


@BOTH
def test_friends_with_limit_and_aliases(graphql, method):
    query = '{ person(id: "2") { two: friends(limit: 2) { id } all: friends { id } } }'
    person = data(graphql(method, query))["person"]
    assert [f["id"] for f in person["two"]] == friends_of("2", 2)
    assert [f["id"] for f in person["all"]] == friends_of("2")


@BOTH
@pytest.mark.parametrize("limit", [-1, 101])
def test_friends_limit_outside_0_to_100_is_bad_user_input(graphql, method, limit):
    response = graphql(method, f'{{ person(id: "1") {{ friends(limit: {limit}) {{ id }} }} }}')
    assert set(codes(response)) == {"BAD_USER_INPUT"}
    assert response.json()["data"] == {"person": None}


@BOTH
def test_friends_limit_zero_is_empty(graphql, method):
    query = '{ person(id: "2") { friends(limit: 0) { id } } }'
    assert data(graphql(method, query)) == {"person": {"friends": []}}


@BOTH
def test_named_fragments(graphql, method):
    query = """
        query { person(id: "1") { ...card friends(limit: 1) { ...card } } }
        fragment card on Person { name email }
    """
    first_friend = friends_of("1", 1)[0]
    assert data(graphql(method, query)) == {
        "person": {
            **person_of("1", "name", "email"),
            "friends": [person_of(first_friend, "name", "email")],
        }
    }


@BOTH
def test_inline_fragments(graphql, method):
    query = '{ person(id: "4") { ... on Person { name } ... { age } } }'
    assert data(graphql(method, query)) == {"person": person_of("4", "name", "age")}


@BOTH
def test_named_operation_with_required_and_default_variables(graphql, method):
    query = """
        query Person($id: ID!, $n: Int = 2) { person(id: $id) { name friends(limit: $n) { id } } }
    """
    found = data(graphql(method, query, {"id": "2"}, operation="Person"))["person"]
    assert found["name"] == DEMO["2"]["name"]
    assert [f["id"] for f in found["friends"]] == friends_of("2", 2)
    three = data(graphql(method, query, {"id": "2", "n": 3}))["person"]
    assert [f["id"] for f in three["friends"]] == friends_of("2", 3)


@BOTH
def test_missing_or_mistyped_variables_are_bad_user_input(graphql, method):
    query = "query Q($id: ID!, $n: Int) { person(id: $id) { friends(limit: $n) { id } } }"
    for variables in ({}, {"id": "1", "n": "three"}, {"id": "1", "n": 2**31}, {"id": {"x": 1}}):
        response = graphql(method, query, variables)
        assert response.status_code == 200
        assert "data" not in response.json()
        assert codes(response) == ["BAD_USER_INPUT"]


@BOTH
def test_include_and_skip_directives(graphql, method):
    query = """
        query Q($withEmail: Boolean!, $noAge: Boolean!) {
          person(id: "1") { name email @include(if: $withEmail) age @skip(if: $noAge) }
        }
    """
    name = DEMO["1"]["name"]
    assert data(graphql(method, query, {"withEmail": True, "noAge": True})) == {
        "person": {"name": name, "email": DEMO["1"]["email"]}
    }
    assert data(graphql(method, query, {"withEmail": False, "noAge": False})) == {
        "person": {"name": name, "age": DEMO["1"]["age"]}
    }


@BOTH
def test_introspection(graphql, method):
    query = '{ __schema { queryType { name } } __type(name: "Person") { fields { name } } }'
    found = data(graphql(method, query))
    assert found["__schema"] == {"queryType": {"name": "Query"}}
    assert {f["name"] for f in found["__type"]["fields"]} == {
        "id",
        "name",
        "age",
        "email",
        "address",
        "friends",
        "messages",
    }


@BOTH
def test_people_with_name_limit_and_offset(graphql, method):
    ids = sorted(DEMO, key=int)
    page = data(graphql(method, "{ people(limit: 3, offset: 2) { id } }"))["people"]
    assert [p["id"] for p in page] == ids[2:5]
    matches = sorted(
        (p for p in DEMO.values() if "ada" in p["name"].casefold()), key=lambda p: int(p["id"])
    )
    found = data(graphql(method, '{ people(name: "ADA") { name } }'))["people"]
    assert [p["name"] for p in found] == [p["name"] for p in matches]


@BOTH
@pytest.mark.parametrize("arguments", ["limit: 0", "limit: 1001", "offset: -1"])
def test_people_paging_outside_the_rest_bounds(graphql, method, arguments):
    response = graphql(method, f"{{ people({arguments}) {{ id }} }}")
    assert codes(response) == ["BAD_USER_INPUT"]


@BOTH
def test_me(graphql, method):
    me = data(graphql(method, "{ me { kind name scopes rateLimit requestCount lastUsed } }"))["me"]
    assert me["kind"] == "api_key" and me["name"] == "demo"
    assert me["scopes"] == ["read", "write"]
    assert me["requestCount"] >= 1


def test_mutations_create_update_and_delete(graphql):
    created = data(
        graphql(
            "POST",
            'mutation { createPerson(input: {name: "Mary Anning", age: 47,'
            ' address: {city: "Lyme Regis"}})'
            " { id name age email address { street city country } } }",
        )
    )["createPerson"]
    assert created == {
        "id": created["id"],
        "name": "Mary Anning",
        "age": 47,
        "email": None,
        "address": {"street": None, "city": "Lyme Regis", "country": None},
    }
    person_id = created["id"]
    updated = data(
        graphql(
            "POST",
            "mutation U($id: ID!) { updatePerson(id: $id,"
            ' input: {address: {country: "UK"}, age: null}) { age address { city country } } }',
            {"id": person_id},
        )
    )["updatePerson"]
    assert updated == {"age": None, "address": {"city": "Lyme Regis", "country": "UK"}}
    deleted = data(graphql("POST", f'mutation {{ deletePerson(id: "{person_id}") }}'))
    assert deleted == {"deletePerson": person_id}
    gone = graphql("POST", f'{{ person(id: "{person_id}") {{ name }} }}')
    assert codes(gone) == ["NOT_FOUND"]


def test_mutations_for_friends_and_messages(graphql):
    a = data(graphql("POST", 'mutation { createPerson(input: {name: "A"}) { id } }'))[
        "createPerson"
    ]["id"]
    b = data(graphql("POST", 'mutation { createPerson(input: {name: "B"}) { id } }'))[
        "createPerson"
    ]["id"]
    added = data(
        graphql(
            "POST", f'mutation {{ addFriend(id: "{a}", friendId: "{b}") {{ friends {{ id }} }} }}'
        )
    )
    assert added == {"addFriend": {"friends": [{"id": b}]}}
    sent = data(
        graphql(
            "POST",
            f'mutation {{ sendMessage(personId: "{b}", content: "Hi")'
            " { content sender person { id } } }",
        )
    )
    assert sent == {"sendMessage": {"content": "Hi", "sender": "demo", "person": {"id": b}}}
    mine = data(
        graphql("POST", f'{{ person(id: "{b}") {{ messages {{ content }} friends {{ id }} }} }}')
    )
    assert mine == {"person": {"messages": [{"content": "Hi"}], "friends": [{"id": a}]}}
    removed = data(
        graphql(
            "POST",
            f'mutation {{ removeFriend(id: "{b}", friendId: "{a}") {{ friends {{ id }} }} }}',
        )
    )
    assert removed == {"removeFriend": {"friends": []}}


def test_mutation_validation_matches_rest(graphql, demo):
    response = graphql("POST", 'mutation { createPerson(input: {name: ""}) { id } }')
    error = response.json()["errors"][0]
    rest = demo.request("POST", "/person", json={"name": ""}, headers=demo.headers)
    assert error["extensions"] == {"code": "BAD_USER_INPUT", "errors": rest.json()["errors"]}
    assert error["message"] == rest.json()["detail"]
    selfish = graphql("POST", 'mutation { addFriend(id: "1", friendId: "1") { id } }')
    assert codes(selfish) == ["BAD_USER_INPUT"]
    duplicate = graphql(
        "POST",
        f'mutation {{ createPerson(input: {{name: "x", email: "{DEMO["1"]["email"]}"}})'
        " { id } }",
    )
    assert codes(duplicate) == ["BAD_USER_INPUT"]


def test_errors_name_arguments_and_input_fields_as_graphql_does(graphql, demo):
    """The service checks under Python names (min_age, person_id); GraphQL answers in its own."""
    cases = {
        "{ people(minAge: 200, limit: 2) { name } }": {"minAge": ["Must be between 0 and 150."]},
        'mutation { sendMessage(personId: "x", content: "hi") { id } }': {
            "personId": ["Not a valid id."]
        },
    }
    for query, expected in cases.items():
        error = graphql("POST", query).json()["errors"][0]
        assert error["extensions"] == {"code": "BAD_USER_INPUT", "errors": expected}, query
        name, (message,) = next(iter(expected.items()))
        assert error["message"] == f"{name}: {message}"
    rest = demo.request(
        "POST", "/message", json={"person_id": "x", "content": "hi"}, headers=demo.headers
    )
    assert rest.json()["errors"] == {"person_id": ["Not a valid id."]}  # REST keeps JSON's names


def test_messages_are_private_to_their_sender(graphql, demo):
    other_key = new_key(demo.app, "gql-other")
    sent = data(
        graphql("POST", 'mutation { sendMessage(personId: "7", content: "secret") { id } }')
    )
    message_id = sent["sendMessage"]["id"]
    other = {"X-API-Key": other_key}
    hidden = graphql("POST", f'{{ message(id: "{message_id}") {{ content }} }}', headers=other)
    assert codes(hidden) == ["NOT_FOUND"]
    theirs = graphql("POST", '{ person(id: "7") { messages { content } } }', headers=other)
    assert data(theirs) == {"person": {"messages": []}}
    mine = graphql("POST", f'{{ message(id: "{message_id}") {{ content person {{ id }} }} }}')
    assert data(mine) == {"message": {"content": "secret", "person": {"id": "7"}}}


def test_mutation_without_write_scope_is_a_forbidden_field_error(graphql, demo):
    headers = {"X-API-Key": new_key(demo.app, "gql-reader", "read")}
    response = graphql("POST", 'mutation { deletePerson(id: "1") }', headers=headers)
    assert response.status_code == 200
    assert codes(response) == ["FORBIDDEN"]
    assert data(graphql("GET", '{ person(id: "1") { id } }')) == {"person": {"id": "1"}}
    writer = new_key(demo.app, "gql-writer", "write")
    mixed = graphql("POST", '{ me { name } person(id: "1") { id } }', headers={"X-API-Key": writer})
    body = mixed.json()
    assert body["data"] == {"me": {"name": "gql-writer"}, "person": None}
    assert codes(mixed) == ["FORBIDDEN"]


def test_each_mutation_field_answers_with_the_state_it_left(graphql):
    """Mutation fields run one after another; each one's selection reads what it changed, never
    an answer an earlier field of the same document loaded."""
    made = data(
        graphql(
            "POST",
            'mutation { a: createPerson(input: {name: "A"}) { id }'
            ' b: createPerson(input: {name: "B"}) { id } }',
        )
    )
    a, b = made["a"]["id"], made["b"]["id"]
    friends = "friends(limit: 100) { id } messages(limit: 5) { content }"
    answer = data(
        graphql(
            "POST",
            "mutation($a: ID!, $b: ID!) {"
            f" added: addFriend(id: $a, friendId: $b) {{ {friends} }}"
            f" removed: removeFriend(id: $a, friendId: $b) {{ {friends} }}"
            f" again: addFriend(id: $a, friendId: $b) {{ {friends} }}"
            ' first: sendMessage(personId: $a, content: "one") { person { messages { content } } }'
            ' second: sendMessage(personId: $a, content: "two") { person { messages { content } } }'
            "}",
            {"a": a, "b": b},
        )
    )
    assert answer["added"] == {"friends": [{"id": b}], "messages": []}
    assert answer["removed"] == {"friends": [], "messages": []}
    assert answer["again"] == {"friends": [{"id": b}], "messages": []}
    assert answer["first"] == {"person": {"messages": [{"content": "one"}]}}
    assert answer["second"] == {"person": {"messages": [{"content": "two"}, {"content": "one"}]}}
