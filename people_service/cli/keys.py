"""`people-service keys`: create, list, revoke, rotate and delete API keys."""

from __future__ import annotations

import click

from .. import credentials
from .base import (
    checked,
    cli,
    database_option,
    grant_options,
    opened,
    settings,
    store_command,
    table,
)


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
        (
            key["name"],
            key["prefix"] + "…",
            key["scopes"].replace(" ", ","),
            key["rate_limit"] or f"{default} (default)",
            key["created_at"],
            key["last_used"] or "-",
            str(key["request_count"]),
            key["revoked_at"] or "-",
        )
        for key in credentials.list_keys(opened(database, create=False))
    ]
    columns = ("name", "prefix", "scopes", "rate limit", "created", "last used", "requests")
    table((*columns, "revoked"), rows)


@keys.command("rotate")
@database_option
@click.argument("name")
def keys_rotate(database, name):
    """Give the key NAME a new secret (printed once); its name, limits and usage stay."""
    key = credentials.rotate_key(opened(database), name)
    click.echo(f"rotated API key '{name}'; the old secret is refused from now on:")
    click.echo(key)


@store_command(keys, "revoke", "name", "revoked API key '{}'; it is refused from now on")
def keys_revoke(store, name):
    """Refuse the key NAME from now on (every server notices at once)."""
    credentials.revoke_key(store, name)


@store_command(keys, "delete", "name", "deleted API key '{}'")
def keys_delete(store, name):
    """Forget the key NAME (revoked or not); it is refused from now on."""
    credentials.delete_key(store, name)
