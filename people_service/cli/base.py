"""What every people-service command shares: the group, --db, opening the store, tables."""

from __future__ import annotations

import os
import shlex
import sys

import click

from .. import config, credentials, logs, prepare_directory
from ..errors import BadRequest, ServiceError
from ..store import Store, is_url, open_store


class CommandError(click.ClickException):
    """A problem to report on one line of stderr (exit status 1)."""


DATABASE_HELP = (
    "SQLite file or postgresql:// URL (default: PEOPLE_SERVICE_DATABASE, else data/people.db "
    "in the working directory)."
)


def _database(ctx, param, value):
    """--db after the subcommand, else the one given before it (to the group)."""
    return value if value is not None else ctx.find_root().params.get("database")


database_option = click.option(
    "--db", "database", metavar="PATH", callback=_database, help=DATABASE_HELP
)


def settings(database: str | None) -> dict:
    """The effective settings, with --db over PEOPLE_SERVICE_DATABASE."""
    return config.load({"DATABASE": database} if database else None)


def opened(database: str | None, *, create: bool = True) -> Store:
    """The store of --db, its schema created or upgraded; without `create`, a missing SQLite
    file is an error (commands that only read never create a database)."""
    path = settings(database)["DATABASE"]
    if not create and not is_url(path) and not os.path.exists(path):
        raise CommandError(missing(path))
    if create:
        prepare_directory(path)
    try:
        store = open_store(path)
        store.upgrade_schema()
    except Exception as exc:  # the driver's, the file system's or the schema's: all one line
        shown = path.split("@")[-1] if is_url(path) else path
        raise CommandError(f"cannot open the database {shown}: {reason(exc)}") from None
    return store


def missing(path: str) -> str:
    """Why there is no database at `path`, and what would make one."""
    directory = os.path.dirname(os.path.abspath(path))
    if path == config.DEFAULTS["DATABASE"]:
        return (
            f"no database at {path} in {os.getcwd()} (the default is relative to the working "
            "directory): run this where the database is, name it with --db PATH or "
            "PEOPLE_SERVICE_DATABASE, or make one here with people-service init-db"
        )
    init = f"people-service init-db --db {shlex.quote(path)}"
    if not os.path.isdir(directory):
        mkdir = f"mkdir -p {shlex.quote(directory)}"
        return f"no database at {path}, nor its directory {directory}: {mkdir} && {init}"
    return f"no database at {path} ({init} makes one)"


def reason(exc: BaseException) -> str:
    """Why `exc` happened, on one line and without its class name."""
    if isinstance(exc, ServiceError):
        return exc.detail
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else "no reason given"


def checked(kind: str, field: str):
    """A click callback checking a parameter by the rule of `field` of a new key or user: a bad
    value is a usage error, found before anything is opened or prompted for."""

    def callback(ctx, param, value):
        if value is not None:
            try:
                credentials.check_field(kind, field, value)
            except BadRequest as exc:
                raise click.BadParameter(field_message(exc, field)) from None
        return value

    return callback


def field_message(exc: BadRequest, field: str) -> str:
    """What `exc` says about `field`, without the field's name (the prompt or option names it)."""
    return " ".join((exc.errors or {}).get(field, [exc.detail]))


def table(columns: tuple, rows: list[tuple]) -> None:
    """Print rows under their column names, aligned."""
    widths = [max(len(str(row[i])) for row in [columns, *rows]) for i in range(len(columns))]
    for row in [columns, *rows]:
        cells = (str(cell).ljust(width) for cell, width in zip(row, widths, strict=True))
        click.echo("  ".join(cells).rstrip())


def stdin_is_a_terminal() -> bool:
    """Whether a person may be typing (tests stand in for one)."""
    return sys.stdin.isatty()


def read_password(password_stdin: bool, username: str) -> str:
    """A password from one line of stdin, or typed twice at a hidden prompt that refuses one
    breaking a rule before the confirmation."""
    if password_stdin:
        line = sys.stdin.readline()
        if not line.strip("\r\n"):
            raise CommandError("no password on stdin (send it as one line)")
        return line.rstrip("\r\n")
    if not stdin_is_a_terminal():
        raise CommandError("stdin is not a terminal: pipe the password with --password-stdin")

    def allowed(password: str) -> str:
        try:
            return credentials.check_new_password(password, username)
        except BadRequest as exc:  # click prints "Error: <message>" and prompts again
            raise click.UsageError(field_message(exc, "password")) from None

    try:
        return click.prompt(
            "Password", hide_input=True, confirmation_prompt=True, value_proc=allowed
        )
    except click.Abort:
        raise CommandError("no password given") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="people-service", prog_name="people-service")
@click.option("--db", "database", metavar="PATH", help=DATABASE_HELP + " For every subcommand.")
def cli(database):
    """People, friendships and messages over REST and GraphQL."""
    logs.install()  # here, not before --version or --help: it imports the web stack


def grant_options(kind: str):
    """--scopes and --rate-limit of a new key or user, checked by the rule create_key or
    create_user applies."""
    scopes = click.option(
        "--scopes",
        default="read,write",
        show_default=True,
        callback=checked(kind, "scopes"),
        help="Comma list of read, write, admin.",
    )
    rate_limit = click.option(
        "--rate-limit",
        callback=checked(kind, "rate_limit"),
        help='Its own rate limit, e.g. "100/minute" (default: PEOPLE_SERVICE_RATE_LIMIT).',
    )
    return lambda command: scopes(rate_limit(command))


password_stdin_option = click.option(
    "--password-stdin",
    is_flag=True,
    help="Read the password from one line of stdin instead of a prompt.",
)


def store_command(group, name: str, argument: str, done: str):
    """A command of `group` that runs the decorated `view(store, ARGUMENT)`, then echoes `done`."""

    def decorate(view):
        @group.command(name, help=view.__doc__)
        @database_option
        @click.argument(argument)
        def command(database, **params):
            view(opened(database), params[argument])
            click.echo(done.format(params[argument]))

        return command

    return decorate
