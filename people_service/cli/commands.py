"""The people-service commands: keys, users, init-db, import, export, migrate and serve."""

import errno
import json
import sys
from pathlib import Path

import click

from .. import config, credentials, transfer
from ..errors import BadRequest
from ..store import is_url
from .base import CommandError, cli, database_option, opened, reason, settings


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


def grant_options(kind: str):
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
    """A command of `group` that runs the decorated `view(store, ARGUMENT)`, then echoes `done`
    and what the view returned (a new secret), if anything."""

    def decorate(view):
        @group.command(name, help=view.__doc__)
        @database_option
        @click.argument(argument)
        def command(database, **params):
            shown = view(opened(database), params[argument])
            click.echo(done.format(params[argument]))
            if shown:
                click.echo(shown)

        return command

    return decorate


GRANT_COLUMNS = ("scopes", "rate limit", "created", "last used", "requests")


def grant_cells(row: dict, default_limit: str) -> tuple:
    limit = row["rate_limit"] or f"{default_limit} (default)"
    scopes = row["scopes"].replace(" ", ",")
    return scopes, limit, row["created_at"], row["last_used"] or "-", str(row["request_count"])


@cli.group()
def keys():
    """API keys: create, list, revoke, rotate, delete."""


@keys.command("create")
@database_option
@click.argument("name", required=False, callback=checked("key", "name"))
@click.option(
    "--name",
    "name_option",
    metavar="NAME",
    callback=checked("key", "name"),
    help="The same as NAME, for scripts that name it.",
)
@grant_options("key")
def keys_create(database, name, name_option, scopes, rate_limit):
    """Create the key NAME (a unique name: letters, digits, . _ @ -); it is printed once, alone
    on the last line (only its hash is kept)."""
    if name and name_option and name != name_option:
        raise click.UsageError(f"two names, {name!r} and {name_option!r}: give one")
    name = name or name_option
    if not name:
        raise click.UsageError("Missing argument 'NAME'.")
    key = credentials.create_key(opened(database), name, scopes, rate_limit)
    click.echo(f"created API key '{name}' ({scopes}); shown once, only its hash is kept:")
    click.echo(key)


@keys.command("list")
@database_option
def keys_list(database):
    """List keys with scopes, limits and usage (at most USAGE_FLUSH_SECONDS behind)."""
    default = settings(database)["RATE_LIMIT"]
    rows = [
        (key["name"], key["prefix"] + "…", *grant_cells(key, default), key["revoked_at"] or "-")
        for key in opened(database, create=False).list_keys()
    ]
    table(("name", "prefix", *GRANT_COLUMNS, "revoked"), rows)


@store_command(
    keys, "rotate", "name", "rotated API key '{}'; the old secret is refused from now on:"
)
def keys_rotate(store, name):
    """Give the key NAME a new secret (printed once); its name, limits and usage stay."""
    return credentials.rotate_key(store, name)


@store_command(keys, "revoke", "name", "revoked API key '{}'; it is refused from now on")
def keys_revoke(store, name):
    """Refuse the key NAME from now on (every server notices at once)."""
    credentials.revoke_key(store, name)


@store_command(keys, "delete", "name", "deleted API key '{}'")
def keys_delete(store, name):
    """Forget the key NAME (revoked or not); it is refused from now on."""
    credentials.delete_key(store, name)


@cli.group()
def users():
    """Logins for the token handshake: create, list, passwd, disable, enable, delete."""


@users.command("create")
@database_option
@click.argument("username", callback=checked("user", "username"))
@grant_options("user")
@password_stdin_option
def users_create(database, username, scopes, rate_limit, password_stdin):
    """Create the user USERNAME (the password: 15 characters or more, not a common one)."""
    store = opened(database)
    password = read_password(password_stdin, username)
    method = settings(database)["PASSWORD_HASH_METHOD"]
    credentials.create_user(store, username, password, scopes, rate_limit, method)
    click.echo(f"created user '{username}' with scopes {scopes}")


@users.command("list")
@database_option
def users_list(database):
    """List users with scopes, limits, usage and whether they are disabled."""
    default = settings(database)["RATE_LIMIT"]
    rows = [
        (user["username"], *grant_cells(user, default), user["disabled_at"] or "-")
        for user in opened(database, create=False).list_users()
    ]
    table(("username", *GRANT_COLUMNS, "disabled"), rows)


@users.command("passwd")
@database_option
@click.argument("username")
@password_stdin_option
def users_passwd(database, username, password_stdin):
    """Set a new password for USERNAME; tokens issued before it stop working at once."""
    store = opened(database)
    password = read_password(password_stdin, username)
    method = settings(database)["PASSWORD_HASH_METHOD"]
    credentials.change_password(store, username, password, method)
    click.echo(f"changed the password of '{username}'; its older tokens are refused")


