"""What every people-service command shares: the group, --db, opening the store, errors."""

import os
import shlex

import click
from click.exceptions import NoArgsIsHelpError

from .. import config, logs, prepare_directory
from ..config import ConfigError
from ..errors import ServiceError
from ..store import Store, is_url, open_store


class CommandError(click.ClickException):
    """A problem to report on one line of stderr (exit status 1)."""


DATABASE_HELP = (
    "SQLite file or postgresql:// URL (default: PEOPLE_SERVICE_DATABASE, else data/people.db "
    "in the working directory)."
)


def _database(ctx, param, value):  # --db after the subcommand, else the group's
    return value if value is not None else ctx.find_root().params.get("database")


database_option = click.option(
    "--db", "database", metavar="PATH", callback=_database, help=DATABASE_HELP
)


def settings(database: str | None) -> dict:
    """The effective settings, with --db over PEOPLE_SERVICE_DATABASE."""
    return config.load({"DATABASE": database} if database else None)


def opened(database: str | None, *, create: bool = True) -> Store:
    """The store of --db, its schema up to date; create=False: a missing file is an error."""
    path = settings(database)["DATABASE"]
    if not create and not is_url(path) and not os.path.exists(path):
        raise CommandError(missing(path))
    prepare_directory(path)  # a no-op for a database that exists
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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="people-service", prog_name="people-service")
@click.option("--db", "database", metavar="PATH", help=DATABASE_HELP + " For every subcommand.")
def cli(database):
    """People, friendships and messages over REST and GraphQL."""
    # the serving process sets up logging, not the app; here, not before --version or --help
    if not logs.operator_configured():
        logs.take_over()  # it imports the web stack


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
    except ServiceError as exc:
        click.echo(f"people-service: {exc.detail}", err=True)
        return 1
    except (KeyboardInterrupt, click.Abort):
        return 130
    except OSError as exc:  # the file system refused: say which file, not which exception
        where = f"cannot access {exc.filename}: " if exc.filename else ""
        click.echo(f"people-service: {where}{reason(exc)}", err=True)
        return 1
    except Exception as exc:  # a CLI error is one line, never a traceback
        click.echo(f"people-service: unexpected error: {reason(exc)}", err=True)
        return 1
    return result if isinstance(result, int) else 0
