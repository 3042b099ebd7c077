"""Round 3, CLI (issue 21): positional key names, --db before the subcommand, messages that
say what will work, and a start without the web stack."""

from __future__ import annotations

import os
import subprocess
import sys

from .conftest import ROOT, cli


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
