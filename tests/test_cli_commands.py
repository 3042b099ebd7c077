"""The click commands in-process (CliRunner): validation, keys and users, reading never creates."""

from __future__ import annotations

import re
import sys

import click
import pytest
from click.testing import CliRunner

from people_service import credentials
from people_service.cli import cli as command_group
from people_service.cli import main
from people_service.cli_base import table
from people_service.store import open_store
from people_service.store.base import Store as CredentialStore

from .conftest import ACTIVE, ROOT, SECRET, ServerProcess, cli, database

STRONG = "tea kettle violin orbit 42"


def run(*args, input=None, db=None):
    argv = [*args, "--db", str(db)] if db is not None else list(args)
    return CliRunner().invoke(
        command_group, argv, input=input, env={"PEOPLE_SERVICE_SECRET_KEY": SECRET}
    )


def one_line_error(capsys, *argv) -> tuple[int, str]:
    """main()'s exit status and its one stderr line (it never prints a traceback)."""
    status = main(list(argv))
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return status, err


def test_version_is_printed():
    result = run("--version")
    assert result.exit_code == 0 and result.output.startswith("people-service, version ")


@pytest.mark.parametrize("group", [(), ("keys",), ("users",)])
def test_a_group_alone_prints_its_plain_help(capsys, group):
    """It used to be wrapped as an error: 'people-service: Usage: ... (see --help)'."""
    assert main([*group, "--help"]) == 0
    help_text = capsys.readouterr().out
    status = main(list(group))
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")  # click's convention for a group without a command
    assert err == help_text
    assert err.startswith(f"Usage: {' '.join(('people-service', *group))} [OPTIONS] COMMAND")


def walk(group: click.Group, path=()):
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from walk(command, (*path, name))
        else:
            yield (*path, name), command


def test_every_option_and_argument_is_explained():
    for path, command in walk(command_group):
        text = command.get_help(click.Context(command, info_name=" ".join(path)))
        assert command.help, path
        for param in command.params:
            if isinstance(param, click.Option):
                assert param.help, (path, param.name)
            else:  # a positional: the command's help names it
                assert param.name.upper() in text, (path, param.name)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("serve", "--port", "99999"), "'--port': 99999 is not in the range 1<=x<=65535"),
        (("serve", "--port", "0"), "'--port': 0 is not in the range"),
        (("serve", "--threads", "0"), "'--threads': 0 is not in the range x>=1"),
        (("serve", "--workers", "0"), "'--workers': 0 is not in the range x>=1"),
        (("serve", "--port", "http"), "'--port': 'http' is not a valid integer"),
    ],
)
def test_serve_options_are_checked_before_anything_starts(capsys, args, message):
    status, err = one_line_error(capsys, *args)
    assert status == 2 and message in err


READING = [
    ("keys", "list"),
    ("users", "list"),
    ("webhooks", "list"),
    ("export",),
    ("migrate", "--to", "postgresql://x"),
]


@pytest.mark.parametrize("args", READING)
def test_commands_that_read_refuse_a_missing_database_and_create_nothing(
    tmp_path, capsys, sqlite_only, args
):
    for missing in (tmp_path / "x.db", tmp_path / "no" / "such" / "dir" / "x.db"):
        status, err = one_line_error(capsys, *args, "--db", str(missing))
        assert status == 1 and err.startswith(f"people-service: no database at {missing}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", READING)
