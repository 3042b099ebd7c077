"""The `people-service` command (click): serve, init-db, keys, users, import, export, migrate."""

import json
import os
import shlex
import sys
from pathlib import Path

import click
from click.exceptions import NoArgsIsHelpError

from . import cli_webhooks, config, credentials, logs, prepare_directory, runtime, transfer
from .config import ConfigError
from .errors import BadRequest, ServiceError
from .store import Store, is_url, open_store

Fail = click.ClickException  # a problem told on one line of stderr (exit status 1)


def given_database(ctx, param, value):  # --db before the subcommand, or after it (that wins)
    if value is not None:
        ctx.meta["database"] = value  # one dict shared by the group's and the command's context


database_option = click.option(
    "--db",
    metavar="PATH",
    expose_value=False,
    callback=given_database,
    help="SQLite file or postgresql:// URL (default: PEOPLE_SERVICE_DATABASE, else "
    "data/people.db in the working directory).",
)


def overrides() -> dict:
    database = click.get_current_context().meta.get("database")
    return {"DATABASE": database} if database else {}


def settings() -> dict:
    """The effective settings, with --db over PEOPLE_SERVICE_DATABASE."""
    return config.load(overrides())


def opened(database: str | None = None, *, create: bool = True) -> Store:
    """The store of --db, its schema up to date; create=False: a missing file is an error."""
    path = database or settings()["DATABASE"]
    if not create and not is_url(path) and not os.path.exists(path):
        raise Fail(missing(path))
    prepare_directory(path)  # a no-op for a database that exists
    try:
        store = open_store(path)
        store.upgrade_schema()
    except Exception as exc:  # the driver's, the file system's or the schema's: all one line
        shown = path.split("@")[-1] if is_url(path) else path
        raise Fail(f"cannot open the database {shown}: {reason(exc)}") from None
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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="people-service", prog_name="people-service")
@database_option
def cli():
    """People, friendships and messages over REST and GraphQL."""
    # the serving process sets up logging, not the app; here, not before --version or --help
    if not logs.operator_configured():
        runtime.take_logs()


def main(argv=None) -> int:
    """Run the command; every error is one line on stderr and a non-zero status."""
    try:
        result = cli.main(args=argv, prog_name="people-service", standalone_mode=False)
    except ConfigError as exc:
        click.echo(f"people-service: configuration error: {exc}", err=True)
        return 2
    except NoArgsIsHelpError as exc:  # a group called alone: its help, as click shows it
        exc.show()
        return exc.exit_code
    except click.ClickException as exc:  # a usage error (status 2) points to --help
        hint = " (see --help)" if isinstance(exc, click.UsageError) else ""
        click.echo(f"people-service: {exc.format_message()}{hint}", err=True)
        return exc.exit_code
    except (KeyboardInterrupt, click.Abort):
        return 130
    except Exception as exc:  # one line, never a traceback: which file, not which exception
        if isinstance(exc, OSError) and exc.filename:
            where = f"cannot access {exc.filename}: "
        else:
            where = "" if isinstance(exc, ServiceError | OSError) else "unexpected error: "
        click.echo(f"people-service: {where}{reason(exc)}", err=True)
        return 1
    return result if isinstance(result, int) else 0


def checked(kind: str, field: str):
    def callback(ctx, param, value):
        if value is not None:
            try:
                credentials.check_field(kind, field, value)
            except BadRequest as exc:
                raise click.BadParameter(field_message(exc, field)) from None
        return value

    return callback


def field_message(exc: BadRequest, field: str) -> str:
    # without the field's name: the prompt or the option names it
    return " ".join((exc.errors or {}).get(field, [exc.detail]))


def table(columns: tuple, rows: list[tuple]) -> None:
    widths = [max(len(str(row[i])) for row in [columns, *rows]) for i in range(len(columns))]
    for row in [columns, *rows]:
        cells = (str(cell).ljust(width) for cell, width in zip(row, widths, strict=True))
        click.echo("  ".join(cells).rstrip())


def stdin_is_a_terminal() -> bool:  # tests stand in for a person
    return sys.stdin.isatty()


def read_password(password_stdin: bool, username: str) -> str:
    """A password from one line of stdin, or typed twice at a hidden prompt."""
    if password_stdin:
        line = sys.stdin.readline().rstrip("\r\n")
        if not line:
            raise Fail("no password on stdin (send it as one line)")
        return line
    if not stdin_is_a_terminal():
        raise Fail("stdin is not a terminal: pipe the password with --password-stdin")

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
        raise Fail("no password given") from None


