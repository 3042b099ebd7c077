"""Passwords: werkzeug's hashes, the work factor as a setting, and hashes made before it."""

from __future__ import annotations

import hashlib

import pytest

from people_service import config, credentials, passwords
from people_service.web import services

from .conftest import CHEAP_HASH, cli, close_app, database, make_app

PASSWORD = "correct horse battery staple"


def old_hash(password: str, salt: str = "Zr3_-q9xAb1cDe2F", iterations: int = 600_000) -> str:
    """A hash as the service wrote them before it used werkzeug (salt from token_urlsafe)."""
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), iterations)
    return f"pbkdf2:sha256:{iterations}${salt}${digest.hex()}"


def test_hashes_written_before_werkzeug_still_verify():
    stored = old_hash(PASSWORD, iterations=1000)
    assert passwords.check_password(stored, PASSWORD)
    assert not passwords.check_password(stored, PASSWORD + "x")


def test_the_default_work_factor_is_owasps_pbkdf2_floor():
    assert config.DEFAULTS["PASSWORD_HASH_METHOD"] == "pbkdf2:sha256:600000"
    assert config.load(environ={})["PASSWORD_HASH_METHOD"] == "pbkdf2:sha256:600000"
    assert passwords.DEFAULT_METHOD == config.DEFAULTS["PASSWORD_HASH_METHOD"]


def test_the_setting_chooses_the_method_of_new_hashes(app, store):
    assert app.config["PASSWORD_HASH_METHOD"] == CHEAP_HASH
    credentials.create_user(store, "ada", PASSWORD, method=app.config["PASSWORD_HASH_METHOD"])
    stored = store.user_by_name("ada")["password_hash"]
    assert stored.startswith(CHEAP_HASH + "$")
    assert passwords.check_password(stored, PASSWORD)
    credentials.change_password(store, "ada", PASSWORD + " two", method="scrypt:1024:8:1")
    stored = store.user_by_name("ada")["password_hash"]
    assert stored.startswith("scrypt:1024:8:1$")
    assert credentials.login(store, "ada", PASSWORD + " two") is not None
    assert credentials.login(store, "ada", PASSWORD) is None


def test_a_login_checks_the_stored_hash_whatever_method_made_it(client, store):
    store.insert_user(
        {
            "username": "old",
            "password_hash": old_hash(PASSWORD, iterations=2000),
            "scopes": "read",
            "rate_limit": None,
        }
    )
    answer = client.post("/auth/token", json={"username": "old", "password": PASSWORD})
    assert answer.status_code == 200, answer.json
    wrong = client.post("/auth/token", json={"username": "old", "password": PASSWORD + "!"})
    assert wrong.status_code == 401


@pytest.mark.parametrize(
    "stored",
    [
        "",
        "plain",
        "pbkdf2:sha256:1000$salt",
        "pbkdf2:sha256:many$salt$00",
        "pbkdf2:nohash:1000$salt$00",
        "md5$salt$00",
        "scrypt:1:2$salt$00",
    ],
)
def test_a_hash_that_cannot_be_read_matches_nothing(stored):
    assert passwords.check_password(stored, PASSWORD) is False


def test_a_password_that_cannot_be_encoded_matches_nothing():
    assert passwords.check_password(old_hash(PASSWORD, iterations=1000), "\ud800") is False


@pytest.mark.parametrize(
    "method", ["md5", "pbkdf2:sha256:0", "pbkdf2:sha256:fast", "scrypt:1:2", "plain", ""]
)
def test_a_method_werkzeug_cannot_use_stops_start_up(tmp_path, method):
    with pytest.raises(config.ConfigError, match="PASSWORD_HASH_METHOD"):
        make_app(tmp_path, PASSWORD_HASH_METHOD=method)


def stored_hash(tmp_path, username: str) -> str:
    app = make_app(tmp_path)
    try:
        return services(app).store.user_by_name(username)["password_hash"]
    finally:
        close_app(app)


def test_the_cli_hashes_with_the_setting(tmp_path):
    def run(*args, method, password):
        env = {"PEOPLE_SERVICE_PASSWORD_HASH_METHOD": method}
        done = cli(*args, "--password-stdin", db=database(tmp_path), input=password, env=env)
        assert done.returncode == 0, done.stderr

    run("users", "create", "ada", method="pbkdf2:sha256:1234", password=PASSWORD)
    assert stored_hash(tmp_path, "ada").startswith("pbkdf2:sha256:1234$")
    run("users", "passwd", "ada", method="pbkdf2:sha256:4321", password=PASSWORD + " again")
    assert stored_hash(tmp_path, "ada").startswith("pbkdf2:sha256:4321$")
