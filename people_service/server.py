"""Serving the app: waitress in one process, with a first-start demo and a clean stop."""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time

from . import credentials, transfer
from .web import services

log = logging.getLogger("people_service")


def bootstrap(app, out=sys.stdout) -> str | None:
    """On a first start with an empty database: demo data and a demo key, printed once."""
    store = services(app).store
    # one transaction: of several instances starting on one empty database, one loads the demo
    with store.transaction():
        if not store.is_empty():
            return None
        people, friendships = transfer.load_demo(store)
        key = credentials.create_key(store, "demo", "read,write")
    print(f"Loaded the demo data: {people} people, {friendships} friendships.", file=out)
    print("Demo API key (shown once; send it as X-API-Key):", file=out)
    print("(lost it? `people-service keys create --name NAME` makes another one)", file=out)
    print(key, file=out, flush=True)
    return key


def _drain(server, seconds: float = 10) -> None:
    """Finish what is running and send its answers; close idle connections; accept no more.

    A connection is closed as soon as it has no request in progress and nothing left to send,
    so a keep-alive client gets the answer to what it already sent and then a closed socket.
    waitress has no public graceful stop: this reads its server and channel state, which
    tests/test_server.py checks against the pinned waitress version.
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


def serve(
    app,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    threads: int = 8,
    connection_limit: int = 1000,
    channel_timeout: int = 30,
) -> int:
    """Serve `app` with waitress until SIGTERM or SIGINT; then drain and stop (status 0)."""
    from waitress.server import create_server

    config = app.config
    server = create_server(  # binds the port: nothing is printed before this succeeds
        app,
        host=host,
        port=port,
        threads=threads,
        ident="people-service",
        # waitress refuses larger bodies itself; Flask answers 413 up to this size
        max_request_body_size=config["MAX_BODY_BYTES"] * 2,
        max_request_header_size=64 * 1024,
        connection_limit=connection_limit,
        channel_timeout=channel_timeout,
        # forwarded headers reach the app, which believes them only from TRUSTED_PROXY
        clear_untrusted_proxy_headers=False,
    )
    bootstrap(app)
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
    services(app).close()
    log.info("people-service stopped")
    return 0


def serve_workers(
    overrides: dict,
    *,
    workers: int,
    host: str = "127.0.0.1",
    port: int = 8080,
    threads: int = 8,
    connection_limit: int = 1000,
    channel_timeout: int = 30,
) -> int:
    """Serve with `workers` processes on one port, run by gunicorn's arbiter: a crashed worker
    is replaced, SIGTERM lets every worker finish its requests, then all stop."""
    from gunicorn.app.base import BaseApplication

    from . import config, create_app

    settings = config.load(overrides)

    def when_ready(arbiter) -> None:
        # the port is bound: now the demo key may be printed (the master's app is closed
        # again before any worker is forked; SQLite connections must not cross a fork)
        app = create_app(overrides)
        bootstrap(app)
        services(app).close()
        log.info(
            "people-service ready on http://%s:%s (GraphQL: /graphql; %d workers)",
            host,
            port,
            workers,
        )

    class Workers(BaseApplication):
        def load_config(self):
            options = {
                "bind": [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"],
                "workers": workers,
                "worker_class": "gthread",
                "threads": threads,
                "worker_connections": connection_limit,
                "keepalive": channel_timeout,
                "graceful_timeout": 10,
                "limit_request_field_size": 64 * 1024,
                # X-Forwarded-* are believed only from TRUSTED_PROXY, by the app itself
                "forwarded_allow_ips": settings["TRUSTED_PROXY"] or "",
                "control_socket_disable": True,
                "when_ready": when_ready,
                "proc_name": "people-service",
            }
            for name, value in options.items():
                self.cfg.set(name, value)

        def load(self):
            return create_app(overrides)  # in each worker, after the fork

    Workers().run()
    return 0


def exit_cleanly_on_sigterm() -> None:
    """For servers that leave SIGTERM alone (waitress-serve): make it a normal exit, so the
    atexit handlers run and pending usage counts are written. Servers with a handler of their
    own (gunicorn, people-service serve) keep it."""
    in_main = threading.current_thread() is threading.main_thread()
    if in_main and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