def grant_options(kind: str):
    """--scopes and --rate-limit of a new key or user."""
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


password_stdin = click.option(
    "--password-stdin",
    is_flag=True,
    help="Read the password from one line of stdin instead of a prompt.",
)


GRANT_COLUMNS = ("scopes", "rate limit", "created", "last used", "requests")


def grant_cells(row: dict, default_limit: str) -> tuple:
    limit = row["rate_limit"] or f"{default_limit} (default)"
    scopes = row["scopes"].replace(" ", ",")
    return scopes, limit, row["created_at"], row["last_used"] or "-", str(row["request_count"])


def store_command(group, name: str, done: str):
    """A command of `group` that runs the decorated `view(store, ARGUMENT)`, then echoes `done`
    and what the view returned (a new secret), if anything."""
    argument = "name" if group.name == "keys" else "username"

    def decorate(view):
        @group.command(name, help=view.__doc__)
        @click.argument(argument)
        def command(**params):
            shown = view(opened(), params[argument])
            click.echo(done.format(params[argument]))
            if shown:
                click.echo(shown)

        return command

    return decorate


@cli.group()
def keys():
    """API keys: create, list, revoke, rotate, delete."""


@keys.command("create")
@click.argument("name", required=False, callback=checked("key", "name"))
@click.option(
    "--name",
    "name_option",
    metavar="NAME",
    callback=checked("key", "name"),
    help="The same as NAME, for scripts that name it.",
)
@grant_options("key")
def keys_create(name, name_option, scopes, rate_limit):
    """Create the key NAME (a unique name: letters, digits, . _ @ -); it is printed once, alone
    on the last line (only its hash is kept)."""
    if name and name_option and name != name_option:
        raise click.UsageError(f"two names, {name!r} and {name_option!r}: give one")
    name = name or name_option
    if not name:
        raise click.UsageError("Missing argument 'NAME'.")
    key = credentials.create_key(opened(), name, scopes, rate_limit)
    click.echo(f"created API key '{name}' ({scopes}); shown once, only its hash is kept:")
    click.echo(key)


@keys.command("list")
def keys_list():
    """List keys with scopes, limits and usage (at most USAGE_FLUSH_SECONDS behind)."""
    default = settings()["RATE_LIMIT"]
    rows = [
        (key["name"], key["prefix"] + "…", *grant_cells(key, default), key["revoked_at"] or "-")
        for key in opened(create=False).list_keys()
    ]
    table(("name", "prefix", *GRANT_COLUMNS, "revoked"), rows)


@store_command(keys, "rotate", "rotated API key '{}'; the old secret is refused from now on:")
def keys_rotate(store, name):
    """Give the key NAME a new secret (printed once); its name, limits and usage stay."""
    return credentials.rotate_key(store, name)


@store_command(keys, "revoke", "revoked API key '{}'; it is refused from now on")
def keys_revoke(store, name):
    """Refuse the key NAME from now on (every server notices at once)."""
    credentials.revoke_key(store, name)


@store_command(keys, "delete", "deleted API key '{}'")
def keys_delete(store, name):
    """Forget the key NAME (revoked or not); it is refused from now on."""
    credentials.delete_key(store, name)


@cli.group()
def users():
    """Logins for the token handshake: create, list, passwd, disable, enable, delete."""


@users.command("create")
@click.argument("username", callback=checked("user", "username"))
@grant_options("user")
@password_stdin
def users_create(username, scopes, rate_limit, password_stdin):
    """Create the user USERNAME (the password: 15 characters or more, not a common one)."""
    store, method = opened(), settings()["PASSWORD_HASH_METHOD"]
    password = read_password(password_stdin, username)
    credentials.create_user(store, username, password, scopes, rate_limit, method)
    click.echo(f"created user '{username}' with scopes {scopes}")


@users.command("list")
def users_list():
    """List users with scopes, limits, usage and whether they are disabled."""
    default = settings()["RATE_LIMIT"]
    rows = [
        (user["username"], *grant_cells(user, default), user["disabled_at"] or "-")
        for user in opened(create=False).list_users()
    ]
    table(("username", *GRANT_COLUMNS, "disabled"), rows)


