"""Events: every successful change writes one, in the change's own transaction (SPEC 11c)."""

from people_service import transfer


def events(store, after=0):
    return store.events_after(after, 1000)


def kinds(store, after=0):
    return [(event["type"], event["data"]) for event in events(store, after)]


def person(pid, name="Ada Lovelace", **fields):
    address = {"street": None, "city": None, "country": None, **fields.pop("address", {})}
    return {"id": pid, "name": name, "age": None, "email": None, **fields, "address": address}


def test_each_rest_change_writes_its_event(client, headers, store):
    client.post("/person", json={"name": "Ada Lovelace"}, headers=headers)
    client.post("/person", json={"name": "Alan Turing"}, headers=headers)
    client.patch("/person/1", json={"age": 36}, headers=headers)
    client.put("/person/2", json={"name": "Alan"}, headers=headers)
    client.post("/person", json={"id": "2", "age": 41}, headers=headers)
    client.put("/person/1/friends/2", headers=headers)
    client.delete("/person/1/friends/2", headers=headers)
    sent = client.post("/message", json={"person_id": "1", "content": "Hi"}, headers=headers).json
    client.delete("/person/2", headers=headers)
    assert kinds(store) == [
        ("person.created", person("1")),
        ("person.created", person("2", "Alan Turing")),
        ("person.updated", person("1", age=36)),
        ("person.updated", person("2", "Alan")),
        ("person.updated", person("2", "Alan", age=41)),
        ("friendship.created", {"person_id": "1", "friend_id": "2"}),
        ("friendship.deleted", {"person_id": "1", "friend_id": "2"}),
        ("message.created", sent),
        ("person.deleted", {"id": "2"}),
    ]


def test_an_event_has_a_string_id_a_type_a_timestamp_and_data(client, headers, store):
    client.post("/person", json={"name": "Ada Lovelace"}, headers=headers)
    (event,) = events(store)
    assert event["id"] == "1"
    assert event["type"] == "person.created"
    assert event["timestamp"].endswith("Z") and len(event["timestamp"]) == 24
    assert event["data"] == person("1")


def test_no_op_friendship_changes_and_replays_write_none(client, headers, store, make_person):
    make_person()
    make_person("Alan Turing")
    client.put("/person/1/friends/2", headers=headers)
    before = len(events(store))
    assert client.put("/person/2/friends/1", headers=headers).status_code == 204
    assert client.delete("/person/1/friends/1", headers=headers).status_code == 204
    client.delete("/person/1/friends/2", headers=headers)
    assert client.delete("/person/1/friends/2", headers=headers).status_code == 204
    assert [event["type"] for event in events(store)[before:]] == ["friendship.deleted"]
    retry = {**headers, "Idempotency-Key": "k1"}
    body = {"person_id": "1", "content": "once"}
    assert client.post("/message", json=body, headers=retry).status_code == 201
    replay = client.post("/message", json=body, headers=retry)
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert [event["type"] for event in events(store)].count("message.created") == 1


def test_a_failed_change_writes_none(client, headers, store, make_person):
    make_person(email="ada@example.org")
    before = len(events(store))
    assert client.post("/person", json={"name": "B", "email": "ADA@example.org"}, headers=headers)
    assert client.patch("/person/1", json={"age": -1}, headers=headers).status_code == 422
    assert client.delete("/person/9", headers=headers).status_code == 404
    stale = {**headers, "If-Match": '"stale"'}
    assert client.patch("/person/1", json={"age": 3}, headers=stale).status_code == 412
    assert client.post("/message", json={"person_id": "9", "content": "x"}, headers=headers)
    assert len(events(store)) == before


def test_a_put_that_changes_nothing_still_writes_person_updated(client, headers, store):
    client.post("/person", json={"name": "Ada Lovelace"}, headers=headers)
    client.put("/person/1", json={"name": "Ada Lovelace"}, headers=headers)
    assert kinds(store)[-1] == ("person.updated", person("1"))


def test_graphql_writes_the_same_events(gql, store):
    created = gql('mutation { createPerson(input: {name: "Ada Lovelace"}) { id } }')
    assert created.json == {"data": {"createPerson": {"id": "1"}}}
    gql('mutation { createPerson(input: {name: "Alan Turing"}) { id } }')
    gql('mutation { updatePerson(id: "1", input: {age: 36}) { id } }')
    gql('mutation { addFriend(id: "2", friendId: "1") { id } }')
    gql('mutation { removeFriend(id: "2", friendId: "1") { id } }')
    gql('mutation { sendMessage(personId: "1", content: "Hi") { id } }')
    gql('mutation { deletePerson(id: "2") }')
    assert [kind for kind, _ in kinds(store)] == [
        "person.created",
        "person.created",
        "person.updated",
        "friendship.created",
        "friendship.deleted",
        "message.created",
        "person.deleted",
    ]
    assert kinds(store)[3][1] == {"person_id": "2", "friend_id": "1"}


def test_a_bulk_import_writes_none(store):
    transfer.load_demo(store)
    assert events(store) == []


def test_message_events_are_listed_for_their_sender_only(client, headers, other_headers, store):
    client.post("/person", json={"name": "Ada Lovelace"}, headers=headers)
    client.post("/message", json={"person_id": "1", "content": "a"}, headers=headers)
    client.post("/message", json={"person_id": "1", "content": "b"}, headers=other_headers)
    keys = {key["name"]: f"api_key:{key['id']}" for key in store.list_keys()}

    def seen(sender_id):
        found = store.events_after(0, 100, sender_id=sender_id)
        return [event["data"].get("content", event["type"]) for event in found]

    assert seen(None) == ["person.created", "a", "b"]
    assert seen(keys["ci"]) == ["person.created", "a"]
    assert seen(keys["other"]) == ["person.created", "b"]
    assert store.events_after(1, 100, types=("message.created",), sender_id=None)[0]["id"] == "2"
