"""Messages: sending, reading, privacy to the sender, paging and idempotent retries."""

from __future__ import annotations

import re


def send(client, headers, person_id="1", content="Hello", **extra):
    return client.post(
        "/message", json={"person_id": person_id, "content": content}, headers={**headers, **extra}
    )


def test_send_message_answers_201_with_location(client, headers, make_person):
    make_person()
    response = send(client, headers)
    assert response.status_code == 201
    body = response.json
    assert body == {
        "id": "1",
        "person_id": "1",
        "content": "Hello",
        "sender": "ci",
        "created_at": body["created_at"],
    }
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", body["created_at"])
    assert response.headers["Location"] == "/message/1"
    assert client.get("/message/1", headers=headers).json == body


def test_sender_is_the_caller_never_a_body_field(client, headers, make_person):
    make_person()
    response = client.post(
        "/message",
        json={"person_id": "1", "content": "hi", "sender": "someone else"},
        headers=headers,
    )
    assert response.status_code == 422
    assert response.json["errors"] == {"sender": ["Unknown field."]}


def test_message_to_unknown_person_is_404(client, headers):
    response = send(client, headers, person_id="77")
    assert response.status_code == 404
    assert response.json["detail"] == "No person with id '77'."


def test_message_content_limits(client, headers, make_person):
    make_person()
    assert send(client, headers, content="").status_code == 422
    assert send(client, headers, content="x" * 10_001).status_code == 422
    assert send(client, headers, content="x" * 10_000).status_code == 201
    bad_id = send(client, headers, person_id="abc")
    assert bad_id.status_code == 422
    assert bad_id.json["errors"] == {"person_id": ["Not a valid id."]}


def test_messages_are_private_to_their_sender(client, headers, other_headers, make_person):
    make_person()
    mine = send(client, headers, content="mine").json
    theirs = send(client, other_headers, content="theirs").json
    assert client.get(f"/message/{theirs['id']}", headers=headers).status_code == 404
    unknown = client.get("/message/999", headers=headers)
    hidden = client.get(f"/message/{theirs['id']}", headers=headers)
    assert hidden.json["detail"].replace(theirs["id"], "N") == unknown.json["detail"].replace(
        "999", "N"
    )
    listed = client.get("/person/1/messages", headers=headers).json
    assert listed == [mine]


def test_admin_sees_every_message(client, headers, other_headers, admin_headers, make_person):
    make_person()
    send(client, headers, content="a")
    theirs = send(client, other_headers, content="b").json
    assert client.get(f"/message/{theirs['id']}", headers=admin_headers).status_code == 200
    listed = client.get("/person/1/messages", headers=admin_headers).json
    assert [m["content"] for m in listed] == ["b", "a"]


def test_person_messages_are_newest_first_and_paged(client, headers, make_person):
    make_person()
    for index in range(5):
        send(client, headers, content=f"m{index}")
    listed = client.get("/person/1/messages", headers=headers).json
    assert [m["content"] for m in listed] == ["m4", "m3", "m2", "m1", "m0"]
    page = client.get("/person/1/messages?limit=2&offset=1", headers=headers).json
    assert [m["content"] for m in page] == ["m3", "m2"]
    assert client.get("/person/1/messages?limit=0", headers=headers).status_code == 400
    assert client.get("/person/2/messages", headers=headers).status_code == 404


def test_idempotent_retry_sends_once(client, headers, make_person):
    make_person()
    first = send(client, headers, **{"Idempotency-Key": "msg-1"})
    again = send(client, headers, **{"Idempotency-Key": "msg-1"})
    assert first.status_code == again.status_code == 201
    assert again.json == first.json
    assert again.headers["Idempotent-Replayed"] == "true"
    assert len(client.get("/person/1/messages", headers=headers).json) == 1
    changed = send(client, headers, content="other", **{"Idempotency-Key": "msg-1"})
    assert changed.status_code == 422
    assert len(client.get("/person/1/messages", headers=headers).json) == 1


def test_reading_messages_needs_only_read_scope(client, headers, read_headers, make_person):
    make_person()
    send(client, headers)
    assert client.get("/person/1/messages", headers=read_headers).json == []
    assert send(client, read_headers).status_code == 403
