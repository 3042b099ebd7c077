"""Findings of the outside attack on the finished round, each driven through HTTP."""

from __future__ import annotations

import threading

from people_service import credentials

from .conftest import make_app


def test_password_checks_run_one_at_a_time_so_a_login_flood_cannot_take_every_core(
    tmp_path, monkeypatch
):
    app = make_app(tmp_path, PASSWORD_HASH_METHOD="pbkdf2:sha256:200000")
    running, most, lock = 0, 0, threading.Lock()
    login = credentials.login

    def counted(*args, **kwargs):
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        try:
            return login(*args, **kwargs)
        finally:
            with lock:
                running -= 1

    monkeypatch.setattr(credentials, "login", counted)
    answers = []
    start = threading.Barrier(8)

    def attempt(n):
        client = app.test_client()
        start.wait()
        body = {"username": f"nobody{n}", "password": "not the password at all"}
        answer = client.post("/auth/token", json=body, environ_base={"REMOTE_ADDR": f"10.0.0.{n}"})
        answers.append(answer)

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(answers) == 8
    assert most == 1
    for answer in answers:
        assert answer.status_code in (401, 503)
        assert answer.content_type == "application/problem+json"
        if answer.status_code == 503:
            assert answer.headers["Retry-After"] == "1"


def test_a_login_that_waits_too_long_for_its_turn_is_503_with_retry_after(tmp_path):
    from people_service.rest import tokens

    client = make_app(tmp_path).test_client()
    assert tokens.CHECKS.acquire(timeout=10)  # another login is being checked
    try:
        body = {"username": "ada", "password": "a password long enough to check"}
        answer = client.post("/auth/token", json=body)
    finally:
        tokens.CHECKS.release()
    assert answer.status_code == 503
    assert answer.headers["Retry-After"] == "1"
    assert answer.json["detail"] == "Other logins are being checked; retry in a second."
