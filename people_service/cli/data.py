"""The data commands: init-db, import, export, and migrate (a copy into PostgreSQL)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .. import transfer
from ..store import is_url
from .base import CommandError, cli, database_option, opened, reason, settings


@cli.command("init-db")
@database_option
@click.option("--demo", is_flag=True, help="Also load the demo data (skipped if people exist).")
def init_db(database, demo):
    """Create or upgrade the schema (idempotent)."""
    store = opened(database)
    message = f"database {settings(database)['DATABASE']} is ready"
    if demo:
        existing = store.count_people()
        if existing:
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


POSTGRESQL_HELP = "postgresql://user@host:port/database"


def postgresql_url(ctx, param, value):
    """--to names a PostgreSQL database: anything else is a usage error (exit status 2)."""
    if not is_url(value):
        raise click.BadParameter("must be a postgresql:// URL")
    return value


@cli.command()
@database_option
@click.option("--to", "target", required=True, callback=postgresql_url, help=POSTGRESQL_HELP)
def migrate(database, target):
    """Copy the whole database into an empty PostgreSQL database, counts checked."""
    source = opened(database, create=False)
    destination = opened(target)
    counts = transfer.copy_database(source, destination)
    destination.close()
    summary = ", ".join(f"{count} {table.replace('_', ' ')}" for table, count in counts.items())
    click.echo(f"migrated {summary}; counts checked", err=True)
