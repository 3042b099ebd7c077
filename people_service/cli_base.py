"""What every command shares: --db, the store it names, the settings, tables, one-line errors."""

import os
import shlex

import click

from . import config, prepare_directory
from .errors import ServiceError
from .store import Store, is_url, open_store, redacted

Fail = click.ClickException  # one line on stderr, exit status 1


def remember_database(ctx, param, value):
    if value is not None:  # ctx.meta is shared by the group and the command: the later --db wins
        ctx.meta["database"] = value


database_option = click.option(
    "--db",
    metavar="PATH",
    expose_value=False,
    callback=remember_database,
    help="SQLite file or postgresql:// URL (default: PEOPLE_SERVICE_DATABASE, else "
    "data/people.db in the working directory).",
)


def overrides() -> dict:
    database = click.get_current_context().meta.get("database")
    return {"DATABASE": database} if database else {}


def settings() -> dict:
    return config.load(overrides())


def opened(database: str | None = None, *, create: bool = True) -> Store:
    """The store of --db with its schema up to date; create=False: a missing file is an error."""
    path = database or settings()["DATABASE"]
    if not create and not is_url(path) and not os.path.exists(path):
        raise Fail(missing(path))
    prepare_directory(path)
    try:
        store = open_store(path)
        store.upgrade_schema()
    except Exception as exc:  # the driver's, the file system's or the schema's: one line
        raise Fail(f"cannot open the database {redacted(path)}: {reason(exc)}") from None
    return store


def missing(path: str) -> str:
    """Why there is no database at `path`, and what would make one."""
    if path == config.DEFAULTS["DATABASE"]:
        return (
            f"no database at {path} in {os.getcwd()} (the default is relative to the working "
            "directory): run this where the database is, name it with --db PATH or "
            "PEOPLE_SERVICE_DATABASE, or make one here with people-service init-db"
        )
    directory = os.path.dirname(os.path.abspath(path))
    init = f"people-service init-db --db {shlex.quote(path)}"
    if os.path.isdir(directory):
        return f"no database at {path} ({init} makes one)"
    mkdir = f"mkdir -p {shlex.quote(directory)}"
    return f"no database at {path}, nor its directory {directory}: {mkdir} && {init}"


def reason(exc: BaseException) -> str:
    """Why `exc` happened, on one line, without its class name."""
    if isinstance(exc, ServiceError):
        return exc.detail
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return (str(exc).strip().splitlines() or ["no reason given"])[0]


def table(columns: tuple, rows: list[tuple]) -> None:
    rows = [tuple(map(str, row)) for row in [columns, *rows]]
    widths = [max(map(len, cells)) for cells in zip(*rows, strict=True)]
    for row in rows:
        click.echo("  ".join(map(str.ljust, row, widths)).rstrip())
