"""Rate-limit counters in a SQLite file shared by processes: the storage, the app, the server."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import flask
import pytest
from flask_limiter import Limiter
from limits import parse
from limits.errors import StorageError
from limits.storage import MemoryStorage, storage_from_string
from limits.strategies import STRATEGIES

from people_service import ConfigError
from people_service.store import counters
from people_service.store.counters import SQLiteCounters, default_uri
from people_service.web import services

from .conftest import ACTIVE, GENEROUS, ServerProcess, cli, close_app, database, make_app, new_key

OPENED: list[SQLiteCounters] = []


def storage_at(path) -> SQLiteCounters:
    storage = storage_from_string(f"sqlite://{path}")
    OPENED.append(storage)
    return storage


@pytest.fixture(autouse=True)
def close_storages():
    yield
    while OPENED:
        OPENED.pop().close()


def rows(path, table="counters") -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


# -- the storage (the same on either backend: tested in the SQLite pass only) -------------


def test_limits_and_flask_limiter_build_the_storage_from_its_uri(tmp_path, sqlite_only):
    storage = storage_at(tmp_path / "counters.db")
    assert type(storage) is SQLiteCounters
    assert storage.path == str(tmp_path / "counters.db")
    assert not SQLiteCounters.__abstractmethods__  # fails loudly if limits adds a method
    for name in ("sliding-window-counter", "fixed-window"):
        assert isinstance(STRATEGIES[name](storage), STRATEGIES[name]), name
    limiter = Limiter(lambda: "k", storage_uri=f"sqlite://{tmp_path}/f.db", strategy="fixed-window")
    limiter.init_app(flask.Flask(__name__))
    assert type(limiter.storage) is SQLiteCounters
    OPENED.append(limiter.storage)


def test_a_relative_path_is_relative_to_the_working_directory(tmp_path, monkeypatch, sqlite_only):
    monkeypatch.chdir(tmp_path)
    assert storage_from_string("sqlite://sub.db").path == str(tmp_path / "sub.db")


@pytest.mark.parametrize("uri", ["sqlite://", "sqlite://:memory:", "sqlite://a\0b"])
def test_a_uri_without_a_usable_file_is_refused(uri, sqlite_only):
    with pytest.raises(Exception, match="needs the path of a file"):
        storage_from_string(uri)


def _hammer(uri, strategy_name, limit, key, threads, hits, start, results):
    """One process: `threads` threads hitting one limit `hits` times each, all at once."""
    try:
        strategy = STRATEGIES[strategy_name](storage_from_string(uri))
        item = parse(limit)
        together = threading.Barrier(threads)

        def hit(_):
            together.wait(30)
            return sum(strategy.hit(item, "test", key) for _ in range(hits))

        start.wait(60)  # every process is ready: they begin together
        with ThreadPoolExecutor(threads) as pool:
            results.put(sum(pool.map(hit, range(threads))))
    except Exception as exc:  # the parent reports it, instead of waiting for a result
        results.put(repr(exc))


@pytest.mark.parametrize("strategy", ["sliding-window-counter", "fixed-window"])
def test_processes_and_threads_in_parallel_get_exactly_the_limit(tmp_path, strategy, sqlite_only):
    uri = f"sqlite://{tmp_path}/counters.db"
    storage_at(tmp_path / "counters.db").close()  # the file exists before the race
    context = multiprocessing.get_context("spawn")  # fork copies threads and locks: not here
    processes = 3
    start, results = context.Barrier(processes), context.Queue()
    workers = [
        context.Process(
            target=_hammer, args=(uri, strategy, "50/day", "one", 4, 20, start, results)
        )
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    accepted = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(30)
        assert worker.exitcode == 0
    assert all(isinstance(n, int) for n in accepted), accepted
    assert sum(accepted) == 50  # of 240 hits in 3 processes x 4 threads
    if strategy != "fixed-window":  # fixed-window charges refused hits, by design of limits
        window = STRATEGIES[strategy](storage_at(tmp_path / "counters.db"))
        assert window.get_window_stats(parse("50/day"), "test", "one")[1] == 0


def wait_until(moment: float) -> None:
    assert moment - time.time() < 5  # a bounded wait
    time.sleep(max(0.0, moment - time.time()))


def test_sliding_window_refusals_cost_nothing_and_the_window_expires(tmp_path, sqlite_only):
    storage = storage_at(tmp_path / "c.db")
    strategy = STRATEGIES["sliding-window-counter"](storage)
    item = parse("3/second")
    wait_until(int(time.time()) + 1.02)  # at the start of a window: no edge inside the test
    assert [strategy.hit(item, "k") for _ in range(5)] == [True, True, True, False, False]
    assert not strategy.hit(item, "k", cost=2)
    previous, _, current, _ = storage.get_sliding_window(item.key_for("k"), 1)
    assert (previous, current) == (0, 3)  # the refused hits were not added
    wait_until(int(time.time()) + 2.02)  # two windows on: nothing counts any more
    assert [strategy.hit(item, "k") for _ in range(4)] == [True, True, True, False]


def test_a_cost_above_the_limit_is_refused_and_leaves_room(tmp_path, sqlite_only):
    strategy = STRATEGIES["sliding-window-counter"](storage_at(tmp_path / "c.db"))
    item = parse("5/day")
    assert not strategy.hit(item, "k", cost=6)
    assert strategy.hit(item, "k", cost=4)
    assert not strategy.hit(item, "k", cost=2)
    assert strategy.get_window_stats(item, "k")[1] == 1
    assert strategy.hit(item, "k")


def test_fixed_window_counts_and_starts_afresh_after_its_expiry(tmp_path, sqlite_only):
    storage = storage_at(tmp_path / "c.db")
    assert [storage.incr("k", 1) for _ in range(3)] == [1, 2, 3]
    assert storage.incr("k", 1, amount=5) == 8
    assert storage.get("k") == 8
    expires = storage.get_expiry("k")
    assert time.time() < expires <= time.time() + 1
    wait_until(expires + 0.02)
    assert storage.get("k") == 0
    assert storage.incr("k", 1) == 1


def test_expired_counters_are_purged_so_the_file_stays_bounded(tmp_path, sqlite_only):
    path = tmp_path / "c.db"
    storage = storage_at(path)
    item = parse("100/second")
    strategy = STRATEGIES["sliding-window-counter"](storage)
    for n in range(200):
        strategy.hit(item, f"key{n}")
    assert rows(path) > 100
    wait_until(time.time() + 2.1)  # a window counter lives two windows
    for _ in range(20):
        storage.incr("live", 60)
    assert rows(path) == 1


def test_clear_and_reset_remove_counters(tmp_path, sqlite_only):
    storage = storage_at(tmp_path / "c.db")
    strategy = STRATEGIES["sliding-window-counter"](storage)
    item = parse("2/day")
    assert [strategy.hit(item, "a") for _ in range(3)] == [True, True, False]
    strategy.clear(item, "a")
    assert strategy.hit(item, "a")
    storage.incr("b", 60)
    assert storage.reset() == 2
    assert storage.get("b") == 0 and strategy.get_window_stats(item, "a")[1] == 2
    storage.incr("b", 60)
    storage.clear("b")
    assert storage.get("b") == 0


def test_check_says_whether_the_file_answers(tmp_path, sqlite_only):
    directory = tmp_path / "gone"
    directory.mkdir()
    storage = storage_at(directory / "c.db")
    assert storage.check()
    for name in ("c.db", "c.db-wal", "c.db-shm"):
        (directory / name).unlink(missing_ok=True)
    for name in ("c.db.lock",):
        (directory / name).unlink(missing_ok=True)
    directory.rmdir()
    assert not storage.check()


def test_a_forked_child_counts_through_its_own_connection_and_lock(tmp_path, sqlite_only):
    storage = storage_at(tmp_path / "c.db")
    assert storage.incr("k", 60) == 1  # the parent's connection and lock file are open
    pid = os.fork()
    if pid == 0:  # the child counts on the same file through what it opens itself
        counted = storage.incr("k", 60) == 2 and storage.get("k") == 2
        storage.close()  # its own: the parent's stay open
        os._exit(0 if counted else 1)
    assert os.waitpid(pid, 0)[1] == 0
    assert storage.incr("k", 60) == 3  # the parent's own connection still works


def test_a_thread_per_request_server_does_not_keep_a_connection_per_thread(tmp_path, sqlite_only):
    storage = storage_at(tmp_path / "c.db")
    descriptors = len(os.listdir("/proc/self/fd"))
    for _ in range(50):  # each thread ends after one use, as under werkzeug's threaded server
        thread = threading.Thread(target=storage.incr, args=("k", 60))
        thread.start()
        thread.join()
    assert storage.get("k") == 50
    assert len(os.listdir("/proc/self/fd")) <= descriptors + 4  # a thread's went with it
    storage.close()


def test_default_file_sits_beside_a_sqlite_database(tmp_path, sqlite_only):
    assert default_uri(str(tmp_path / "people.db")) == f"sqlite://{tmp_path}/people.db.ratelimits"


def test_default_file_for_postgresql_is_private_and_names_no_password():
    one = default_uri("postgresql://ada:s3cret@db.internal:5432/people?password=p4ss")
    same = default_uri("postgresql://bob@db.internal:5432/people")
    other = default_uri("postgresql://db.internal:5432/other")
    assert one == same != other
    path = Path(one.removeprefix("sqlite://"))
    assert "s3cret" not in one and "p4ss" not in one
    assert path.parent.stat().st_mode & 0o777 == 0o700


def test_a_directory_planted_by_someone_else_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(counters.tempfile, "gettempdir", lambda: str(tmp_path))
    planted = tmp_path / f"people-service-{counters.os.getuid()}"
    planted.mkdir(mode=0o777)
    planted.chmod(0o777)
    with pytest.raises(OSError, match="not a private directory"):
        default_uri("postgresql://db.internal/people")


# -- the choice of storage in the app, made once at start-up ---------------------------------


def storage_of(app):
    return services(app).limiter.storage


@pytest.fixture
def limited(tmp_path):
    app = make_app(tmp_path, RATE_LIMIT="5/day")
    yield app
    close_counters(app)
    close_app(app)


def close_counters(app):
    """Close the app's counters file; under PostgreSQL the default one lies in the shared
    temporary directory, so it goes too."""
    storage = storage_of(app)
    if isinstance(storage, SQLiteCounters):
        storage.close()
        if ACTIVE["backend"] != "sqlite" and storage.path.startswith(tempfile.gettempdir()):
            for suffix in ("", "-wal", "-shm", ".lock"):
                Path(storage.path + suffix).unlink(missing_ok=True)


def test_by_default_every_process_shares_the_file_beside_the_database(limited):
    """Also one process alone: a WSGI server may fork several (gunicorn -w 2 app:app)."""
    assert limited.config["RATE_LIMIT_STORAGE"] == ""
    storage = storage_of(limited)
    assert type(storage) is SQLiteCounters
    assert "sqlite://" + storage.path == default_uri(limited.config["DATABASE"])


def test_two_apps_on_one_database_share_their_counters(tmp_path):
    apps = [make_app(tmp_path, RATE_LIMIT="5/day") for _ in range(2)]  # two "processes"
    try:
        headers = {"X-API-Key": new_key(apps[0], "a")}
        statuses = [
            app.test_client().get("/people", headers=headers).status_code
            for _ in range(3)
            for app in apps
        ]
        assert statuses == [200] * 5 + [429]
    finally:
        for app in apps:
            close_counters(app)
            close_app(app)


def test_an_explicit_memory_storage_counts_in_this_process(tmp_path):
    app = make_app(tmp_path, RATE_LIMIT_STORAGE="memory://")
    try:
        assert type(storage_of(app)) is MemoryStorage
    finally:
        close_app(app)


def test_an_explicit_sqlite_file_wins(tmp_path):
    app = make_app(tmp_path, RATE_LIMIT_STORAGE=f"sqlite://{tmp_path}/mine.db")
    try:
        assert storage_of(app).path == str(tmp_path / "mine.db")
    finally:
        close_counters(app)
        close_app(app)


def test_a_bare_sqlite_uri_means_the_default_file(tmp_path):
    app = make_app(tmp_path, RATE_LIMIT_STORAGE="sqlite://")
    try:
        assert "sqlite://" + storage_of(app).path == default_uri(app.config["DATABASE"])
    finally:
        close_counters(app)
        close_app(app)


@pytest.mark.parametrize(
    "storage, message",
    [
        ("mongodb://127.0.0.1", "must be empty, memory://, sqlite://"),
        ("sqlite://:memory:", "needs the path of a file"),
        ("sqlite:///{tmp}/a-file/counters.db", "cannot use RATE_LIMIT_STORAGE"),
    ],
)
def test_an_unusable_storage_stops_start_up(tmp_path, storage, message):
    (tmp_path / "a-file").write_text("")  # even root cannot create a file inside a file
    with pytest.raises(ConfigError, match=message):
        make_app(tmp_path, RATE_LIMIT_STORAGE=storage.format(tmp=tmp_path))


def test_an_unusable_default_file_stops_start_up(tmp_path, sqlite_only):
    """Counting per process instead would let several processes allow that many times more."""
    Path(database(tmp_path) + ".ratelimits").mkdir()  # not a file SQLite can open
    with pytest.raises(ConfigError, match="cannot use RATE_LIMIT_STORAGE"):
        make_app(tmp_path)


# -- end to end: two servers, one counters file ---------------------------------------------


def test_two_servers_sharing_a_counters_file_allow_exactly_the_limit(tmp_path, sqlite_only):
    db = database(tmp_path)
    made = cli("keys", "create", "--name", "shared", "--rate-limit", "12/day", db=db)
    key = made.stdout.split()[-1]
    env = {
        "PEOPLE_SERVICE_RATE_LIMIT_STORAGE": f"sqlite://{tmp_path}/counters.db",
        "PEOPLE_SERVICE_ANONYMOUS_RATE_LIMIT": GENEROUS,
    }
    servers = [ServerProcess(db, env=env), ServerProcess(db, env=env)]
    starting = [threading.Thread(target=server.start) for server in servers]
    for thread in starting:
        thread.start()
    for thread in starting:
        thread.join(60)
    try:
        assert all(server.url for server in servers)
        with ThreadPoolExecutor(8) as pool:
            answers = list(
                pool.map(
                    lambda n: servers[n % 2].request(
                        "GET", "/people?limit=1", headers={"X-API-Key": key}
                    ),
                    range(40),
                )
            )
    finally:
        for server in servers:
            server.stop()
    statuses = [answer.status_code for answer in answers]
    assert statuses.count(200) == 12 and statuses.count(429) == 28
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert refused.headers["Content-Type"] == "application/problem+json"
    assert refused.json()["status"] == 429 and int(refused.headers["Retry-After"]) >= 1


def test_an_unusable_file_raises_instead_of_counting(tmp_path, sqlite_only):
    """An error reaches the limiter as one (limits' StorageError when asked), never a count:
    whether to refuse or count elsewhere is the app's decision, not the storage's."""
    directory = tmp_path / "gone"
    directory.mkdir()
    storage = storage_from_string(f"sqlite://{directory}/c.db", wrap_exceptions=True)
    OPENED.append(storage)
    strategy = STRATEGIES["sliding-window-counter"](storage)
    assert strategy.hit(parse("5/day"), "k")
    storage.close()  # the file is noticed when opened: removed, it is not made again
    for name in ("c.db", "c.db-wal", "c.db-shm", "c.db.lock"):
        (directory / name).unlink(missing_ok=True)
    with pytest.raises(StorageError):
        strategy.hit(parse("5/day"), "k")
    directory.rmdir()  # nothing was made in it again
    with pytest.raises(StorageError):
        strategy.hit(parse("5/day"), "k")
    with pytest.raises(StorageError):
        storage.incr("k", 60)
    assert not storage.check()
