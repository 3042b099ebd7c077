"""The `keys` and `users` commands: API keys, and logins for the token handshake."""

import sys

import click

from . import credentials
from .cli_base import Fail, opened, settings, table
from .errors import BadRequest, NotFound


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
    limit_help = 'Its own rate limit, e.g. "100/minute" (default: PEOPLE_SERVICE_RATE_LIMIT).'
    scopes = dict(default="read,write", show_default=True, help="Comma list of read, write, admin.")
    command = click.option("--rate-limit", callback=check, help=limit_help)(command)
    return click.option("--scopes", callback=check, **scopes)(command)


def listing(found: list[tuple], first: tuple, ended: str) -> None:
    """`first` columns, then a key's or user's grant and usage, then `ended` (revoked, ...)."""
    default, rows = f"{settings()['RATE_LIMIT']} (default)", []
    for cells, row in found:
        grant = (row["scopes"].replace(" ", ","), row["rate_limit"] or default, row["created_at"])
        usage = (row["last_used"] or "-", row["request_count"], row[f"{ended}_at"] or "-")
        rows.append((*cells, *grant, *usage))
    table((*first, "scopes", "rate limit", "created", "last used", "requests", ended), rows)


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


@click.group()
def users():
    """Logins for the token handshake: create, list, passwd, disable, enable, delete."""


@keys.command("create")
@click.argument("name", required=False, callback=check)
@click.option("--name", "name_option", metavar="NAME", callback=check, help="The same as NAME.")
@grant_options
def keys_create(name, name_option, scopes, rate_limit):
    """Create the key NAME; it is printed once, alone on the last line (only its hash is kept)."""
    if name and name_option and name != name_option:
        raise click.UsageError(f"two names, {name!r} and {name_option!r}: give one")
    if not (name := name or name_option):
        raise click.UsageError("Missing argument 'NAME'.")
    key = credentials.create_key(opened(), name, scopes, rate_limit)
    click.echo(f"created API key '{name}' ({scopes}); shown once, only its hash is kept:\n{key}")


@keys.command("list")
def keys_list():
    """List keys with scopes, limits and usage (at most USAGE_FLUSH_SECONDS behind)."""
    found = opened(create=False).list_keys()
    listing([((k["name"], k["prefix"] + "…"), k) for k in found], ("name", "prefix"), "revoked")


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
    found = opened(create=False).list_users()
    listing([((user["username"],), user) for user in found], ("username",), "disabled")


@users.command("passwd")
@click.argument("username")
@password_stdin
def users_passwd(username, password_stdin):
    """Set a new password for USERNAME; tokens issued before it stop working at once."""
    store, method = opened(), settings()["PASSWORD_HASH_METHOD"]
    password = read_password(password_stdin, username)
    credentials.change_password(store, username, password, method)
    click.echo(f"changed the password of '{username}'; its older tokens are refused")


def found(method: str, missing: str, *args):
    """The store's `method` on a name; NotFound (`missing`) when it changed nothing."""

    def act(store, name):
        if not getattr(store, method)(name, *args):
            raise NotFound(missing.format(name))

    return act


# group, command, what it does (a new key it returns is printed last), what it says, its help
ONE_NAME = [
    (keys, "rotate", credentials.rotate_key,
     "rotated API key '{}'; the old secret is refused from now on:",
     "Give the key NAME a new secret (printed once); its name, limits and usage stay."),
    (keys, "revoke", found("revoke_key", "No active API key named '{}'."),
     "revoked API key '{}'; it is refused from now on",
     "Refuse the key NAME from now on (every server notices at once)."),
    (keys, "delete", found("delete_key", "No API key named '{}'."), "deleted API key '{}'",
     "Forget the key NAME (revoked or not); it is refused from now on."),
    (users, "disable", found("set_disabled", "No enabled user named '{}'.", True),
     "disabled user '{}'; its tokens are refused from now on",
     "Stop USERNAME from logging in; its tokens stop working at once."),
    (users, "enable", found("set_disabled", "No disabled user named '{}'.", False),
     "enabled user '{}'", "Let a disabled USERNAME log in again (old tokens stay refused)."),
    (users, "delete", found("delete_user", "No user named '{}'."), "deleted user '{}'",
     "Forget USERNAME; its tokens stop working at once."),
]  # fmt: skip


def one_name_command(group, name, action, said, help):
    """A command of `group` that acts on one NAME or USERNAME and says so."""

    @group.command(name, help=help)
    @click.argument("name" if group is keys else "username")
    def command(**given):
        name = next(iter(given.values()))
        new_key = action(opened(), name)
        click.echo(said.format(name))
        if new_key:
            click.echo(new_key)


for entry in ONE_NAME:
    one_name_command(*entry)
