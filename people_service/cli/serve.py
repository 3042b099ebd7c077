"""`people-service serve`: waitress in one process, or in several that share the port."""

from __future__ import annotations

import errno

import click

from .base import CommandError, cli, database_option


def number(name: str, default: int, help: str, low: int = 1, high: int | None = None):
    return click.option(
        name, type=click.IntRange(low, high), default=default, show_default=True, help=help
    )


@cli.command()
@database_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@number("--port", 8080, "TCP port.", high=65535)
@number("--threads", 8, "Threads per process that answer requests.")
@number("--workers", 1, "Processes; with several, rate limits are shared among them.")
@number("--connection-limit", 1000, "Open connections at most, per process.")
@number(
    "--channel-timeout",
    15,
    "Seconds a connection may send nothing (idle, or in the middle of a request) before it is "
    "closed.",
)
@click.option(
    "--demo",
    is_flag=True,
    help="On an empty database, load the demo data and print a demo key "
    "(always so for the default database).",
)
def serve(database, host, port, threads, workers, connection_limit, channel_timeout, demo):
    """Serve the API."""
    from .. import config, server

    overrides = {"DATABASE": database} if database else {}
    settings = config.load(overrides)
    storage = settings["RATE_LIMIT_STORAGE"]
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
        demo=demo or settings["DATABASE"] == config.DEFAULTS["DATABASE"],
        threads=threads,
        connection_limit=connection_limit,
        channel_timeout=channel_timeout,
    )
