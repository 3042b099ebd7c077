"""REST people and friendships: every row of SPEC §4's table, through the Flask test client."""

from __future__ import annotations

import pytest

ADA = {
    "name": "Ada Lovelace",
    "age": 36,
    "email": "ada@example.org",
    "address": {"street": "12 St James's Square", "city": "London", "country": "United Kingdom"},
}


def test_create_person_answers_201_with_location_and_the_whole_person(client, headers):
    response = client.post("/person", json=ADA, headers=headers)
    assert response.status_code == 201
    assert response.json == {"id": "1", **ADA}
    assert response.headers["Location"] == "/person/1"
    assert response.headers["ETag"].startswith('"')


def test_unknown_values_are_null_and_address_always_has_its_three_keys(client, headers):
    response = client.post("/person", json={"name": "Hypatia"}, headers=headers)
    assert response.json == {
        "id": "1",
        "name": "Hypatia",
        "age": None,
        "email": None,
        "address": {"street": None, "city": None, "country": None},
    }


def test_get_person_returns_details_and_etag(client, headers, make_person):
    made = make_person(**{k: v for k, v in ADA.items() if k != "name"})
    response = client.get(f"/person/{made['id']}", headers=headers)
    assert response.status_code == 200
    assert response.json == made
    assert response.headers["ETag"]


def test_if_none_match_gives_304_without_body(client, headers, make_person):
    made = make_person()
    etag = client.get(f"/person/{made['id']}", headers=headers).headers["ETag"]
    response = client.get(f"/person/{made['id']}", headers={**headers, "If-None-Match": etag})
    assert response.status_code == 304
    assert response.data == b""
    assert response.headers["ETag"] == etag
    stale = client.get(f"/person/{made['id']}", headers={**headers, "If-None-Match": '"x"'})
    assert stale.status_code == 200


def test_unknown_person_is_404_problem(client, headers):
    response = client.get("/person/42", headers=headers)
    assert response.status_code == 404
    assert response.content_type == "application/problem+json"
    assert response.json == {
        "type": "about:blank",
        "title": "Not Found",
        "status": 404,
        "detail": "No person with id '42'.",
    }


def test_list_people_is_ordered_by_id_with_total_count(client, headers, make_person):
    for name in ("Carol", "Alice", "Bob"):
        make_person(name)
    response = client.get("/people", headers=headers)
    assert response.status_code == 200
    assert response.json == [
        {"id": "1", "name": "Carol"},
        {"id": "2", "name": "Alice"},
        {"id": "3", "name": "Bob"},
    ]
    assert response.headers["X-Total-Count"] == "3"
    assert "Link" not in response.headers


def test_list_people_pages_with_link_headers(client, headers, make_person):
    for index in range(5):
        make_person(f"Person {index}")
    response = client.get("/people?limit=2&offset=2", headers=headers)
    assert [entry["id"] for entry in response.json] == ["3", "4"]
    assert response.headers["X-Total-Count"] == "5"
    assert response.headers["Link"] == (
        '</people?limit=2&offset=4>; rel="next", </people?limit=2&offset=0>; rel="prev"'
    )
    last = client.get("/people?limit=2&offset=4", headers=headers)
    assert last.json == [{"id": "5", "name": "Person 4"}]
    assert 'rel="next"' not in last.headers["Link"]


def test_list_people_filters_by_name_ignoring_case(client, headers, make_person):
    make_person("Ada Lovelace")
    make_person("Alan Turing")
    make_person("ÉMILIE du Châtelet")
    response = client.get("/people?name=LOVE", headers=headers)
    assert response.json == [{"id": "1", "name": "Ada Lovelace"}]
    assert response.headers["X-Total-Count"] == "1"
    accented = client.get("/people?name=émilie", headers=headers)
    assert accented.json == [{"id": "3", "name": "ÉMILIE du Châtelet"}]
    wildcard = client.get("/people?name=%25", headers=headers)
    assert wildcard.json == []  # % and _ are plain characters, not patterns


@pytest.mark.parametrize(
    "query",
    [
        "limit=0",
        "limit=-1",
        "limit=abc",
        "limit=1001",
        "limit=2147483648",
        "limit=1.5",
        "offset=-1",
        "offset=abc",
        "offset=2147483648",
    ],
)
def test_bad_paging_parameters_are_400(client, headers, make_person, query):
    make_person()
    response = client.get(f"/people?{query}", headers=headers)
    assert response.status_code == 400
    assert response.content_type == "application/problem+json"
    field = query.split("=")[0]
    assert field in response.json["errors"]


