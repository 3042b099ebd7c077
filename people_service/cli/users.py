"""`people-service users`: logins for the token handshake, and their life cycle."""

from __future__ import annotations

import click

from .. import credentials
from .base import (
    PASSWORD_STDIN_HELP,
    checked,
    cli,
    database_option,
    grant_options,
    opened,
    read_password,
    settings,
    table,
)


@cli.group()
def users():
    """Logins for the token handshake: create, list, passwd, disable, enable, delete."""


@users.command("create")
@database_option
@click.argument("username", callback=checked("user", "username"))
@grant_options("user")
@click.option("--password-stdin", is_flag=True, help=PASSWORD_STDIN_HELP)
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
        (
            user["username"],
            user["scopes"].replace(" ", ","),
            user["rate_limit"] or f"{default} (default)",
            user["created_at"],
            user["last_used"] or "-",
            str(user["request_count"]),
            user["disabled_at"] or "-",
        )
        for user in credentials.list_users(opened(database, create=False))
    ]
    columns = ("username", "scopes", "rate limit", "created", "last used", "requests")
    table((*columns, "disabled"), rows)


@users.command("passwd")
@database_option
@click.argument("username")
@click.option("--password-stdin", is_flag=True, help=PASSWORD_STDIN_HELP)
def users_passwd(database, username, password_stdin):
    """Set a new password for USERNAME; tokens issued before it stop working at once."""
    store = opened(database)
    password = read_password(password_stdin, username)
    method = settings(database)["PASSWORD_HASH_METHOD"]
    credentials.change_password(store, username, password, method)
    click.echo(f"changed the password of '{username}'; its older tokens are refused")


@users.command("disable")
@database_option
@click.argument("username")
def users_disable(database, username):
    """Stop USERNAME from logging in; its tokens stop working at once."""
    credentials.disable_user(opened(database), username)
    click.echo(f"disabled user '{username}'; its tokens are refused from now on")


@users.command("enable")
@database_option
@click.argument("username")
def users_enable(database, username):
    """Let a disabled USERNAME log in again (old tokens stay refused)."""
    credentials.enable_user(opened(database), username)
    click.echo(f"enabled user '{username}'")


@users.command("delete")
@database_option
@click.argument("username")
def users_delete(database, username):
    """Forget USERNAME; its tokens stop working at once."""
    credentials.delete_user(opened(database), username)
    click.echo(f"deleted user '{username}'")
