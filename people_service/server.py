"""Serving the app with waitress, in one process or in several forked ones on one port."""

import atexit
import contextlib
import errno
import functools
import logging
import os
import resource
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time

from waitress import create_server

from . import create_app, credentials, runtime, transfer
from .config import DEFAULTS, ConfigError, load
from .errors import Conflict
from .store import open_store, redacted

log = logging.getLogger("people_service")

BODY_SLACK = 64 * 1024  # room above MAX_BODY_BYTES for chunked framing: the app refuses, not us
MAX_HEADER_BYTES = 64 * 1024
# open files beside the connections: SQLite connections (two files each), pooled or per thread
SPARE_FILES, FILES_PER_THREAD = 128, 4
FILES_PER_CONNECTION = 3  # its socket, and the files waitress spools a body and an answer to
FD_SETSIZE = 1024  # select() cannot watch a descriptor from this number on
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
STOP_GRACE = 7  # seconds: waitress's shutdown waits up to 5 for the running requests
METRICS_DIR = "PROMETHEUS_MULTIPROC_DIR"


def listen(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` listening sockets on one address (SO_REUSEPORT with several). Raises OSError."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    # bound alone first: SO_REUSEPORT would let a second instance share a port in use
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(address)
        address = probe.getsockname()  # port 0: the port the system chose
    share = functools.partial(socket.create_server, family=family, reuse_port=count > 1)
    with contextlib.ExitStack() as opened:  # all closed if one fails
        sockets = [opened.enter_context(share(address, backlog=1024)) for _ in range(count)]
        opened.pop_all()
    return sockets


def bootstrap(store, demo: bool, database: str | None = None) -> str:
    """Load the demo data and print a demo key on an empty database; returns the ready line's
    hint (how to make a key) for an empty database left empty."""
    given = f" --db {shlex.quote(redacted(database))}" if database else ""  # no password
    make_key = f"people-service keys create NAME{given}"
    # one transaction, the key's unique name first: of several instances starting on one empty
    # database, one loads the demo and the others find the name taken
    try:
        with store.transaction():
            if not store.is_empty():
                return ""
            if not demo:
                return f"; no API key yet: `{make_key}` makes one"
            key = credentials.create_key(store, "demo", "read,write")
            people, friendships = transfer.load_demo(store)
    except Conflict:
        return ""
    print(f"Loaded the demo data: {people} people, {friendships} friendships.")
    print("Demo API key (shown once; send it as X-API-Key):")
    print(f"(lost it? `{make_key}` makes another one)")
    print(key, flush=True)
    return ""


def run(overrides: dict, host: str, port: int, workers: int, *, demo: bool, **options) -> int:
    """Serve on host:port (a worker process each, if several) until SIGTERM or SIGINT."""
    settings = load(overrides)
    demo = demo or settings["DATABASE"] == DEFAULTS["DATABASE"]  # the quick start's
    storage = settings["RATE_LIMIT_STORAGE"]
    if not storage:
        # one process counts in memory; several share the counters file, so limits stay exact
        overrides["RATE_LIMIT_STORAGE"] = "sqlite://" if workers > 1 else "memory://"
    elif workers > 1 and storage.startswith("memory://"):
        log.warning("RATE_LIMIT_STORAGE is memory://: each of the %d workers counts alone", workers)
    shown = f"[{host}]" if ":" in host else host
    try:
        sockets = listen(host, port, workers)
    except OSError as exc:  # one line for the command (status 1)
        why = exc.strerror or str(exc)
        why = why[:1].lower() + why[1:]
        if exc.errno == errno.EADDRINUSE:
            why += " (another server? choose another with --port)"
        raise OSError(exc.errno, f"cannot listen on {shown}:{port}: {why}") from None
    _on_stop(_quit)  # a signal during start-up stops it cleanly too
    options["use_select"] = allow_connections(options["connection_limit"], options["threads"])
    if workers > 1:
        share_metrics()  # before create_app imports prometheus_client, which reads it then
    app = create_app(overrides)
    threads = options["threads"]
    app.config["SERVER_THREADS"] = threads  # the runtime sizes its streams and logins by it
    app.config["EVENT_STREAMS"] = app.config["EVENT_STREAMS"] or max(1, threads // 2)
    named = overrides.get("DATABASE")
    if workers == 1:  # this process's runtime, made now: it delivers webhooks from the start
        hint = bootstrap(app.extensions["people_service"].get().store, demo, database=named)
    else:  # the workers make their own after the fork: no connection may cross it
        store = open_store(settings["DATABASE"])
        try:
            runtime.prepare(settings, store, settings["SECRET_KEY"])
            hint = bootstrap(store, demo, database=named)
        finally:
            store.close()
    port = sockets[0].getsockname()[1]
    prefix = (options.get("url_prefix") or "").strip("/")
    options["url_prefix"] = prefix = f"/{prefix}" if prefix else ""
    many = f"; {workers} workers" if workers > 1 else ""
    log.info(
        "people-service ready on http://%s:%s%s (GraphQL: %s/graphql%s)%s",
        *(shown, port, prefix, prefix, many, hint),
    )
    if workers == 1:
        status = serve(app, sockets, **options)
    else:
        status = serve_workers(overrides, sockets, **options)
    log.info("people-service stopped")
    return status


def allow_connections(limit: int, threads: int) -> bool:
    """Fit this process's open-file limit to `limit` connections; True when waitress may watch
    them with select(), below FD_SETSIZE. Raises ConfigError."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = FILES_PER_CONNECTION * limit + FILES_PER_THREAD * threads + SPARE_FILES
    if hard != resource.RLIM_INFINITY and hard < need:
        raise ConfigError(
            f"--connection-limit {limit} needs {need} open files, but this process may open "
            f"{hard} at most (ulimit -n)"
        )
    if need <= FD_SETSIZE:
        # select() is cheaper than poll() in waitress (docs/performance.md); with the limit at
        # FD_SETSIZE no descriptor it is given can be out of its range
        top = FD_SETSIZE if hard == resource.RLIM_INFINITY else min(hard, FD_SETSIZE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (top, hard))
        return True
    if soft != resource.RLIM_INFINITY and soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    return False


def serve(app, sockets, *, threads, connection_limit, channel_timeout, use_select, url_prefix=""):
    """Serve `app` with waitress until SIGTERM or SIGINT, then finish the running requests."""
    app.config["SERVER_THREADS"] = threads
    app.config["EVENT_STREAMS"] = app.config["EVENT_STREAMS"] or max(1, threads // 2)
    try:
        app.extensions["people_service"].get()  # this process delivers webhooks from now
    except ConfigError as exc:  # the first request tries again, and answers 503 meanwhile
        log.warning("%s", exc)
    server = create_server(
        app,
        sockets=sockets,
        threads=threads,
        ident="people-service",
        # waitress counts its listening sockets and its wake-up pipe among the connections
        connection_limit=connection_limit + len(sockets) + 1,
        channel_timeout=channel_timeout,  # a silent connection is closed after it
        cleanup_interval=1,
        asyncore_use_poll=not use_select,
        max_request_body_size=app.config["MAX_BODY_BYTES"] + BODY_SLACK,
        max_request_header_size=MAX_HEADER_BYTES,
        url_prefix=url_prefix or "",  # the SCRIPT_NAME of every request: no client sets it
        # forwarded headers reach the app, which believes them only from TRUSTED_PROXY
        clear_untrusted_proxy_headers=False,
    )
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)  # "Task queue depth": noise
    again: list[threading.Timer] = []

    def stop(signum, frame):
        runtime.end_streams()  # streams are not requests to wait for: they end now
        # the SystemExit is lost when the signal lands in a finalizer: the signal comes again
        timer = threading.Timer(STOP_GRACE, os.kill, (os.getpid(), signum))
        timer.daemon = True
        timer.start()
        again.append(timer)
        raise SystemExit(0)

    _on_stop(stop)
    # on SystemExit waitress's threads finish the requests they run; waiting ones are dropped
    server.run()  # it ends on SystemExit
    _on_stop(signal.SIG_IGN)  # kept while Python exits, which resets handlers of its own
    for timer in again:
        timer.cancel()
    return 0  # the runtime closes at exit (runtime.close)


def _quit(signum, frame):
    raise SystemExit(0)


def _on_stop(handler) -> None:
    for number in STOP_SIGNALS:
        signal.signal(number, handler)


def share_metrics() -> None:
    """Let /metrics add up every worker (prometheus-client's multiprocess mode) in a fresh
    directory, unless the operator names one in PROMETHEUS_MULTIPROC_DIR (theirs to empty)."""
    if os.environ.get(METRICS_DIR):
        return
    directory = os.environ[METRICS_DIR] = tempfile.mkdtemp(prefix="people-service-metrics-")
    owner = os.getpid()  # forked workers inherit this atexit hook: only the parent removes
    atexit.register(lambda: os.getpid() == owner and shutil.rmtree(directory, True))


def serve_workers(overrides: dict, sockets: list[socket.socket], **options) -> int:
    """A forked worker per socket, replaced if it dies; SIGTERM or SIGINT is passed on to all."""
    workers: dict[int, socket.socket] = {}
    parent, stopping = os.getpid(), []  # a list: the handler appends, taking no lock

    def stop(signum, frame):
        stopping.append(signum)
        for pid in list(workers):
            os.kill(pid, signal.SIGTERM)

    def start(sock: socket.socket) -> None:
        # blocked around the fork, so that no signal reaches the child before its own handlers
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        pid = os.fork()
        if pid == 0:
            _on_stop(signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
            for other in sockets:
                if other is not sock:
                    other.close()
            threading.Thread(target=watch_parent, daemon=True).start()
            # leaves through the caller's frames as any process ends, so atexit handlers run
            sys.exit(serve(create_app(overrides), [sock], **options))
        workers[pid] = sock
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)

    def watch_parent():  # a worker whose parent was killed (kill -9) stops, not serves alone
        while os.getppid() == parent:
            time.sleep(1)
        os.kill(os.getpid(), signal.SIGTERM)

    _on_stop(stop)
    for sock in sockets:
        if not stopping:  # a stop during the start-up: no worker after it, none left waiting
            start(sock)
    while workers:
        pid, status = os.wait()
        sock = workers.pop(pid)
        if not stopping:  # its socket would take connections nobody accepts: another worker
            code = os.waitstatus_to_exitcode(status)
            log.warning("worker %d ended (status %d); starting another", pid, code)
            time.sleep(1)  # a worker that cannot start is not restarted in a tight loop
            if not stopping:
                start(sock)
    return 0