def test_paging_accepts_the_bounds(client, headers, make_person):
    make_person()
    assert client.get("/people?limit=1000&offset=2147483647", headers=headers).json == []
    assert client.get("/people?limit=1&offset=0", headers=headers).status_code == 200


def test_post_with_existing_id_updates_like_patch(client, headers, make_person):
    made = make_person(**{k: v for k, v in ADA.items() if k != "name"})
    response = client.post(
        "/person", json={"id": made["id"], "address": {"city": "Paris"}}, headers=headers
    )
    assert response.status_code == 200
    assert response.json == {**made, "address": {**made["address"], "city": "Paris"}}
    assert client.get("/people", headers=headers).headers["X-Total-Count"] == "1"


def test_post_with_unknown_id_is_404(client, headers):
    response = client.post("/person", json={"id": "99", "name": "Nobody"}, headers=headers)
    assert response.status_code == 404


def test_put_replaces_the_person_and_nulls_missing_fields(client, headers, make_person):
    made = make_person(**{k: v for k, v in ADA.items() if k != "name"})
    response = client.put(f"/person/{made['id']}", json={"name": "Ada King"}, headers=headers)
    assert response.status_code == 200
    assert response.json == {
        "id": made["id"],
        "name": "Ada King",
        "age": None,
        "email": None,
        "address": {"street": None, "city": None, "country": None},
    }
    assert client.get(f"/person/{made['id']}", headers=headers).json == response.json


def test_put_accepts_the_same_id_and_refuses_another(client, headers, make_person):
    made = make_person()
    same = client.put(
        f"/person/{made['id']}", json={"id": made["id"], "name": "Ada"}, headers=headers
    )
    assert same.status_code == 200
    other = client.put(f"/person/{made['id']}", json={"id": "7", "name": "Ada"}, headers=headers)
    assert other.status_code == 422
    assert other.json["errors"] == {"id": ["Must match the id in the path."]}
    assert client.get(f"/person/{made['id']}", headers=headers).json["name"] == "Ada"


def test_put_requires_a_name(client, headers, make_person):
    made = make_person()
    response = client.put(f"/person/{made['id']}", json={"age": 3}, headers=headers)
    assert response.status_code == 422
    assert response.json["errors"] == {"name": ["Missing data for required field."]}


def test_patch_changes_only_the_city(client, headers, make_person):
    made = make_person(**{k: v for k, v in ADA.items() if k != "name"})
    response = client.patch(
        f"/person/{made['id']}", json={"address": {"city": "Paris"}}, headers=headers
    )
    assert response.status_code == 200
    assert response.json == {**made, "address": {**made["address"], "city": "Paris"}}


def test_patch_null_clears_a_field_and_the_whole_address(client, headers, make_person):
    made = make_person(**{k: v for k, v in ADA.items() if k != "name"})
    cleared = client.patch(f"/person/{made['id']}", json={"email": None}, headers=headers)
    assert cleared.json["email"] is None
    assert cleared.json["age"] == 36
    no_address = client.patch(f"/person/{made['id']}", json={"address": None}, headers=headers)
    assert no_address.json["address"] == {"street": None, "city": None, "country": None}


def test_patch_accepts_merge_patch_media_type(client, headers, make_person):
    made = make_person()
    response = client.patch(
        f"/person/{made['id']}",
        data='{"age": 40}',
        headers={**headers, "Content-Type": "application/merge-patch+json"},
    )
    assert response.status_code == 200
    assert response.json["age"] == 40


def test_patch_cannot_null_the_name(client, headers, make_person):
    made = make_person()
    response = client.patch(f"/person/{made['id']}", json={"name": None}, headers=headers)
    assert response.status_code == 422
    assert response.json["errors"] == {"name": ["Field may not be null."]}


def test_post_to_a_person_acts_as_patch(client, headers, make_person):
    made = make_person(age=30)
    response = client.post(f"/person/{made['id']}", json={"age": 31}, headers=headers)
    assert response.status_code == 200
    assert response.json == {**made, "age": 31}


