"""`people-service serve`: waitress in one process, gunicorn's workers for several."""

from __future__ import annotations

import errno
import socket

import click

from .base import CommandError, cli, database_option


@cli.command()
@database_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=8080, show_default=True, help="TCP port."
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Threads per process that answer requests.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Processes (above 1: gunicorn runs them, and rate limits are shared among them).",
)
@click.option(
    "--connection-limit",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Open connections at most, per process.",
)
@click.option(
    "--channel-timeout",
    type=click.IntRange(min=1),
    default=30,
    show_default=True,
    help="Idle seconds before a connection is closed.",
)
def serve(database, host, port, threads, workers, connection_limit, channel_timeout):
    """Serve the API; on a first start, load the demo and print a demo key."""
    from .. import create_app, server

    overrides = {"DATABASE": database} if database else {}
    options = dict(host=host, port=port, threads=threads, connection_limit=connection_limit)
    options["channel_timeout"] = channel_timeout
    check_address(host, port)
    if workers == 1:
        return server.serve(create_app(overrides), **options)
    return server.serve_workers(overrides, workers=workers, **options)


def check_address(host: str, port: int) -> None:
    """Bind the address and let it go again, as waitress and gunicorn bind it (SO_REUSEADDR),
    so that a taken port is one line before anything starts, not the end of a traceback
    (waitress) or five retries and ten log lines (gunicorn). Raises CommandError."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        why = exc.strerror or str(exc)
        why = why[:1].lower() + why[1:]
        if exc.errno == errno.EADDRINUSE:
            why += " (another server? choose another with --port)"
        shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        raise CommandError(f"cannot listen on {shown}: {why}") from None
