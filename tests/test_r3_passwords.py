"""Passwords: werkzeug's hashes, the work factor as a setting, and hashes made before it."""

from __future__ import annotations

import hashlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from people_service import config, credentials, passwords
from people_service.web import services

from .conftest import CHEAP_HASH, ServerProcess, cli, close_app, database, make_app

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


# -- logins served concurrently (SPEC §11b), through a real server -----------------------------

USERS = ("ada", "alan", "grace", "edsger")


def login_server(tmp_path, method: str) -> ServerProcess:
    """`serve` (one process, 8 threads) with four users hashed by `method`, default limits."""
    db = database(tmp_path)
    for username in USERS:
        made = cli(
            *("users", "create", username, "--password-stdin"),
            db=db,
            input=PASSWORD + "\n",
            env={"PEOPLE_SERVICE_PASSWORD_HASH_METHOD": method},
        )
        assert made.returncode == 0, made.stderr
    return ServerProcess(db).start()


def log_in(url: str, username: str, password: str, address: str) -> tuple[int, float]:
    """A login from `address` (any 127.x.y.z is this machine): its status and seconds."""
    with requests.Session() as session:
        adapter = requests.adapters.HTTPAdapter()
        adapter.init_poolmanager(1, 1, source_address=(address, 0))
        session.mount("http://", adapter)
        started = time.monotonic()
        body = {"username": username, "password": password}
        answer = session.post(url + "/auth/token", json=body, timeout=30)
        return answer.status_code, time.monotonic() - started


def test_four_logins_at_the_same_moment_all_succeed(tmp_path):
    # at the default work factor each check costs about 0.2 s of CPU: more than one at a time
    server = login_server(tmp_path, passwords.DEFAULT_METHOD)

    def attempt(n, start):
        start.wait()
        return log_in(server.url, USERS[n], PASSWORD, f"127.0.0.{10 + n}")[0]

    for _ in range(2):
        start = [threading.Barrier(len(USERS))] * len(USERS)
        with ThreadPoolExecutor(len(USERS)) as pool:
            assert list(pool.map(attempt, range(len(USERS)), start)) == [200] * len(USERS)
    server.stop()


def test_real_users_log_in_while_four_addresses_guess_passwords_at_their_limit(tmp_path):
    """Four addresses send wrong passwords for the real users' names as fast as the server
    answers them, 401 or 429; meanwhile the real users, each from an
    address of their own, log in three times each: at least 90 % of them within 5 s."""
    server = login_server(tmp_path, "pbkdf2:sha256:100000")  # 40 ms a check, idle
    done = threading.Event()
    guesses: list[int] = []

    def guess(n):
        address = f"127.0.1.{n + 1}"
        for attempt in range(1000):  # bounded; ends with the real users
            if done.is_set():
                return
            status = log_in(server.url, USERS[attempt % 4], f"wrong {attempt} {PASSWORD}", address)
            guesses.append(status[0])

    with ThreadPoolExecutor(4) as attackers:
        for n in range(4):
            attackers.submit(guess, n)
        try:
            time.sleep(1)  # the guessing is under way
            real = []
            for _ in range(3):
                with ThreadPoolExecutor(len(USERS)) as users:
                    real += users.map(
                        lambda n: log_in(server.url, USERS[n], PASSWORD, f"127.0.2.{n + 1}"),
                        range(len(USERS)),
                    )
                time.sleep(0.5)
        finally:
            done.set()
    served = [seconds for status, seconds in real if status == 200 and seconds < 5]
    assert len(served) >= 0.9 * len(real), real
    assert 401 in guesses and 200 not in guesses
    assert set(guesses) <= {401, 429, 503}
    server.stop()