def test_delete_person_takes_friendships_and_messages_with_it(client, headers, make_person, store):
    ada, alan = make_person("Ada"), make_person("Alan")
    assert (
        client.put(f"/person/{ada['id']}/friends/{alan['id']}", headers=headers).status_code == 204
    )
    sent = client.post("/message", json={"person_id": ada["id"], "content": "hi"}, headers=headers)
    response = client.delete(f"/person/{ada['id']}", headers=headers)
    assert response.status_code == 204
    assert response.data == b""
    assert client.get(f"/person/{ada['id']}", headers=headers).status_code == 404
    assert client.get(f"/message/{sent.json['id']}", headers=headers).status_code == 404
    assert store.friends_of([int(alan["id"])], 10) == {int(alan["id"]): []}
    assert client.delete(f"/person/{ada['id']}", headers=headers).status_code == 404


def test_friendship_is_mutual_and_idempotent(client, headers, make_person, store):
    ada, alan = make_person("Ada"), make_person("Alan")
    for _ in range(2):
        response = client.put(f"/person/{ada['id']}/friends/{alan['id']}", headers=headers)
        assert response.status_code == 204
    friends = store.friends_of([1, 2], 10)
    assert [f["name"] for f in friends[1]] == ["Alan"]
    assert [f["name"] for f in friends[2]] == ["Ada"]


def test_self_friendship_is_422_and_unknown_ids_404(client, headers, make_person):
    ada = make_person("Ada")
    selfish = client.put(f"/person/{ada['id']}/friends/{ada['id']}", headers=headers)
    assert selfish.status_code == 422
    assert selfish.json["errors"] == {"friend_id": ["A person cannot befriend themselves."]}
    unknown = client.put(f"/person/{ada['id']}/friends/99", headers=headers)
    assert unknown.status_code == 404
    assert unknown.json["detail"] == "No person with id '99'."
    assert client.delete(f"/person/98/friends/{ada['id']}", headers=headers).status_code == 404


def test_unfriending_is_204_also_when_they_were_not_friends(client, headers, make_person, store):
    ada, alan = make_person("Ada"), make_person("Alan")
    assert (
        client.delete(f"/person/{ada['id']}/friends/{alan['id']}", headers=headers).status_code
        == 204
    )
    client.put(f"/person/{ada['id']}/friends/{alan['id']}", headers=headers)
    assert (
        client.delete(f"/person/{alan['id']}/friends/{ada['id']}", headers=headers).status_code
        == 204
    )
    assert store.friends_of([1, 2], 10) == {1: [], 2: []}


def test_duplicate_email_ignoring_case_is_409(client, headers, make_person):
    make_person("Ada", email="ada@example.org")
    response = client.post(
        "/person", json={"name": "Other", "email": "ADA@Example.org"}, headers=headers
    )
    assert response.status_code == 409
    assert response.json["detail"] == "A person with this email already exists."
    assert client.get("/people", headers=headers).headers["X-Total-Count"] == "1"
    second = make_person("Bob", email="bob@example.org")
    clash = client.patch(
        f"/person/{second['id']}", json={"email": "ada@EXAMPLE.org"}, headers=headers
    )
    assert clash.status_code == 409


class TestConditionalWrites:
    def test_stale_if_match_is_412_and_changes_nothing(self, client, headers, make_person):
        made = make_person(age=30)
        path = f"/person/{made['id']}"
        old = client.get(path, headers=headers).headers["ETag"]
        client.patch(path, json={"age": 31}, headers=headers)
        for method, body in (("PATCH", {"age": 1}), ("PUT", {"name": "X"}), ("DELETE", None)):
            response = client.open(
                path, method=method, json=body, headers={**headers, "If-Match": old}
            )
            assert response.status_code == 412
            assert response.content_type == "application/problem+json"
        assert client.get(path, headers=headers).json["age"] == 31

    def test_current_if_match_is_accepted_and_gives_a_new_etag(self, client, headers, make_person):
        made = make_person(age=30)
        path = f"/person/{made['id']}"
        etag = client.get(path, headers=headers).headers["ETag"]
        response = client.patch(path, json={"age": 31}, headers={**headers, "If-Match": etag})
        assert response.status_code == 200
        assert response.headers["ETag"] != etag
        assert client.get(path, headers=headers).headers["ETag"] == response.headers["ETag"]

    def test_if_match_star_matches_any_existing_person(self, client, headers, make_person):
        made = make_person()
        response = client.delete(f"/person/{made['id']}", headers={**headers, "If-Match": "*"})
        assert response.status_code == 204

    def test_update_by_post_honours_if_match(self, client, headers, make_person):
        made = make_person()
        response = client.post(
            "/person",
            json={"id": made["id"], "age": 5},
            headers={**headers, "If-Match": '"stale"'},
        )
        assert response.status_code == 412

    def test_a_create_with_if_match_is_412_and_creates_nothing(self, client, headers):
        before = client.get("/people", headers=headers).headers["X-Total-Count"]
        for tag in ('"x"', "*"):
            response = client.post("/person", json=ADA, headers={**headers, "If-Match": tag})
            assert response.status_code == 412, tag
            assert response.json["detail"].startswith("No person exists yet for If-Match")
        assert client.get("/people", headers=headers).headers["X-Total-Count"] == before
        fresh = client.post("/person", json=ADA, headers={**headers, "If-None-Match": "*"})
        assert fresh.status_code == 201


