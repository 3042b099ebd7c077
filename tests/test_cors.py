"""CORS: off by default; with CORS_ORIGINS, preflights answered openly and headers exposed."""

from __future__ import annotations

import pytest

from people_service import ConfigError
from people_service.config import cors_origins

from .conftest import close_app, make_app, new_key

SITE = "https://app.example.org"
PREFLIGHT = {
    "Origin": SITE,
    "Access-Control-Request-Method": "PATCH",
    "Access-Control-Request-Headers": "x-api-key, content-type, if-match, idempotency-key",
}


@pytest.fixture
def cors_app(tmp_path):
    app = make_app(tmp_path, CORS_ORIGINS=f"{SITE}, http://localhost:3000")
    yield app
    close_app(app)


def listed(value: str | None) -> set[str]:
    return {part.strip().lower() for part in (value or "").split(",") if part.strip()}


def test_cors_is_off_by_default(client, headers):
    response = client.get("/person/1", headers={**headers, "Origin": SITE})
    assert "Access-Control-Allow-Origin" not in response.headers
    preflight = client.options("/person/1", headers=PREFLIGHT)
    assert not [name for name in preflight.headers.keys() if name.startswith("Access-Control")]


def test_preflight_is_answered_without_credentials(cors_app):
    response = cors_app.test_client().options("/person/1", headers=PREFLIGHT)
    assert response.status_code == 204
    assert response.headers["Access-Control-Allow-Origin"] == SITE
    assert "patch" in listed(response.headers["Access-Control-Allow-Methods"])
    assert listed(response.headers["Access-Control-Allow-Headers"]) == {
        "x-api-key",
        "content-type",
        "if-match",
        "idempotency-key",
    }
    assert response.headers["Access-Control-Max-Age"] == "600"
    assert "Access-Control-Allow-Credentials" not in response.headers
    assert "Origin" in response.headers["Vary"]


def test_preflight_allows_authorization_for_tokens(cors_app):
    response = cors_app.test_client().options(
        "/graphql",
        headers={
            "Origin": SITE,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )
    assert response.status_code == 204
    assert listed(response.headers["Access-Control-Allow-Headers"]) == {
        "authorization",
        "content-type",
    }


def test_preflights_are_not_charged_to_the_rate_limit(tmp_path):
    app = make_app(tmp_path, CORS_ORIGINS=SITE, ANONYMOUS_RATE_LIMIT="1/minute")
    try:
        client = app.test_client()
        for _ in range(5):
            assert client.options("/person/1", headers=PREFLIGHT).status_code == 204
        # the address's one request is still there
        assert client.get("/").status_code == 200
        assert client.get("/").status_code == 429
    finally:
        close_app(app)


def test_cross_origin_request_exposes_the_api_headers(cors_app):
    client = cors_app.test_client()
    key = new_key(cors_app, "web")
    response = client.get("/people?limit=2", headers={"X-API-Key": key, "Origin": SITE})
    assert response.status_code == 200
    assert response.headers["Access-Control-Allow-Origin"] == SITE
    exposed = listed(response.headers["Access-Control-Expose-Headers"])
    for name in (
        "etag",
        "location",
        "x-total-count",
        "link",
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        "retry-after",
    ):
        assert name in exposed, name
    assert "Access-Control-Allow-Credentials" not in response.headers
    assert "Origin" in response.headers["Vary"]


def test_cross_origin_errors_are_readable_too(cors_app):
    response = cors_app.test_client().get("/person/1", headers={"Origin": SITE})
    assert response.status_code == 401
    assert response.headers["Access-Control-Allow-Origin"] == SITE
    assert "www-authenticate" in listed(response.headers["Access-Control-Expose-Headers"])


def test_other_origins_get_no_cors_headers(cors_app):
    client = cors_app.test_client()
    for origin in ("https://evil.example", "https://app.example.org.evil.example", "null"):
        preflight = client.options("/person/1", headers={**PREFLIGHT, "Origin": origin})
        assert "Access-Control-Allow-Origin" not in preflight.headers, origin
        response = client.get("/health", headers={"Origin": origin})
        assert "Access-Control-Allow-Origin" not in response.headers, origin
    # same-origin and non-browser requests carry none either
    assert "Access-Control-Allow-Origin" not in client.get("/health").headers


def test_origins_match_ignoring_case(cors_app):
    response = cors_app.test_client().get("/health", headers={"Origin": "HTTPS://App.Example.org"})
    assert response.headers["Access-Control-Allow-Origin"] == "HTTPS://App.Example.org"


def test_any_origin_with_star(tmp_path):
    app = make_app(tmp_path, CORS_ORIGINS="*")
    try:
        client = app.test_client()
        response = client.get("/health", headers={"Origin": "https://anyone.example"})
        assert response.headers["Access-Control-Allow-Origin"] == "*"
        preflight = client.options("/person/1", headers={**PREFLIGHT, "Origin": "http://x.test"})
        assert preflight.status_code == 204
        assert preflight.headers["Access-Control-Allow-Origin"] == "*"
    finally:
        close_app(app)


def test_preflight_of_an_unknown_path_is_404(cors_app):
    response = cors_app.test_client().options("/nowhere", headers=PREFLIGHT)
    assert response.status_code == 404
    assert response.content_type == "application/problem+json"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", []),
        ("*", ["*"]),
        (
            " https://App.Example.org/ ,http://localhost:3000",
            ["https://app.example.org", "http://localhost:3000"],
        ),
        ("http://[::1]:8080", ["http://[::1]:8080"]),
    ],
)
def test_cors_origins_setting(value, expected):
    assert cors_origins(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "app.example.org",
        "https://app.example.org/path",
        "https://app.example.org, *",
        "https://*.example.org",
        "https://app.example.org$",
        "null",
        "ftp://files.example.org",
    ],
)
def test_bad_cors_origins_stop_start_up(tmp_path, value):
    with pytest.raises(ConfigError, match="CORS_ORIGINS"):
        make_app(tmp_path, CORS_ORIGINS=value)
