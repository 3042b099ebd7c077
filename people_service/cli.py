"""The `people-service` command: serve, init-db, keys, users, import and export."""

from __future__ import annotations

import argparse
import atexit
import getpass
import json
import logging
import signal
import sys
import threading
import time
from pathlib import Path

from . import credentials, transfer
from .config import ConfigError
from .errors import ServiceError
from .web import services
from .web.lifecycle import RequestIdFilter

log = logging.getLogger("people_service")


class CommandError(Exception):
    """A problem to report on one line of stderr (exit status 1)."""


def _app(args):
    from . import create_app

    overrides = {"DATABASE": args.db} if args.db else {}
    return create_app(overrides)


def _store(app):
    return services(app).store


def bootstrap(app, out=sys.stdout) -> str | None:
    """On a first start with an empty database: demo data and a demo key, printed once."""
    store = _store(app)
    # one transaction: of several instances starting on one empty database, one loads the demo
    with store.transaction():
        if not store.is_empty():
            return None
        people, friendships = transfer.load_demo(store)
        key = credentials.create_key(store, "demo", "read,write")
    print(f"Loaded the demo data: {people} people, {friendships} friendships.", file=out)
    print("Demo API key (shown once; send it as X-API-Key):", file=out)
    print(key, file=out, flush=True)
    return key


# -- serve --------------------------------------------------------------------------------


def _drain(server, seconds: float = 10) -> None:
    """Finish what is running and send its answers; close idle connections; accept no more.

    A connection is closed as soon as it has no request in progress and nothing left to send,
    so a keep-alive client gets the answer to what it already sent and then a closed socket.
    """
    server.accepting = False
    server.del_channel()
    server.socket.close()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        busy = bool(server.task_dispatcher.active_count or server.task_dispatcher.queue)
        for channel in list(server._map.values()):
            lock = getattr(channel, "requests_lock", None)
            if lock is None:
                continue  # the trigger, not a client connection
            with lock:
                if channel.requests or channel.total_outbufs_len:
                    busy = True
                else:
                    channel.close_when_flushed = True  # idle keep-alive: nothing to lose
        if not busy:
            break
        server.asyncore.loop(timeout=0.05, map=server._map, count=1)


def serve(args) -> int:
    from waitress.server import create_server

    app = _app(args)
    bootstrap(app)
    config = app.config
    proxy = {}
    if config["TRUSTED_PROXY"]:
        # only then does waitress take the client address from X-Forwarded-For
        proxy = {
            "trusted_proxy": config["TRUSTED_PROXY"],
            "trusted_proxy_headers": "x-forwarded-for x-forwarded-proto",
        }
    server = create_server(
        app,
        host=args.host,
        port=args.port,
        threads=args.threads,
        ident="people-service",
        # waitress refuses larger bodies itself; Flask answers 413 up to this size
        max_request_body_size=config["MAX_BODY_BYTES"] * 2,
        max_request_header_size=64 * 1024,
        connection_limit=args.connection_limit,
        channel_timeout=args.channel_timeout,
        clear_untrusted_proxy_headers=True,
        **proxy,
    )
    # waitress warns "Task queue depth is N" on nearly every request under load: noise that
    # costs CPU; saturation shows in the access log's durations instead
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    stopping = threading.Event()

    def stop(signum, frame):
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info(
        "people-service ready on http://%s:%s (GraphQL: /graphql)",
        server.effective_host,
        server.effective_port,
    )
    while not stopping.is_set():
        server.asyncore.loop(timeout=0.2, map=server._map, count=1)
    log.info("people-service stopping")
    _drain(server)
    server.task_dispatcher.shutdown(cancel_pending=True, timeout=2)
    services(app).usage.stop()
    _store(app).close()
    log.info("people-service stopped")
    return 0


# -- data and credentials -------------------------------------------------------------------


def init_db(args) -> int:
    app = _app(args)
    store = _store(app)
    message = f"database {app.config['DATABASE']} is ready"
    if args.demo:
        people, friendships = transfer.load_demo(store)
        message += f"; loaded {people} people, {friendships} friendships"
    print(message)
    return 0


def keys_create(args) -> int:
    key = credentials.create_key(_store(_app(args)), args.name, args.scopes, args.rate_limit)
    print(f"created API key '{args.name}' ({args.scopes}); shown once, only its hash is kept:")
    print(key)
    return 0


def keys_list(args) -> int:
    app = _app(args)
    default = app.config["RATE_LIMIT"]
    columns = (
        "name",
        "prefix",
        "scopes",
        "rate limit",
        "created",
        "last used",
        "requests",
        "revoked",
    )
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
        for key in credentials.list_keys(_store(app))
    ]
    widths = [max(len(str(row[i])) for row in [columns, *rows]) for i in range(len(columns))]
    for row in [columns, *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)))
    return 0


def keys_revoke(args) -> int:
    credentials.revoke_key(_store(_app(args)), args.name)
    print(f"revoked API key '{args.name}'; it is refused from now on")
    return 0


def users_create(args) -> int:
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass("Password: ")
        if getpass.getpass("Repeat password: ") != password:
            raise CommandError("the passwords do not match")
    credentials.create_user(
        _store(_app(args)), args.username, password, args.scopes, args.rate_limit
    )
    print(f"created user '{args.username}' with scopes {args.scopes}")
    return 0


def import_file(args) -> int:
    try:
        with open(args.file, encoding="utf-8") as file:
            document = json.load(file)
    except (OSError, ValueError, RecursionError) as exc:
        raise CommandError(f"cannot read {args.file}: {exc}") from None
    people, friendships = transfer.import_people(_store(_app(args)), document)
    print(f"imported {people} people, {friendships} friendships", file=sys.stderr)
    return 0


