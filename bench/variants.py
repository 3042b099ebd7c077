"""Serve the project with one of its speed-ups switched off, for bench/run.py's on/off pairs.

Usage: python bench/variants.py --off NAME -- serve --db PATH --port N --threads 4
       python bench/variants.py --list

It imports people_service, patches the named speed-up away in this process only, then runs
the `people-service` command with the arguments after `--`, as the console script does. The
code under people_service/ carries no benchmark switch: each patch puts back the plain way
the speed-up stands in for (graphql-core's own executor, flask-limiter's own hooks, a write
per request, ...), answering the same bodies. A patch whose target has moved fails at once
(`patch` checks that the attribute exists), so a stale variant never measures the speed-up
as if it were off. `--off none` patches nothing: the gain of that pair is the run's noise.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The scenarios of bench/run.py that the variants are measured on.
PERSON = "GET /person/{id}"
MESSAGE = "POST /message"
ONE_PERSON = "GraphQL GET one person"
NESTED = "GraphQL POST nested (4,440 people)"


@dataclass(frozen=True)
class Variant:
    name: str
    on: str  # the speed-up, as the code has it
    off: str  # what the variant does instead
    scenario: str  # the bench/run.py scenario it is measured on
    apply: Callable[[], None]


def patch(owner, attribute: str, replacement) -> None:
    """Set owner.attribute, which must exist (a moved target must not pass unnoticed)."""
    if not hasattr(owner, attribute):
        raise SystemExit(f"variants.py: {owner!r} has no {attribute!r}: update the variant")
    setattr(owner, attribute, replacement)


def limiter_charge() -> None:
    from flask_limiter import Limiter

    from people_service.web import ratelimit

    def build(app, uri):
        limiter = Limiter(
            ratelimit.limit_key,
            # one limit per caller across the whole API, as flask-limiter spells it
            application_limits=[ratelimit.caller_limit],
            headers_enabled=True,
            storage_uri=uri,
            strategy=ratelimit.STRATEGY,
            key_prefix=app.config["RATE_LIMIT_PREFIX"],
        )
        limiter.init_app(app)  # not registered beforehand: it adds its per-request hooks
        return limiter

    patch(ratelimit.RateLimits, "_limiter", staticmethod(build))
    patch(ratelimit.RateLimits, "check", lambda self: None)
    patch(ratelimit.RateLimits, "add_headers", lambda self, response: response)


def document_cache() -> None:
    from people_service.graphql import parsing, view

    patch(parsing, "parse_document", parsing.parse_document.__wrapped__)
    patch(view, "_validate", view._validate.__wrapped__)
    patch(view, "_check_limits_cached", view._check_limits_cached.__wrapped__)


def leaf_executor() -> None:
    from people_service.graphql import view

    patch(view, "LeafExecutor", None)  # graphql-core's default executor


def batching() -> None:
    from people_service.graphql import batch

    def load(self, info, obj, field, key_of, fetch):
        key = key_of(obj)
        return fetch([key]).get(key)  # one store call per object

    patch(batch.Batches, "load", load)
    patch(batch.Batches, "register", lambda self, path, objects: None)


def access_log_queue() -> None:
    from people_service import logs
    from people_service.web.lifecycle import RequestIdFilter

    def install(stream=None, level=logging.INFO):
        if logs._installed is not None:
            return
        output = logging.StreamHandler(stream) if stream else logs._Stderr()
        output.setFormatter(logs._Formatters())
        output.addFilter(RequestIdFilter())
        package = logging.getLogger("people_service")
        package.addHandler(output)  # written by the request's thread
        if package.level == logging.NOTSET:
            package.setLevel(level)
        logs._installed = output

    patch(logs, "install", install)


def etag_once() -> None:
    from people_service.rest import people
    from people_service.web.jsonio import json_response

    def person_response(person, status=200, headers=None):
        response = json_response(person, status, headers)
        response.set_etag(people.etag_of(person))  # the person encoded a second time
        if status == 201:
            response.headers["Location"] = f"/person/{person['id']}"
        return response

    patch(people, "_person_response", person_response)


def usage_batching() -> None:
    from people_service.store import iso
    from people_service.usage import UsageTracker

    def hit(self, caller):
        self.store.add_usage({(caller.kind, caller.id): (1, iso(time.time()))})

    patch(UsageTracker, "hit", hit)


def connection_pool() -> None:
    from people_service.store.sqlite import SQLiteStore

    patch(SQLiteStore, "POOL_SIZE", 0)  # every request opens (and closes) its connection


def waitress_queue_log() -> None:
    queue_log = logging.getLogger("waitress.queue")
    # serve() cannot silence it: "Task queue depth is N" goes to stderr as waitress writes it
    patch(queue_log, "setLevel", lambda level: None)


def waitress_channel() -> None:
    from waitress.channel import HTTPChannel

    from people_service import server

    patch(server, "Channel", HTTPChannel)  # waitress's own channel and tasks


def request_ids() -> None:
    from people_service.web import lifecycle

    patch(lifecycle, "new_request_id", lambda: uuid.uuid4().hex)


def no_sessions() -> None:
    from flask.sessions import SecureCookieSessionInterface

    from people_service.web import lifecycle

    patch(lifecycle, "NoSessions", SecureCookieSessionInterface)  # Flask's default


def message_insert() -> None:
    from people_service import schemas, service

    def send_message(store, viewer, data):
        message = schemas.load(schemas.message_schema, data)
        with store.transaction():
            person = service.get_person(store, message["person_id"])  # NotFound first
            row = store.insert_message(
                {
                    "person_id": int(person["id"]),
                    "sender_id": viewer.sender_id,
                    "sender": viewer.name,
                    "content": message["content"],
                }
            )
        return service.message_out(row)

    patch(service, "send_message", send_message)


NONE = "none"

VARIANTS = {
    variant.name: variant
    for variant in (
        Variant(
            NONE,
            "(nothing: a second server of the same code)",
            "nothing is switched off: its gain is the run's noise",
            PERSON,
            lambda: None,
        ),
        Variant(
            "limiter-charge",
            "one charge per request (RateLimits.check)",
            "flask-limiter's own hooks with application_limits",
            PERSON,
            limiter_charge,
        ),
        Variant(
            "access-log-queue",
            "access lines through a QueueHandler, written by a thread",
            "a StreamHandler written by the request's thread",
            PERSON,
            access_log_queue,
        ),
        Variant(
            "usage-batching",
            "usage counted in memory, flushed every USAGE_FLUSH_SECONDS",
            "a usage UPDATE transaction per request",
            PERSON,
            usage_batching,
        ),
        Variant(
            "connection-pool",
            "idle SQLite connections kept for the next requests",
            "a connection opened and closed per request",
            PERSON,
            connection_pool,
        ),
        Variant(
            "waitress-queue-log",
            "waitress's 'Task queue depth' warnings silenced",
            "the warnings written to stderr",
            PERSON,
            waitress_queue_log,
        ),
        Variant(
            "etag-once",
            "a person encoded once, the ETag hashed from the body's bytes",
            "the person encoded again for the ETag",
            PERSON,
            etag_once,
        ),
        Variant(
            "request-ids",
            "request ids from a per-process prefix and a counter",
            "uuid4() per request",
            PERSON,
            request_ids,
        ),
        Variant(
            "no-sessions",
            "no session interface (NoSessions)",
            "Flask's cookie session interface",
            PERSON,
            no_sessions,
        ),
        Variant(
            "waitress-channel",
            "serve's Channel and AnswerTask (bodiless answers keep the connection; a "
            "correctness extension, measured for its cost)",
            "waitress's own HTTPChannel and WSGITask",
            PERSON,
            waitress_channel,
        ),
        Variant(
            "message-insert",
            "a message sent as one INSERT (the foreign key reports an unknown person)",
            "a transaction: SELECT the person, then INSERT",
            MESSAGE,
            message_insert,
        ),
        Variant(
            "document-cache",
            "parsed, validated and measured documents cached by text",
            "parse, validate and measure on every request",
            ONE_PERSON,
            document_cache,
        ),
        Variant(
            "leaf-executor",
            "LeafExecutor builds objects of plain scalar fields in one loop",
            "graphql-core's default executor",
            NESTED,
            leaf_executor,
        ),
        Variant(
            "batching",
            "path-keyed batching: one store call per field and level",
            "one store call per object",
            NESTED,
            batching,
        ),
    )
}


def main() -> int:
    argv = sys.argv[1:]
    rest: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, rest = argv[:at], argv[at + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--off", choices=list(VARIANTS))
    parser.add_argument("--list", action="store_true", help="print the variants and stop")
    args = parser.parse_args(argv)
    if args.list or not args.off:
        for variant in VARIANTS.values():
            print(f"{variant.name}: {variant.on}; off: {variant.off} [{variant.scenario}]")
        return 0
    VARIANTS[args.off].apply()
    from people_service.cli import main as people_service

    return people_service(rest)


if __name__ == "__main__":
    sys.exit(main())