def test_commands_that_read_never_create_the_default_database(
    tmp_path, capsys, monkeypatch, sqlite_only, args
):
    """`webhooks list` in the wrong directory used to make data/people.db and list nothing."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PEOPLE_SERVICE_DATABASE", raising=False)
    status, err = one_line_error(capsys, *args)
    assert status == 1 and err.startswith("people-service: no database at data/people.db in ")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        ("init-db",),
        ("keys", "create", "--name", "x"),
        ("users", "create", "gus", "--password-stdin"),
    ],
)
def test_writing_commands_create_a_file_but_never_its_directory(
    tmp_path, capsys, sqlite_only, args
):
    mistyped = tmp_path / "no" / "such" / "dir" / "x.db"
    status, err = one_line_error(capsys, *args, "--db", str(mistyped))
    assert status == 2
    assert err == (
        f"people-service: configuration error: no directory {mistyped.parent} for the "
        f"database {mistyped}; create it first"
    )
    assert not (tmp_path / "no").exists()


def test_the_default_database_gets_its_directory(tmp_path, monkeypatch, sqlite_only):
    """A fresh clone or install has no data/: `people-service serve` must still just work."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PEOPLE_SERVICE_DATABASE", raising=False)
    result = run("init-db")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "database data/people.db is ready"
    assert (tmp_path / "data" / "people.db").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("keys", "create", "--name", "ro", "--rate-limit", "0/minute"),
            "'--rate-limit': Must allow",
        ),
        (("keys", "create", "--name", "ro", "--rate-limit", "lots"), "'--rate-limit': Must look"),
        (("keys", "create", "--name", "ro", "--scopes", "read,wrte"), "'--scopes': Must be some"),
        (("keys", "create", "--name", "bad/name"), "'--name': 1 to 64 letters"),
        (("users", "create", "gus", "--rate-limit", "0/hour"), "'--rate-limit': Must allow"),
        (("users", "create", "gus", "--scopes", "root"), "'--scopes': Must be some of"),
        (("users", "create", "bad name"), "'USERNAME': 1 to 64 letters"),
        (("migrate", "--to", "mysql://x"), "'--to': must be a postgresql:// URL"),
    ],
)
def test_bad_options_exit_2_before_anything_is_opened_or_asked(tmp_path, args, message):
    """The README's rule: 2 for a bad option or setting (they used to be 1, as a failure)."""
    db = tmp_path / "people.db"
    result = run(*args, db=db, input=STRONG + "\n")
    assert result.exit_code == 2, result.output
    assert f"Invalid value for {message}" in result.output
    assert "Password" not in result.output  # refused before the prompt
    assert not db.exists()  # and before the database was touched


def test_files_that_cannot_be_used_are_named_without_exception_names(tmp_path, capsys, sqlite_only):
    status, err = one_line_error(capsys, "keys", "list", "--db", str(tmp_path))
    assert status == 1
    assert (
        err == f"people-service: cannot open the database {tmp_path}: unable to open database file"
    )
    db = database(tmp_path)
    assert run("init-db", db=db).exit_code == 0
    out = tmp_path / "no-such-dir" / "out.json"
    status, err = one_line_error(capsys, "export", str(out), "--db", db)
    assert status == 1
    assert err == f"people-service: cannot write {out}: No such file or directory"


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (
            PermissionError(13, "Permission denied", "/srv/x.db"),
            "cannot access /srv/x.db: Permission denied",
        ),
        (OSError(28, "No space left on device"), "No space left on device"),
        (RuntimeError("it broke\nsecond line"), "unexpected error: it broke"),
    ],
)
def test_any_other_error_is_one_line_without_its_class_name(
    tmp_path, capsys, monkeypatch, error, message
):
    def fail(store):
        raise error

    monkeypatch.setattr(CredentialStore, "list_keys", fail)  # both backends' method
    db = database(tmp_path)
    assert run("init-db", db=db).exit_code == 0
    status, err = one_line_error(capsys, "keys", "list", "--db", db)
    assert (status, err) == (1, f"people-service: {message}")
    assert type(error).__name__ not in err


def test_init_db_demo_is_idempotent(tmp_path):
    db = database(tmp_path)
    first, second = run("init-db", "--demo", db=db), run("init-db", "--demo", db=db)
    assert first.exit_code == 0 and "loaded 62 people" in first.output
    assert second.exit_code == 0 and "holds 62 people already" in second.output


def test_passwords_must_be_long_and_uncommon(tmp_path, capsys):
    db = database(tmp_path)
    for password, message in [
        ("short", "Length must be between 15 and 1024"),
        ("passwordpassword", "Too common"),
        ("aaaaaaaaaaaaaaaaaaaa", "Too common"),
        ("abcdefghijklmnopq", "Too common"),
        ("grace-hopper-rules-the-world", "Must not contain the username"),
    ]:
        result = run("users", "create", "hopper", "--password-stdin", input=password, db=db)
        assert result.exit_code != 0 and message in str(result.output + str(result.exception))
    assert run("users", "create", "hopper", "--password-stdin", input=STRONG, db=db).exit_code == 0