@users.command("passwd")
@click.argument("username")
@password_stdin
def users_passwd(username, password_stdin):
    """Set a new password for USERNAME; tokens issued before it stop working at once."""
    store, method = opened(), settings()["PASSWORD_HASH_METHOD"]
    password = read_password(password_stdin, username)
    credentials.change_password(store, username, password, method)
    click.echo(f"changed the password of '{username}'; its older tokens are refused")


@store_command(users, "disable", "disabled user '{}'; its tokens are refused from now on")
def users_disable(store, username):
    """Stop USERNAME from logging in; its tokens stop working at once."""
    credentials.set_disabled(store, username, True)


@store_command(users, "enable", "enabled user '{}'")
def users_enable(store, username):
    """Let a disabled USERNAME log in again (old tokens stay refused)."""
    credentials.set_disabled(store, username, False)


@store_command(users, "delete", "deleted user '{}'")
def users_delete(store, username):
    """Forget USERNAME; its tokens stop working at once."""
    credentials.delete_user(store, username)


@cli.command("init-db")
@click.option("--demo", is_flag=True, help="Also load the demo data (skipped if people exist).")
def init_db(demo):
    """Create or upgrade the schema (idempotent)."""
    store = opened()
    message = f"database {settings()['DATABASE']} is ready"
    if demo:
        if existing := store.count_people():
            message += f"; it holds {existing} people already, so the demo was not loaded"
        else:
            people, friendships = transfer.load_demo(store)
            message += f"; loaded {people} people, {friendships} friendships"
    click.echo(message)


@cli.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
def import_file(file):
    """Load people from FILE (the demo file's format), all or nothing."""
    try:
        document = json.loads(Path(file).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise Fail(f"cannot read {file}: {reason(exc)}") from None
    people, friendships = transfer.import_people(opened(), document)
    click.echo(f"imported {people} people, {friendships} friendships", err=True)


@cli.command("export")
@click.argument("file", required=False, type=click.Path(dir_okay=False))
def export_file(file):
    """Write every person as JSON to FILE (default: stdout), in the import format."""
    document, friendships = transfer.export_people(opened(create=False))
    text = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    if not file:
        click.echo(text, nl=False)
    else:
        try:
            Path(file).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise Fail(f"cannot write {file}: {reason(exc)}") from None
    click.echo(f"exported {len(document['people'])} people, {friendships} friendships", err=True)


@cli.command()
@click.option("--to", "target", required=True, help="postgresql://user@host:port/database")
def migrate(target):
    """Copy the whole database into an empty PostgreSQL database, counts checked."""
    if not is_url(target):
        raise click.BadParameter("must be a postgresql:// URL", param_hint="'--to'")
    source, destination = opened(create=False), opened(target)
    counts = transfer.copy_database(source, destination)
    destination.close()
    summary = ", ".join(f"{count} {table.replace('_', ' ')}" for table, count in counts.items())
    click.echo(f"migrated {summary}; counts checked", err=True)


def number(name: str, default: int, help: str, high: int | None = None):
    return click.option(
        name, type=click.IntRange(1, high), default=default, show_default=True, help=help
    )


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@number("--port", 8080, "TCP port.", high=65535)
@number("--threads", 8, "Threads per process that answer requests.")
@number("--workers", 1, "Processes; with several, rate limits are shared among them.")
@number("--connection-limit", 250, "Most open connections per process (see docs/deployment.md).")
@number("--channel-timeout", 15, "Seconds a connection may stay silent (idle or mid-request).")
@click.option(
    "--url-prefix",
    default="",
    metavar="PATH",
    help="Serve under this path (/api): the SCRIPT_NAME of links and pages; see deploy/.",
)
@click.option(
    "--demo",
    is_flag=True,
    help="On an empty database, load the demo data and print a demo key "
    "(always so for the default database).",
)
def serve(**options):
    """Serve the API."""
    from . import server  # the web stack: only this command needs it

    return server.run(overrides(), **options)


cli_webhooks.add_to(cli, opened=opened, settings=settings, table=table)


def add_database_option(group: click.Group) -> None:
    """--db on every subcommand too, as on the group."""
    for command in group.commands.values():
        if isinstance(command, click.Group):
            add_database_option(command)
        else:
            database_option(command)  # click's decorators add a parameter to a Command given


add_database_option(cli)

if __name__ == "__main__":  # python -m people_service.cli
    raise SystemExit(main())