class TestIdempotency:
    def test_retry_with_same_key_replays_and_creates_once(self, client, headers):
        retry = {**headers, "Idempotency-Key": "create-ada-1"}
        first = client.post("/person", json=ADA, headers=retry)
        second = client.post("/person", json=ADA, headers=retry)
        assert first.status_code == second.status_code == 201
        assert second.json == first.json
        assert second.headers["Idempotent-Replayed"] == "true"
        assert "Idempotent-Replayed" not in first.headers
        assert second.headers["Location"] == first.headers["Location"]
        assert client.get("/people", headers=headers).headers["X-Total-Count"] == "1"

    def test_same_key_with_another_body_is_422(self, client, headers):
        retry = {**headers, "Idempotency-Key": "k"}
        client.post("/person", json={"name": "A"}, headers=retry)
        response = client.post("/person", json={"name": "B"}, headers=retry)
        assert response.status_code == 422
        assert client.get("/people", headers=headers).headers["X-Total-Count"] == "1"

    def test_keys_are_scoped_per_caller(self, client, headers, other_headers):
        client.post("/person", json={"name": "A"}, headers={**headers, "Idempotency-Key": "k"})
        theirs = client.post(
            "/person", json={"name": "A"}, headers={**other_headers, "Idempotency-Key": "k"}
        )
        assert theirs.status_code == 201
        assert "Idempotent-Replayed" not in theirs.headers
        assert client.get("/people", headers=headers).headers["X-Total-Count"] == "2"

    def test_failed_request_is_not_remembered(self, client, headers):
        retry = {**headers, "Idempotency-Key": "fix-me"}
        assert client.post("/person", json={"name": ""}, headers=retry).status_code == 422
        assert client.post("/person", json={"name": "Fixed"}, headers=retry).status_code == 201

    def test_key_longer_than_255_is_400(self, client, headers):
        response = client.post(
            "/person", json={"name": "A"}, headers={**headers, "Idempotency-Key": "k" * 256}
        )
        assert response.status_code == 400
        ok = client.post(
            "/person", json={"name": "A"}, headers={**headers, "Idempotency-Key": "k" * 255}
        )
        assert ok.status_code == 201


class TestMethodOverride:
    def test_post_with_override_acts_as_that_method(self, client, headers, make_person):
        made = make_person(age=1)
        path = f"/person/{made['id']}"
        patched = client.post(
            path, json={"age": 2}, headers={**headers, "X-HTTP-Method-Override": "PATCH"}
        )
        assert patched.status_code == 200 and patched.json["age"] == 2
        put = client.post(
            path, json={"name": "Put"}, headers={**headers, "X-HTTP-Method-Override": "put"}
        )
        assert put.json == {**made, "name": "Put", "age": None}
        deleted = client.post(path, headers={**headers, "X-HTTP-Method-Override": "DELETE"})
        assert deleted.status_code == 204
        assert client.get(path, headers=headers).status_code == 404

    def test_other_override_values_are_400(self, client, headers, make_person):
        made = make_person()
        for value in ("GET", "TRACE", "CONNECT", "nonsense"):
            response = client.post(
                f"/person/{made['id']}",
                json={"age": 9},
                headers={**headers, "X-HTTP-Method-Override": value},
            )
            assert response.status_code == 400
            assert "X-HTTP-Method-Override" in response.json["detail"]
        assert client.get(f"/person/{made['id']}", headers=headers).json["age"] is None

    def test_override_needs_the_write_scope(self, client, read_headers, make_person):
        made = make_person()
        response = client.post(
            f"/person/{made['id']}", headers={**read_headers, "X-HTTP-Method-Override": "DELETE"}
        )
        assert response.status_code == 403