def export_file(args) -> int:
    document, friendships = transfer.export_people(_store(_app(args)))
    text = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    if args.file:
        Path(args.file).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    count = len(document["people"])
    print(f"exported {count} people, {friendships} friendships", file=sys.stderr)
    return 0


def migrate(args) -> int:
    from .store import is_url, open_store

    if not is_url(args.to):
        raise CommandError("--to must be a postgresql:// URL")
    source = _store(_app(args))
    try:
        target = open_store(args.to)
        target.upgrade_schema()
    except ServiceError:
        raise
    except Exception as exc:
        raise CommandError(f"cannot open {args.to.split('@')[-1]}: {exc}") from None
    counts = transfer.copy_database(source, target)
    target.close()
    summary = ", ".join(f"{count} {table.replace('_', ' ')}" for table, count in counts.items())
    print(f"migrated {summary}; counts checked", file=sys.stderr)
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="people-service", description="People, friendships and messages over REST and GraphQL."
    )
    db = argparse.ArgumentParser(add_help=False)
    db.add_argument("--db", help="SQLite file (default: PEOPLE_SERVICE_DATABASE or data/people.db)")
    commands = top.add_subparsers(dest="command", required=True)

    run = commands.add_parser("serve", parents=[db], help="serve the API with waitress")
    run.add_argument("--host", default="127.0.0.1")
    run.add_argument("--port", type=int, default=8080)
    run.add_argument("--threads", type=int, default=8)
    run.add_argument("--connection-limit", type=int, default=1000)
    run.add_argument(
        "--channel-timeout", type=int, default=30, help="idle seconds before a connection is closed"
    )
    run.set_defaults(handler=serve)

    init = commands.add_parser("init-db", parents=[db], help="create or migrate the schema")
    init.add_argument("--demo", action="store_true", help="also load data/demo.json")
    init.set_defaults(handler=init_db)

    keys = commands.add_parser("keys", help="API keys").add_subparsers(dest="action", required=True)
    create = keys.add_parser("create", parents=[db], help="create a key (printed once)")
    create.add_argument("--name", required=True)
    create.add_argument("--scopes", default="read,write", help="e.g. read or read,write,admin")
    create.add_argument("--rate-limit", help='its own limit, e.g. "100/minute"')
    create.set_defaults(handler=keys_create)
    keys.add_parser("list", parents=[db], help="list keys and their usage").set_defaults(
        handler=keys_list
    )
    revoke = keys.add_parser("revoke", parents=[db], help="revoke a key at once")
    revoke.add_argument("name")
    revoke.set_defaults(handler=keys_revoke)

    users = commands.add_parser("users", help="logins for the token handshake")
    user_commands = users.add_subparsers(dest="action", required=True)
    user = user_commands.add_parser("create", parents=[db], help="create a user")
    user.add_argument("username")
    user.add_argument("--scopes", default="read,write")
    user.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    user.add_argument("--rate-limit", help='its own limit, e.g. "100/minute"')
    user.set_defaults(handler=users_create)

    load = commands.add_parser("import", parents=[db], help="load people from a JSON file")
    load.add_argument("file")
    load.set_defaults(handler=import_file)
    move = commands.add_parser(
        "migrate", parents=[db], help="copy the whole database into an empty PostgreSQL one"
    )
    move.add_argument("--to", required=True, help="postgresql://user@host:port/database")
    move.set_defaults(handler=migrate)
    dump = commands.add_parser("export", parents=[db], help="write people as JSON")
    dump.add_argument("file", nargs="?")
    dump.set_defaults(handler=export_file)
    return top


class BatchedStreamHandler(logging.Handler):
    """Writes records to a stream in batches, from a thread, a few times a second.

    The access log has a line per request; writing and flushing each one from the request's
    thread cost a system call per request, which in a threaded server hands the GIL over.
    Lines are formatted at once and written at most `interval` seconds later, and at exit.
    """

    def __init__(self, stream, interval: float = 0.1):
        super().__init__()
        self.stream, self.interval = stream, interval
        self.lines: list[str] = []
        self.done = threading.Event()
        threading.Thread(target=self._run, name="access-log", daemon=True).start()
        atexit.register(self.close)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))  # list.append needs no lock of ours

    def _run(self) -> None:
        while not self.done.wait(self.interval):
            self.flush()

    def flush(self) -> None:
        lines, self.lines = self.lines, []
        if lines:
            try:
                self.stream.write("\n".join(lines) + "\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass  # stderr went away; nothing better to do with an access line

    def handle(self, record: logging.LogRecord) -> bool:
        # emit() is thread-safe by itself, so skip logging's per-record handler lock
        if self.filter(record):
            self.emit(record)
        return True

    def close(self) -> None:
        self.done.set()
        self.flush()
        super().close()


def configure_logging() -> BatchedStreamHandler:
    """Access lines as they are, in batches; everything else with level, logger and request id."""
    handler = BatchedStreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    access = logging.getLogger("people_service.access")
    access.addHandler(handler)
    access.propagate = False
    logging.basicConfig(
        level=logging.INFO, format="%(levelname)s %(name)s [%(request_id)s]: %(message)s"
    )
    for root_handler in logging.getLogger().handlers:
        root_handler.addFilter(RequestIdFilter())
    return handler


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    configure_logging()
    try:
        return args.handler(args)
    except ConfigError as exc:
        print(f"people-service: configuration error: {exc}", file=sys.stderr)
        return 2
    except (CommandError, ServiceError) as exc:
        detail = exc.detail if isinstance(exc, ServiceError) else str(exc)
        print(f"people-service: {detail}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a CLI error is one line, never a traceback
        print(f"people-service: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
