"""The people-service command: data, keys, import/export, --db anywhere, one-line errors."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

from people_service.store import SCHEMA_VERSION
from people_service.web import services

from .conftest import ROOT, cli, close_app, database, free_port, make_app


def test_init_db_is_idempotent_and_versions_the_schema(tmp_path, sqlite_only):
    db = tmp_path / "people.db"
    for _ in range(2):
        result = cli("init-db", db=db)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"database {db} is ready"
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT count(*) FROM people").fetchone()[0] == 0


def test_init_db_demo_loads_the_demo_file(tmp_path):
    result = cli("init-db", "--demo", db=database(tmp_path))
    assert result.returncode == 0, result.stderr
    demo = json.loads((ROOT / "data" / "demo.json").read_text())
    people = len(demo["people"])
    pairs = {tuple(sorted((p["id"], f))) for p in demo["people"] for f in p["friends"]}
    assert people >= 50
    assert f"loaded {people} people, {len(pairs)} friendships" in result.stdout


def test_demo_file_is_varied_and_consistent():
    demo = json.loads((ROOT / "data" / "demo.json").read_text())["people"]
    ids = {person["id"] for person in demo}
    assert len(demo) >= 50
    assert len({p["address"]["country"] for p in demo if p["address"]["country"]}) >= 15
    for person in demo:
        for friend in person["friends"]:
            assert friend in ids and friend != person["id"]
            assert person["id"] in next(p for p in demo if p["id"] == friend)["friends"]


def test_keys_create_prints_the_key_alone_on_the_last_line(tmp_path):
    db = database(tmp_path)
    result = cli("keys", "create", "--name", "ci", "--scopes", "read", db=db)
    assert result.returncode == 0, result.stderr
    key = result.stdout.strip().splitlines()[-1]
    assert key.startswith("ps_") and " " not in key
    app = make_app(tmp_path)
    try:
        client = app.test_client()
        assert client.get("/people", headers={"X-API-Key": key}).status_code == 200
        assert (
            client.post("/person", json={"name": "x"}, headers={"X-API-Key": key}).status_code
            == 403
        )
    finally:
        close_app(app)


def test_keys_list_shows_usage_and_revoke_stops_a_key(tmp_path):
    db = database(tmp_path)
    key = cli("keys", "create", "--name", "ci", "--rate-limit", "100/minute", db=db).stdout.split()[
        -1
    ]
    app = make_app(tmp_path)
    try:
        client = app.test_client()
        for _ in range(3):
            assert client.get("/people", headers={"X-API-Key": key}).status_code == 200
        services(app).usage.flush()
        listing = cli("keys", "list", db=db)
        assert listing.returncode == 0
        header, row = listing.stdout.splitlines()[:2]
        assert header.split() == [
            "name",
            "prefix",
            "scopes",
            "rate",
            "limit",
            "created",
            "last",
            "used",
            "requests",
            "revoked",
        ]
        assert row.split()[:4] == ["ci", key[:8] + "…", "read,write", "100/minute"]
        assert row.split()[-2:] == ["3", "-"]
        revoked = cli("keys", "revoke", "ci", db=db)
        assert revoked.returncode == 0
        assert client.get("/people", headers={"X-API-Key": key}).status_code == 401
        assert cli("keys", "list", db=db).stdout.splitlines()[1].split()[-1] != "-"
    finally:
        close_app(app)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("keys", "revoke", "nobody"), "No active API key named 'nobody'."),
        (("keys", "create", "--name", "bad name"), "'--name': 1 to 64 letters"),
        (("keys", "create", "--name", "k", "--scopes", "root"), "'--scopes': Must be some of"),
        (
            ("keys", "create", "--name", "k", "--rate-limit", "lots"),
            "'--rate-limit': Must look like",
        ),
        (("import", "/nonexistent/file.json"), "cannot read /nonexistent/file.json"),
    ],
)
def test_cli_errors_are_one_line_without_traceback(tmp_path, args, message):
    result = cli(*args, db=database(tmp_path))
    assert result.returncode != 0
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_duplicate_key_name_is_refused(tmp_path):
    db = database(tmp_path)
    assert cli("keys", "create", "--name", "ci", db=db).returncode == 0
    again = cli("keys", "create", "--name", "ci", db=db)
    assert again.returncode == 1
    assert again.stderr.strip() == "people-service: An API key named 'ci' already exists."


def test_export_then_import_round_trips(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    source, target = database(tmp_path / "a"), database(tmp_path / "b")
    cli("init-db", "--demo", db=source)
    exported = cli("export", db=source)
    assert exported.returncode == 0
    document = json.loads(exported.stdout)
    people = len(document["people"])
    assert exported.stderr.strip().startswith(f"exported {people} people, ")
    dump = tmp_path / "dump.json"
    assert cli("export", str(dump), db=source).returncode == 0
    assert json.loads(dump.read_text()) == document
    imported = cli("import", str(dump), db=target)
    assert imported.returncode == 0, imported.stderr
    assert imported.stderr.strip() == exported.stderr.strip().replace("exported", "imported")
    assert json.loads(cli("export", db=target).stdout) == document


def test_import_is_all_or_nothing(tmp_path):
    db = database(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "people": [
                    {"id": "1", "name": "Good", "friends": ["2"]},
                    {"id": "2", "name": "", "friends": ["1"]},
                ]
            }
        )
    )
    result = cli("import", str(bad), db=db)
    assert result.returncode == 1
    assert "people.1.name" in result.stderr
    assert json.loads(cli("export", db=db).stdout) == {"people": []}
    clash = tmp_path / "clash.json"
    cli("init-db", "--demo", db=db)
    clash.write_text(json.dumps({"people": [{"id": "1", "name": "Again", "friends": []}]}))
    result = cli("import", str(clash), db=db)
    assert result.returncode == 1
    assert "A person with id '1' already exists." in result.stderr


def test_an_import_file_that_repeats_an_id_is_refused_naming_the_id(tmp_path):
    """It used to say 'Two people share an email', about a file without any email."""
    db = database(tmp_path)
    twice = tmp_path / "twice.json"
    people = [{"id": "7", "name": "First", "friends": []}, {"id": "7", "name": "Second"}]
    twice.write_text(json.dumps({"people": people}))
    result = cli("import", str(twice), db=db)
    assert result.returncode == 1
    assert result.stderr.strip() == "people-service: Two people in the file have the id '7'."
    assert json.loads(cli("export", db=db).stdout) == {"people": []}


def test_bad_configuration_stops_serve_with_status_2(tmp_path):
    cases = [
        ({"PEOPLE_SERVICE_RATE_LIMIT": "plenty"}, "RATE_LIMIT must look like"),
        ({"PEOPLE_SERVICE_EXPLORER": "altair"}, "EXPLORER must be one of"),
        ({"PEOPLE_SERVICE_GRAPHQL_MAX_DEPTH": "deep"}, "GRAPHQL_MAX_DEPTH must be an integer"),
        ({"PEOPLE_SERVICE_SECRET_KEY": "short"}, "SECRET_KEY must be at least 32 bytes"),
        ({"PEOPLE_SERVICE_DATABASE": "/proc/people.db"}, "cannot open database"),
    ]
    for env, message in cases:
        result = cli("serve", "--port", str(free_port()), env=env)
        assert result.returncode == 2, (env, result.stderr)
        assert message in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "Traceback" not in result.stderr


def test_a_limit_that_allows_nothing_is_refused_not_served_as_429_forever(tmp_path):
    """'0/minute' parses, but a key or a server with it answers 429 to every request, with a
    Retry-After that invites a retry that can never succeed."""
    db = database(tmp_path)
    for env in (
        {"PEOPLE_SERVICE_RATE_LIMIT": "0/minute"},
        {"PEOPLE_SERVICE_AUTH_RATE_LIMIT": "5/second;0/hour"},
    ):
        # a server that starts serves until the timeout: then the test fails, it cannot hang
        result = cli("serve", "--port", str(free_port()), db=db, env=env, timeout=20)
        assert result.returncode == 2, (env, result.stderr)
        assert "must allow at least one request in each window" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    refused = cli("keys", "create", "--name", "none", "--rate-limit", "0/minute", db=db)
    assert refused.returncode == 2  # a bad option, as for serve
    assert refused.stderr.strip() == (
        "people-service: Invalid value for '--rate-limit': "
        "Must allow at least one request in each window. (see --help)"
    )
    assert "none" not in cli("keys", "list", db=db).stdout


def test_unwritable_database_path_stops_with_status_2(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")  # even root cannot create a file inside a file
    result = cli("serve", "--port", str(free_port()), db=blocker / "people.db")
    assert result.returncode == 2
    assert "cannot open database" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_on_a_database_in_a_missing_directory_stops_with_status_2(tmp_path, sqlite_only):
    """A mistyped --db used to create every directory on its way, then serve an empty database."""
    mistyped = tmp_path / "no" / "such" / "people.db"
    for workers in ("1", "2"):
        result = cli("serve", "--port", str(free_port()), "--workers", workers, db=mistyped)
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip() == (
            f"people-service: configuration error: no directory {mistyped.parent} for the "
            f"database {mistyped}; create it first"
        )
    assert not (tmp_path / "no").exists()


def test_secret_key_is_generated_once_with_mode_0600(tmp_path, sqlite_only):
    app = make_app(tmp_path, SECRET_KEY=None)
    secret = services(app).token_secret
    assert len(secret) >= 32 and app.config["SECRET_KEY"] is None  # Flask's is not reused
    close_app(app)
    path = tmp_path / "secret.key"
    assert path.stat().st_mode & 0o777 == 0o600
    again = make_app(tmp_path, SECRET_KEY=None)
    assert services(again).token_secret == secret
    close_app(again)


def test_keys_create_takes_the_name_positionally_or_as_an_option(tmp_path):
    db = tmp_path / "people.db"
    laptop = cli("keys", "create", "laptop", db=db)
    assert laptop.returncode == 0, laptop.stderr
    assert laptop.stdout.splitlines()[-1].startswith("ps_")
    desk = cli("keys", "create", "--name", "desk", "--scopes", "read", db=db)
    assert desk.returncode == 0, desk.stderr
    names = [line.split()[0] for line in cli("keys", "list", db=db).stdout.splitlines()[1:]]
    assert names == ["laptop", "desk"]
    both = cli("keys", "create", "one", "--name", "two", db=db)
    assert both.returncode == 2 and "give one" in both.stderr
    neither = cli("keys", "create", db=db)
    assert neither.returncode == 2 and "Missing argument 'NAME'" in neither.stderr
    bad = cli("keys", "create", "bad/name", db=db)
    assert bad.returncode == 2 and "1 to 64 letters" in bad.stderr


def test_db_is_accepted_before_the_subcommand_and_after_it(tmp_path):
    first, second = tmp_path / "first.db", tmp_path / "second.db"
    assert cli("--db", str(first), "init-db").returncode == 0
    assert first.exists()
    assert cli("--db", str(first), "keys", "create", "early").returncode == 0
    listed = cli("--db", str(first), "keys", "list").stdout
    assert "early" in listed
    # after the subcommand, it wins over the one before
    assert cli("--db", str(first), "init-db", "--db", str(second)).returncode == 0
    assert second.exists()
    assert "early" not in cli("--db", str(first), "keys", "list", "--db", str(second)).stdout


def test_a_database_in_a_missing_directory_gets_a_command_that_works(tmp_path):
    missing = tmp_path / "missing dir" / "people.db"
    result = cli("keys", "list", db=missing)
    assert result.returncode == 1
    message = result.stderr.strip()
    assert message.startswith(f"people-service: no database at {missing}")
    suggested = message.split(": ", 2)[-1]
    assert suggested.startswith("mkdir -p ")
    # what it suggests, run by a shell, makes a database the command then finds
    command = suggested.replace("people-service ", f"{sys.executable} -m people_service.cli ")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(command, shell=True, check=True, cwd=ROOT, env=env, capture_output=True)
    assert cli("keys", "list", db=missing).returncode == 0


def test_the_default_database_is_said_to_be_relative_to_the_working_directory(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PEOPLE_SERVICE_DATABASE", None)
    result = subprocess.run(
        [sys.executable, "-m", "people_service.cli", "keys", "list"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert f"no database at data/people.db in {tmp_path}" in result.stderr
    assert "relative to the working directory" in result.stderr
    assert "PEOPLE_SERVICE_DATABASE" in result.stderr


def test_version_starts_without_flask_or_ariadne():
    code = (
        "import sys\n"
        "from people_service.cli import main\n"
        "status = main(['--version'])\n"
        "print(sorted(m for m in ('flask', 'ariadne', 'graphql') if m in sys.modules))\n"
        "sys.exit(status)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    version_line, imported = result.stdout.splitlines()
    assert version_line.startswith("people-service, version ")
    assert imported == "[]"