def test_the_prompt_asks_again_for_a_password_that_breaks_a_rule(tmp_path, monkeypatch):
    """It used to ask for the confirmation of a too-short password, then give up."""
    from people_service import cli_credentials as commands

    monkeypatch.setattr(commands, "stdin_is_a_terminal", lambda: True)
    db = database(tmp_path)
    typed = ["short", "passwordpassword", "grace-hopper-rules-the-world", STRONG, "typo", STRONG]
    result = run("users", "create", "hopper", input="\n".join([*typed, STRONG, ""]), db=db)
    assert result.exit_code == 0, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert errors == [
        "Error: Length must be between 15 and 1024.",
        "Error: Too common or too easy to guess; choose another.",
        "Error: Must not contain the username or the service's name.",
        "Error: The two entered values do not match.",
    ]
    assert result.output.count("Repeat for confirmation") == 2  # only for allowed passwords
    assert "created user 'hopper'" in result.output
    store = open_store(str(db))
    try:
        assert credentials.login(store, "hopper", STRONG) is not None
    finally:
        store.close()
    other = "violin orbit tea kettle 7"
    changed = run(
        "users", "passwd", "hopper", input=f"hopper-again-2024\n{other}\n{other}\n", db=db
    )
    assert changed.exit_code == 0, changed.output
    assert "Error: Must not contain the username" in changed.output


def test_only_usernames_of_4_characters_or_more_are_refused_in_a_password(tmp_path):
    """Deliberate (passwords.names_its_context): 'bob', 'ann' or 'al' are parts of too many
    words ('bobsleigh', 'planner', 'always') to refuse every password that holds them."""
    db = database(tmp_path)
    for username, password, allowed in [
        ("bob", "bobbobbob-is-my-name", True),
        ("al", "always-walk-all-the-hall", True),
        ("gwen", "gwen-plays-the-cello-well", False),
        ("gwen", "GWEN plays the cello well", False),  # compared without case and spaces
    ]:
        result = run("users", "create", username, "--password-stdin", input=password, db=db)
        assert (result.exit_code == 0) is allowed, (username, password, result.output)
        if not allowed:
            assert "Must not contain the username" in str(result.exception or result.output)


def test_the_readme_keys_list_sample_is_what_keys_list_prints(tmp_path, capsys):
    """The sample showed 4 characters of each prefix where the command shows 5."""
    readme = (ROOT / "README.md").read_text()
    sample = readme.split("$ people-service keys list\n", 1)[1].split("\n$ ", 1)[0].splitlines()
    cells = [re.split(r" {2,}", line) for line in sample]
    table(tuple(cells[0]), [tuple(row) for row in cells[1:]])  # as keys list lays them out
    assert capsys.readouterr().out.splitlines() == sample
    db = database(tmp_path)
    key = run("keys", "create", "--name", "demo", db=db).output.split()[-1]
    real = [re.split(r" {2,}", line) for line in run("keys", "list", db=db).output.splitlines()]
    assert real[0] == cells[0]
    assert real[1][1] == key[:8] + "…"
    for row in cells[1:]:
        assert re.fullmatch(r"ps_[A-Za-z0-9_-]{5}…", row[1]), row
        assert len(row) == len(real[1])


def test_a_password_needs_a_terminal_or_stdin(tmp_path, capsys, monkeypatch):
    db = str(database(tmp_path))
    with open("/dev/null") as empty:
        monkeypatch.setattr(sys, "stdin", empty)
        status, err = one_line_error(capsys, "users", "create", "bob", "--db", db)
        assert status == 1 and "pipe the password with --password-stdin" in err
        status, err = one_line_error(
            capsys, "users", "create", "bob", "--password-stdin", "--db", db
        )
        assert status == 1 and "no password on stdin" in err


def test_a_missing_optional_dependency_names_its_install_command(
    tmp_path, capsys, monkeypatch, sqlite_only
):
    db = database(tmp_path)
    assert run("init-db", db=db).exit_code == 0
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "people_service.store.postgres", raising=False)
    status, err = one_line_error(capsys, "migrate", "--to", "postgresql://db/x", "--db", str(db))
    assert status == 1 and "pip install -e '.[postgres]'" in err


