"""`people-service users`: logins for the token handshake, and their life cycle."""

from __future__ import annotations

import click

from .. import credentials
from .base import (
    checked,
    cli,
    database_option,
    grant_options,
    opened,
    password_stdin_option,
    read_password,
    settings,
    store_command,
    table,
)


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
    credentials.disable_user(store, username)


@store_command(users, "enable", "username", "enabled user '{}'")
def users_enable(store, username):
    """Let a disabled USERNAME log in again (old tokens stay refused)."""
    credentials.enable_user(store, username)


@store_command(users, "delete", "username", "deleted user '{}'")
def users_delete(store, username):
    """Forget USERNAME; its tokens stop working at once."""
    credentials.delete_user(store, username)
