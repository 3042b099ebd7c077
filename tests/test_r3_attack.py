"""Findings of the outside attack on the finished round, each driven through HTTP."""

from __future__ import annotations

import threading
import time

from .conftest import make_app


def test_password_checks_run_at_most_a_core_each_so_a_login_flood_cannot_take_every_thread(
    tmp_path, monkeypatch
):
    from people_service import passwords

    monkeypatch.setattr(passwords, "CHECKS", 2)
    monkeypatch.setattr(passwords, "_checks", {})  # made again, with 2, at the first check
    app = make_app(tmp_path, PASSWORD_HASH_METHOD="pbkdf2:sha256:200000")
    running, most, lock = 0, 0, threading.Lock()
    check = passwords.check_password_hash

    def counted(*args, **kwargs):
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        try:
            return check(*args, **kwargs)
        finally:
            with lock:
                running -= 1

    monkeypatch.setattr(passwords, "check_password_hash", counted)
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
    assert most == 2
    for answer in answers:  # each waited its turn (up to CHECK_WAIT seconds)
        assert answer.status_code == 401
        assert answer.content_type == "application/problem+json"


def test_a_login_that_waits_too_long_for_its_turn_is_503_with_retry_after(tmp_path, monkeypatch):
    import os

    from people_service import passwords

    taken = threading.BoundedSemaphore(1)
    monkeypatch.setattr(passwords, "_checks", {os.getpid(): taken})
    monkeypatch.setattr(passwords, "CHECK_WAIT", 0.2)
    client = make_app(tmp_path).test_client()
    assert taken.acquire(timeout=10)  # every check of this process is busy
    try:
        body = {"username": "ada", "password": "a password long enough to check"}
        answer = client.post("/auth/token", json=body)
    finally:
        taken.release()
    assert answer.status_code == 503
    assert int(answer.headers["Retry-After"]) >= 1  # its own, never lowered
    assert answer.json["detail"] == "Other logins are being checked; retry in a second."


def test_the_checks_of_a_forked_process_are_its_own(tmp_path):
    """A semaphore made before a fork (held by a thread that does not exist in the child)
    is never used after it: the child makes its own at its first check."""
    import os

    from people_service import passwords

    stored = passwords.dummy_hash("pbkdf2:sha256:1000")
    held = threading.Event()
    release = threading.Event()

    def hold():
        with passwords._checks[os.getpid()]:
            held.set()
            release.wait(30)

    passwords.check_password(stored, "x")  # this process's semaphore exists
    holders = [threading.Thread(target=hold) for _ in range(passwords.CHECKS)]
    for holder in holders:
        holder.start()
    try:
        assert held.wait(10)
        time.sleep(0.1)
        pid = os.fork()
        if pid == 0:  # every check was taken in the parent: a shared semaphore would wait
            try:
                os._exit(0 if passwords.check_password(stored, "x") is False else 1)
            except BaseException:  # Busy: never back into pytest in this child
                os._exit(2)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        release.set()
        for holder in holders:
            holder.join(10)


def test_one_name_selected_many_times_is_refused_before_validation(tmp_path):
    from .conftest import new_key

    app = make_app(tmp_path)
    key = {"X-API-Key": new_key(app, "reader", "read", "100000/day")}
    query = "{ " + " ".join(f'person(id: "{n}") {{ id }}' for n in range(200)) + " }"
    answer = app.test_client().post("/graphql", json={"query": query}, headers=key)
    [error] = answer.json["errors"]
    assert error["extensions"]["code"] == "QUERY_TOO_COMPLEX"
    assert "'person' more than 10 times" in error["message"]


def test_a_document_that_fails_validation_pays_its_estimate(tmp_path):
    """Fields that cannot be merged, spread from 100 fragments: validating them is quadratic,
    so the refusal costs the caller what the document would have cost, not 1 (the repeated
    response name is now refused before graphql-core's pairwise check, and still paid for)."""
    from .conftest import new_key

    app = make_app(tmp_path)
    key = {"X-API-Key": new_key(app, "reader", "read", "100000/day")}
    fragments = " ".join(
        f'fragment F{n} on Query {{ person(id: "{n}") {{ id }} }}' for n in range(100)
    )
    spreads = " ".join(f"...F{n}" for n in range(100))
    answer = app.test_client().post(
        "/graphql", json={"query": f"{{ {spreads} }} {fragments}"}, headers=key
    )
    assert answer.json["errors"][0]["extensions"]["code"] == "QUERY_TOO_COMPLEX"
    assert "'person' more than 10 times" in answer.json["errors"][0]["message"]
    assert 100000 - int(answer.headers["X-RateLimit-Remaining"]) >= 100


def test_queries_refused_by_the_limit_say_their_cost_and_are_not_charged(tmp_path):
    """A caller kept just short of a query's cost is refused each time, charged nothing (SPEC
    11a: no separate window of refused queries), and told what the query costs."""
    from .conftest import new_key

    app = make_app(tmp_path, ANONYMOUS_RATE_LIMIT="3/minute")
    key = {"X-API-Key": new_key(app, "reader", "read", "20/minute")}
    client = app.test_client()
    spend = client.post("/graphql", json={"query": "{ people(limit: 15) { id } }"}, headers=key)
    assert spend.status_code == 200 and spend.headers["X-RateLimit-Remaining"] == "5"
    query = {"query": "{ people(limit: 10) { id } }"}  # costs 10: within 20, over the 5 left
    answers = [client.post("/graphql", json=query, headers=key) for _ in range(4)]
    assert [answer.status_code for answer in answers] == [429] * 4
    assert all(answer.headers["X-RateLimit-Remaining"] == "5" for answer in answers)
    messages = [answer.json["errors"][0]["message"] for answer in answers]
    assert all(message.startswith("This query costs 10") for message in messages)


def test_a_counters_file_another_user_made_stops_start_up(tmp_path, sqlite_only):
    """Whoever owns the counters file can read every key's counters or set them to refuse
    everyone; a planted one is refused, naming it (as secret.key is)."""
    import os

    import pytest

    from people_service import ConfigError

    if os.geteuid() != 0:
        pytest.skip("making a file another user owns needs root")
    planted = tmp_path / "people.db.ratelimits"
    planted.write_bytes(b"")
    os.chown(planted, 65534, 65534)  # nobody's
    with pytest.raises(ConfigError, match="people.db.ratelimits belongs to another user"):
        make_app(tmp_path, RATE_LIMIT_STORAGE="")
