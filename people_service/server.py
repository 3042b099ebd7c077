"""Serving the app: waitress in one process, with a first-start demo and a clean stop."""

from __future__ import annotations

import io
import logging
import signal
import socket
import sys
import threading
import time

from waitress.channel import HTTPChannel
from waitress.server import BaseWSGIServer
from waitress.task import WSGITask

from . import credentials, transfer
from .errors import Conflict
from .web import services
from .web.lifecycle import REFUSED

log = logging.getLogger("people_service")

# waitress reads a chunked body's transfer coding too: room for it above MAX_BODY_BYTES, so that
# the app, which sees the decoded length, decides about bodies near the limit
CHUNKED_SLACK = 64 * 1024
MAX_HEADER_BYTES = 64 * 1024
# how long a connection whose request was refused keeps reading (and dropping) what still comes
LINGER_SECONDS = 2.0


# -- waitress, answering as the API does --------------------------------------------------
# waitress has no public hook for how it frames answers or for its own refusals, so these
# classes extend its channel and tasks. They depend on waitress internals (HTTPChannel's
# task_class and error_task_class, WSGITask's build_response_header, set_close_on_finish and
# get_environment, the parser's error): pyproject.toml pins waitress, and
# tests/test_waitress.py fails loudly when any of them moves.


class AnswerTask(WSGITask):
    """A WSGI task whose answers without a body (1xx, 204, 304) keep the connection open.

    waitress 3.0.2 leaves Content-Length out of these answers, as RFC 9112 wants, and then
    treats every HTTP/1.1 answer without one as an answer it cannot frame: it adds
    `Connection: close` and closes. An answer without a body ends with its headers, so the
    connection can go on to the next request.
    """

    _keep_open = False

    def build_response_header(self):
        client_closes = self.request.headers.get("CONNECTION", "").lower() == "close"
        self._keep_open = (
            self.version == "1.1"
            and not self.has_body
            and not client_closes
            and not self.close_on_finish
        )
        try:
            return super().build_response_header()
        finally:
            self._keep_open = False

    def set_close_on_finish(self) -> None:
        # while a bodiless HTTP/1.1 answer is framed, the only reason left to close is
        # "no Content-Length", which such an answer never needs
        if not self._keep_open:
            super().set_close_on_finish()


class RefusalTask(AnswerTask):
    """A request waitress refused before the app could see it, answered by the app.

    Bodies over the limit (announced or chunked), headers over the limit and requests waitress
    cannot parse reach the app as a request without a body that carries the refusal under
    `REFUSED`; the app answers it as every other error (problem+json, X-Request-ID, an access
    log line). waitress never reads more of the body than the limit; the connection closes
    after the answer, since the rest of what the client sends is not read.
    """

    def get_environment(self):
        if self.environ is None:
            error = self.request.error
            if getattr(self.request, "path", None) is None:
                # the request line itself did not parse: answer as if to GET /
                stand_in = self.channel.parser_class(self.channel.adj)
                stand_in.parse_header(b"GET / HTTP/1.0\r\n")
                stand_in.error = error
                self.request = stand_in
            environ = super().get_environment()
            environ.pop("CONTENT_LENGTH", None)
            environ["wsgi.input"] = io.BytesIO()
            detail = error.body if error.code in (400, 501) and error.body else None
            environ[REFUSED] = (error.code, detail)
        return self.environ

    def execute(self):
        self.set_close_on_finish()  # before the headers go out: they say Connection: close
        self.channel.refused = True
        super().execute()


class Channel(HTTPChannel):
    """waitress's connection, with the tasks above and a lingering close after a refusal.

    After refusing a request whose rest it did not read, waitress closes the socket with that
    rest unread, and the kernel answers the client's next bytes with a reset, which can destroy
    the answer before the client reads it. Here the connection stops sending (FIN after the
    answer) and reads and discards for up to LINGER_SECONDS before it closes, as web servers
    do; nothing read is kept.
    """

    task_class = AnswerTask
    error_task_class = RefusalTask
    refused = False
    linger_until: float | None = None

    def handle_close(self):
        if self.refused and self.linger_until is None and self.connected:
            try:
                self.socket.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            else:
                self.linger_until = time.monotonic() + LINGER_SECONDS
                self.will_close = False
                return
        if self.connected:
            super().handle_close()

    def readable(self):
        return self.linger_until is not None or super().readable()

    def handle_read(self):
        if self.linger_until is None:
            return super().handle_read()
        try:
            data = self.recv(self.adj.recv_bytes)  # b"" (and closed) once the client is done
        except OSError:
            data = b""
        if not data or time.monotonic() > self.linger_until:
            self.handle_close()


def create_server(app, *, host: str, port: int, threads: int, **adjustments):
    """A waitress server for `app` whose answers and refusals are the app's (see Channel)."""
    from waitress.server import create_server as waitress_server

    sockets: dict = {}
    server = waitress_server(
        app,
        map=sockets,
        host=host,
        port=port,
        threads=threads,
        ident="people-service",
        # bodies over the limit are refused after MAX_BODY_BYTES (+ chunk framing) were read;
        # the app answers the refusal (413 problem+json), so nothing unbounded is buffered
        max_request_body_size=app.config["MAX_BODY_BYTES"] + CHUNKED_SLACK,
        max_request_header_size=MAX_HEADER_BYTES,
        # forwarded headers reach the app, which believes them only from TRUSTED_PROXY
        clear_untrusted_proxy_headers=False,
        **adjustments,
    )
    for dispatcher in sockets.values():
        if isinstance(dispatcher, BaseWSGIServer):
            dispatcher.channel_class = Channel
    return server


def bootstrap(app, out=sys.stdout) -> str | None:
    """On a first start with an empty database: demo data and a demo key, printed once."""
    store = services(app).store
    # one transaction, the key's unique name first: of several instances starting on one empty
    # database, one loads the demo and the others find the name taken
    try:
        with store.transaction():
            if not store.is_empty():
                return None
            key = credentials.create_key(store, "demo", "read,write")
            people, friendships = transfer.load_demo(store)
    except Conflict:
        return None
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
    server = create_server(  # binds the port: nothing is printed before this succeeds
        app,
        host=host,
        port=port,
        threads=threads,
        connection_limit=connection_limit,
        channel_timeout=channel_timeout,
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

    from . import config, create_app, prepare_directory

    settings = config.load(overrides)
    prepare_directory(settings["DATABASE"])  # refused before gunicorn starts and logs

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
                "on_exit": lambda arbiter: log.info("people-service stopped"),
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
