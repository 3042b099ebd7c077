"""API keys: 401 and 403, revocation, hashed storage, and /me."""

from __future__ import annotations

import pytest

from people_service import credentials
from people_service.web import services

DATA_ENDPOINTS = [
    ("GET", "/people"),
    ("GET", "/person/1"),
    ("POST", "/person"),
    ("PUT", "/person/1"),
    ("PATCH", "/person/1"),
    ("POST", "/person/1"),
    ("DELETE", "/person/1"),
    ("PUT", "/person/1/friends/2"),
    ("DELETE", "/person/1/friends/2"),
    ("POST", "/message"),
    ("GET", "/message/1"),
    ("GET", "/person/1/messages"),
    ("GET", "/me"),
]


@pytest.mark.parametrize(("method", "path"), DATA_ENDPOINTS)
def test_data_endpoints_need_credentials(client, method, path):
    response = client.open(path, method=method, json={"name": "x"})
    assert response.status_code == 401
    assert response.content_type == "application/problem+json"
    assert 'ApiKey realm="people-service"' in response.headers["WWW-Authenticate"]
    assert "Bearer" in response.headers["WWW-Authenticate"]


@pytest.mark.parametrize("bad", ["", "ps_wrong", "not-a-key", "ps_" + "x" * 500])
def test_bad_keys_are_401(client, bad):
    response = client.get("/people", headers={"X-API-Key": bad})
    assert response.status_code == 401
    assert response.json["detail"] == "The API key is unknown or revoked."


def test_one_changed_character_is_refused(client, key):
    changed = key[:-1] + ("A" if key[-1] != "A" else "B")
    assert client.get("/people", headers={"X-API-Key": changed}).status_code == 401
    assert client.get("/people", headers={"X-API-Key": key}).status_code == 200


@pytest.mark.parametrize(("method", "path"), [m for m in DATA_ENDPOINTS if m[0] != "GET"])
def test_read_only_key_cannot_write(client, read_headers, method, path):
    response = client.open(path, method=method, json={"name": "x"}, headers=read_headers)
    assert response.status_code == 403
    assert response.json["detail"] == "This needs the scope 'write'."


def test_read_only_key_can_read(client, read_headers):
    assert client.get("/people", headers=read_headers).status_code == 200


def test_revoked_key_is_refused_at_once(app, client, store):
    key = credentials.create_key(store, "temp")
    assert client.get("/people", headers={"X-API-Key": key}).status_code == 200
    assert store.revoke_key("temp")
    assert client.get("/people", headers={"X-API-Key": key}).status_code == 401


def test_keys_are_random_prefixed_and_stored_only_as_hashes(store):
    first, second = credentials.create_key(store, "a"), credentials.create_key(store, "b")
    assert first != second
    assert first.startswith("ps_") and len(first) >= 3 + 43  # 32 random bytes, base64url
    rows = store._execute("SELECT * FROM api_keys").fetchall()
    text = repr(rows)
    assert first not in text and second not in text
    assert rows[0]["key_hash"] == credentials.hash_key(first)


def test_me_describes_the_caller_with_an_exact_count(client, headers):
    for _ in range(3):
        client.get("/people", headers=headers)
    response = client.get("/me", headers=headers)
    body = response.json
    assert body == {
        "kind": "api_key",
        "name": "ci",
        "scopes": ["read", "write"],
        "rate_limit": "100000/minute",
        "request_count": 4,
        "last_used": body["last_used"],
    }
    assert body["last_used"].endswith("Z")


def test_me_shows_a_keys_own_limit(app, client):
    key = credentials.create_key(services(app).store, "slow", "read", "5/minute")
    assert client.get("/me", headers={"X-API-Key": key}).json["rate_limit"] == "5/minute"


def test_usage_is_flushed_to_the_store(app, client, headers, store):
    for _ in range(5):
        client.get("/people", headers=headers)
    services(app).usage.flush()
    row = next(k for k in store.list_keys() if k["name"] == "ci")
    assert row["request_count"] == 5
    assert row["last_used"] is not None
    assert client.get("/me", headers=headers).json["request_count"] == 6


def test_open_endpoints_need_no_credentials(client):
    assert client.get("/health").status_code == 200
    assert client.get("/openapi.json").status_code == 200


def test_keys_can_be_rotated_and_deleted(app, client, store):
    key = credentials.create_key(store, "turning", "read", "7/minute")
    assert client.get("/people", headers={"X-API-Key": key}).status_code == 200
    new = credentials.rotate_key(store, "turning")
    assert new != key and new.startswith("ps_")
    assert client.get("/people", headers={"X-API-Key": key}).status_code == 401
    me = client.get("/me", headers={"X-API-Key": new}).json
    assert (me["name"], me["scopes"], me["rate_limit"]) == ("turning", ["read"], "7/minute")
    assert me["request_count"] == 2  # its usage stayed with it
    assert store.delete_key("turning")
    assert client.get("/people", headers={"X-API-Key": new}).status_code == 401
    assert "turning" not in {row["name"] for row in store.list_keys()}