def test_keys_rotate_keeps_name_limits_and_usage(tmp_path):
    db = database(tmp_path)
    old = run("keys", "create", "--name", "ci", "--rate-limit", "5/minute", db=db).output.split()[
        -1
    ]
    rotated = run("keys", "rotate", "ci", db=db)
    assert rotated.exit_code == 0
    new = rotated.output.strip().splitlines()[-1]
    assert new.startswith("ps_") and new != old
    store = open_store(str(db))
    try:
        assert credentials.caller_from_key(store, old) is None
        caller = credentials.caller_from_key(store, new)
        assert (caller.name, caller.rate_limit) == ("ci", "5/minute")
    finally:
        store.close()
    assert run("keys", "rotate", "nobody", db=db).exit_code == 1
    assert run("keys", "delete", "ci", db=db).exit_code == 0
    assert "ci" not in run("keys", "list", db=db).output.split()


def test_users_list_passwd_disable_enable_delete(tmp_path):
    db = database(tmp_path)
    assert run("users", "create", "ada", "--password-stdin", input=STRONG, db=db).exit_code == 0
    listing = run("users", "list", db=db).output.splitlines()
    assert listing[0].split()[:2] == ["username", "scopes"]
    assert listing[1].split()[0] == "ada" and listing[1].split()[-1] == "-"
    other = "violin orbit tea kettle 7"
    assert run("users", "passwd", "ada", "--password-stdin", input=other, db=db).exit_code == 0
    store = open_store(str(db))
    try:
        assert credentials.login(store, "ada", STRONG) is None
        assert credentials.login(store, "ada", other) is not None
        assert run("users", "disable", "ada", db=db).exit_code == 0
        assert credentials.login(store, "ada", other) is None
        assert run("users", "list", db=db).output.splitlines()[1].split()[-1] != "-"
        assert run("users", "enable", "ada", db=db).exit_code == 0
        assert credentials.login(store, "ada", other) is not None
        assert run("users", "delete", "ada", db=db).exit_code == 0
        assert credentials.login(store, "ada", other) is None
    finally:
        store.close()
    assert run("users", "disable", "ada", db=db).exit_code == 1


def test_disable_and_passwd_end_tokens_at_once_on_a_running_server(tmp_path):
    db = database(tmp_path)
    cli("users", "create", "ada", "--password-stdin", db=db, input=STRONG + "\n")
    server = ServerProcess(db).start()
    try:

        def token(password=STRONG):
            answer = server.request(
                "POST", "/auth/token", json={"username": "ada", "password": password}
            )
            assert answer.status_code == 200, answer.text
            return {"Authorization": "Bearer " + answer.json()["access_token"]}

        first = token()
        assert server.request("GET", "/me", headers=first).status_code == 200  # now cached
        other = "violin orbit tea kettle 7"
        assert cli("users", "passwd", "ada", "--password-stdin", db=db, input=other).returncode == 0
        assert server.request("GET", "/me", headers=first).status_code == 401
        second = token(other)
        assert server.request("GET", "/me", headers=second).status_code == 200
        assert cli("users", "disable", "ada", db=db).returncode == 0
        assert server.request("GET", "/me", headers=second).status_code == 401
        refused = server.request("POST", "/auth/token", json={"username": "ada", "password": other})
        assert refused.status_code == 401
    finally:
        server.stop()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_busy_port_is_one_line_and_the_demo_key_is_not_spent(tmp_path, sqlite_only, workers):
    """The key is printed once the port is bound: printed before, it would be lost with the
    failed start (only its hash is kept)."""
    import socket

    db = database(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("serve", "--port", str(port), "--workers", workers, db=db, timeout=30)
    assert result.returncode == 1
    assert result.stderr == (
        f"people-service: cannot listen on 127.0.0.1:{port}: address already in use "
        "(another server? choose another with --port)\n"
    )
    assert "ps_" not in result.stdout  # no key printed and lost
    # nor made: under gunicorn the address is checked before the database is even opened
    assert "demo" not in cli("keys", "list", db=db).stdout
    assert ACTIVE["backend"] == "sqlite"
