"""The `keys` and `users` commands: API keys, and logins for the token handshake."""

import sys

import click

from . import credentials
from .cli_base import Fail, opened, settings, table
from .errors import BadRequest


def field_message(exc: BadRequest, field: str) -> str:
    return " ".join((exc.errors or {}).get(field, [exc.detail]))  # the option names the field


def check(ctx, param, value):
    """Check an option of `keys create` or `users create` by the rule the service applies."""
    field, kind = param.name.removesuffix("_option"), ctx.parent.command.name.removesuffix("s")
    if value is not None:
        try:
            credentials.check_field(kind, field, value)
        except BadRequest as exc:
            raise click.BadParameter(field_message(exc, field)) from None
    return value


def grant_options(command):
    """--scopes and --rate-limit of a new key or user."""
    command = click.option(
        "--rate-limit",
        callback=check,
        help='Its own rate limit, e.g. "100/minute" (default: PEOPLE_SERVICE_RATE_LIMIT).',
    )(command)
    scopes_help = "Comma list of read, write, admin."
    return click.option(
        "--scopes", default="read,write", show_default=True, callback=check, help=scopes_help
    )(command)


def grant_table(first: tuple, rows: list[tuple], ended: str) -> None:
    """`first` columns, then a key's or user's grant and usage, then `ended` (revoked, ...)."""
    default = settings()["RATE_LIMIT"]
    head = (*first, "scopes", "rate limit", "created", "last used", "requests", ended)
    table(
        head,
        [(*cells, *grant_cells(row, default), row[f"{ended}_at"] or "-") for cells, row in rows],
    )


def grant_cells(row: dict, default_limit: str) -> tuple:
    limit = row["rate_limit"] or f"{default_limit} (default)"
    scopes = row["scopes"].replace(" ", ",")
    return scopes, limit, row["created_at"], row["last_used"] or "-", str(row["request_count"])


def stdin_is_a_terminal() -> bool:  # tests stand in for a person
    return sys.stdin.isatty()


def read_password(password_stdin: bool, username: str) -> str:
    """A password from one line of stdin, or typed twice at a hidden prompt."""
    if password_stdin:
        if not (line := sys.stdin.readline().rstrip("\r\n")):
            raise Fail("no password on stdin (send it as one line)")
        return line
    if not stdin_is_a_terminal():
        raise Fail("stdin is not a terminal: pipe the password with --password-stdin")

    def allowed(password: str) -> str:
        try:
            return credentials.check_new_password(password, username)
        except BadRequest as exc:  # click prints "Error: <message>" and asks again
            raise click.UsageError(field_message(exc, "password")) from None

    try:
        return click.prompt(
            "Password", hide_input=True, confirmation_prompt=True, value_proc=allowed
        )
    except click.Abort:
        raise Fail("no password given") from None


password_stdin = click.option(
    "--password-stdin", is_flag=True, help="Read the password from one line of stdin."
)


@click.group()
def keys():
    """API keys: create, list, rotate, revoke, delete."""


@keys.command("create")
@click.argument("name", required=False, callback=check)
@click.option(
    "--name",
    "name_option",
    metavar="NAME",
    callback=check,
    help="The same as NAME, for scripts that name it.",
)
@grant_options
def keys_create(name, name_option, scopes, rate_limit):
    """Create the key NAME; it is printed once, alone on the last line (only its hash is kept)."""
    if name and name_option and name != name_option:
        raise click.UsageError(f"two names, {name!r} and {name_option!r}: give one")
    if not (name := name or name_option):
        raise click.UsageError("Missing argument 'NAME'.")
    key = credentials.create_key(opened(), name, scopes, rate_limit)
    click.echo(f"created API key '{name}' ({scopes}); shown once, only its hash is kept:")
    click.echo(key)


@keys.command("list")
def keys_list():
    """List keys with scopes, limits and usage (at most USAGE_FLUSH_SECONDS behind)."""
    rows = [((key["name"], key["prefix"] + "…"), key) for key in opened(create=False).list_keys()]
    grant_table(("name", "prefix"), rows, "revoked")


@keys.command("rotate")
@click.argument("name")
def keys_rotate(name):
    """Give the key NAME a new secret (printed once); its name, limits and usage stay."""
    key = credentials.rotate_key(opened(), name)
    click.echo(f"rotated API key '{name}'; the old secret is refused from now on:")
    click.echo(key)


@keys.command("revoke")
@click.argument("name")
def keys_revoke(name):
    """Refuse the key NAME from now on (every server notices at once)."""
    credentials.revoke_key(opened(), name)
    click.echo(f"revoked API key '{name}'; it is refused from now on")


@keys.command("delete")
@click.argument("name")
def keys_delete(name):
    """Forget the key NAME (revoked or not); it is refused from now on."""
    credentials.delete_key(opened(), name)
    click.echo(f"deleted API key '{name}'")


@click.group()
def users():
    """Logins for the token handshake: create, list, passwd, disable, enable, delete."""


@users.command("create")
@click.argument("username", callback=check)
@grant_options
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
    rows = [((user["username"],), user) for user in opened(create=False).list_users()]
    grant_table(("username",), rows, "disabled")


@users.command("passwd")
@click.argument("username")
@password_stdin
def users_passwd(username, password_stdin):
    """Set a new password for USERNAME; tokens issued before it stop working at once."""
    store, method = opened(), settings()["PASSWORD_HASH_METHOD"]
    password = read_password(password_stdin, username)
    credentials.change_password(store, username, password, method)
    click.echo(f"changed the password of '{username}'; its older tokens are refused")


@users.command("disable")
@click.argument("username")
def users_disable(username):
    """Stop USERNAME from logging in; its tokens stop working at once."""
    credentials.set_disabled(opened(), username, True)
    click.echo(f"disabled user '{username}'; its tokens are refused from now on")


@users.command("enable")
@click.argument("username")
def users_enable(username):
    """Let a disabled USERNAME log in again (old tokens stay refused)."""
    credentials.set_disabled(opened(), username, False)
    click.echo(f"enabled user '{username}'")


@users.command("delete")
@click.argument("username")
def users_delete(username):
    """Forget USERNAME; its tokens stop working at once."""
    credentials.delete_user(opened(), username)
    click.echo(f"deleted user '{username}'")
