"""The `people-service` command: serve, the database's data, and the groups of cli_*.py."""

import json
from pathlib import Path

import click
from click.exceptions import NoArgsIsHelpError

from . import logs, runtime, transfer
from .cli_base import Fail, database_option, opened, overrides, reason, settings
from .cli_credentials import keys, users
from .cli_webhooks import deliver, webhooks
from .config import ConfigError
from .errors import ServiceError
from .store import is_url


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="people-service", prog_name="people-service")
def cli():
    """People, friendships and messages over REST and GraphQL."""
    if not logs.operator_configured():  # here, so that --version and --help stay light
        runtime.take_logs()


def main(argv=None) -> int:
    """Run the command; every error is one line on stderr and a non-zero status."""
    try:
        result = cli.main(args=argv, prog_name="people-service", standalone_mode=False)
    except ConfigError as exc:
        click.echo(f"people-service: configuration error: {exc}", err=True)
        return 2
    except NoArgsIsHelpError as exc:  # a group alone: its help on stderr, as click does
        exc.show()
        return exc.exit_code
    except click.ClickException as exc:
        hint = " (see --help)" if isinstance(exc, click.UsageError) else ""
        click.echo(f"people-service: {exc.format_message()}{hint}", err=True)
        return exc.exit_code
    except (KeyboardInterrupt, click.Abort):
        return 130
    except Exception as exc:  # which file, never which exception
        where = "" if isinstance(exc, ServiceError | OSError) else "unexpected error: "
        if isinstance(exc, OSError) and exc.filename:
            where = f"cannot access {exc.filename}: "
        click.echo(f"people-service: {where}{reason(exc)}", err=True)
        return 1
    return result if isinstance(result, int) else 0


@cli.command("init-db")
@click.option("--demo", is_flag=True, help="Also load the demo data (skipped if people exist).")
def init_db(demo):
    """Create or upgrade the schema (idempotent)."""
    store = opened()
    message = f"database {settings()['DATABASE']} is ready"
    if demo and (existing := store.count_people()):
        message += f"; it holds {existing} people already, so the demo was not loaded"
    elif demo:
        message += "; loaded {} people, {} friendships".format(*transfer.load_demo(store))
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
    summary = ", ".join(f"{count} {name.replace('_', ' ')}" for name, count in counts.items())
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
    "--url-prefix", default="", metavar="PATH", help="Serve under this path (/api); see deploy/."
)
@click.option(
    "--demo",
    is_flag=True,
    help="On an empty database, load the demo data and print "
    "a demo key (always so for the default database).",
)
def serve(**options):
    """Serve the API."""
    from . import server  # the web stack: only this command needs it

    return server.run(overrides(), **options)


def with_database_option(command: click.Command) -> None:
    """--db on the command and on every command below it."""
    database_option(command)
    for below in getattr(command, "commands", {}).values():
        with_database_option(below)


for command in (keys, users, webhooks, deliver):
    cli.add_command(command)
with_database_option(cli)

if __name__ == "__main__":  # python -m people_service.cli
    raise SystemExit(main())