@store_command(
    users, "disable", "username", "disabled user '{}'; its tokens are refused from now on"
)
def users_disable(store, username):
    """Stop USERNAME from logging in; its tokens stop working at once."""
    credentials.set_disabled(store, username, True)


@store_command(users, "enable", "username", "enabled user '{}'")
def users_enable(store, username):
    """Let a disabled USERNAME log in again (old tokens stay refused)."""
    credentials.set_disabled(store, username, False)


@store_command(users, "delete", "username", "deleted user '{}'")
def users_delete(store, username):
    """Forget USERNAME; its tokens stop working at once."""
    credentials.delete_user(store, username)


@cli.command("init-db")
@database_option
@click.option("--demo", is_flag=True, help="Also load the demo data (skipped if people exist).")
def init_db(database, demo):
    """Create or upgrade the schema (idempotent)."""
    store = opened(database)
    message = f"database {settings(database)['DATABASE']} is ready"
    if demo:
        if existing := store.count_people():
            message += f"; it holds {existing} people already, so the demo was not loaded"
        else:
            people, friendships = transfer.load_demo(store)
            message += f"; loaded {people} people, {friendships} friendships"
    click.echo(message)


@cli.command("import")
@database_option
@click.argument("file", type=click.Path(dir_okay=False))
def import_file(database, file):
    """Load people from FILE (the demo file's format), all or nothing."""
    try:
        with open(file, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError, RecursionError) as exc:
        raise CommandError(f"cannot read {file}: {reason(exc)}") from None
    people, friendships = transfer.import_people(opened(database), document)
    click.echo(f"imported {people} people, {friendships} friendships", err=True)


@cli.command("export")
@database_option
@click.argument("file", required=False, type=click.Path(dir_okay=False))
def export_file(database, file):
    """Write every person as JSON to FILE (default: stdout), in the import format."""
    document, friendships = transfer.export_people(opened(database, create=False))
    text = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    if file:
        try:
            Path(file).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot write {file}: {reason(exc)}") from None
    else:
        click.echo(text, nl=False)
    count = len(document["people"])
    click.echo(f"exported {count} people, {friendships} friendships", err=True)


def postgresql_url(ctx, param, value):
    if not is_url(value):
        raise click.BadParameter("must be a postgresql:// URL")
    return value


@cli.command()
@database_option
@click.option(
    "--to",
    "target",
    required=True,
    callback=postgresql_url,
    help="postgresql://user@host:port/database",
)
def migrate(database, target):
    """Copy the whole database into an empty PostgreSQL database, counts checked."""
    source = opened(database, create=False)
    destination = opened(target)
    counts = transfer.copy_database(source, destination)
    destination.close()
    summary = ", ".join(f"{count} {table.replace('_', ' ')}" for table, count in counts.items())
    click.echo(f"migrated {summary}; counts checked", err=True)


def number(name: str, default: int, help: str, high: int | None = None):
    return click.option(
        name, type=click.IntRange(1, high), default=default, show_default=True, help=help
    )


@cli.command()
@database_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@number("--port", 8080, "TCP port.", high=65535)
@number("--threads", 8, "Threads per process that answer requests.")
@number("--workers", 1, "Processes; with several, rate limits are shared among them.")
@number(
    "--connection-limit",
    250,
    "Open connections at most, per process (with 8 threads, up to 288 are watched with "
    "select(); more need poll(), which costs more per request).",
)
@number(
    "--channel-timeout",
    15,
    "Seconds a connection may send nothing (idle, or in the middle of a request) before it is "
    "closed.",
)
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
def serve(database, host, port, workers, demo, **waitress):
    """Serve the API."""
    from .. import server  # the web stack: only this command needs it

    overrides = {"DATABASE": database} if database else {}
    options = settings(database)
    storage = options["RATE_LIMIT_STORAGE"]
    if not storage:
        # one process counts in memory; several share the counters file, so limits stay exact
        overrides["RATE_LIMIT_STORAGE"] = "sqlite://" if workers > 1 else "memory://"
    elif workers > 1 and storage.startswith("memory://"):
        click.echo(
            "people-service: warning: RATE_LIMIT_STORAGE is memory://, so each of the "
            f"{workers} workers counts alone and a limit allows {workers} times as much",
            err=True,
        )
    try:
        sockets = server.listen(host, port, workers)
    except OSError as exc:
        why = exc.strerror or str(exc)
        why = why[:1].lower() + why[1:]
        if exc.errno == errno.EADDRINUSE:
            why += " (another server? choose another with --port)"
        shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        raise CommandError(f"cannot listen on {shown}: {why}") from None
    return server.run(
        overrides,
        sockets,
        demo=demo or options["DATABASE"] == config.DEFAULTS["DATABASE"],
        **waitress,  # threads, connection_limit, channel_timeout, url_prefix
    )
