"""people-service: people, friendships and messages over REST and GraphQL; create_app wires it."""

import atexit
import logging
import os
import weakref
from typing import TYPE_CHECKING

from . import config as settings
from .config import ConfigError
from .credentials import UsageTracker, load_secret
from .store import is_url, open_store, redacted

if TYPE_CHECKING:
    from flask import Flask

__all__ = ["create_app", "ConfigError", "prepare_directory"]


def prepare_directory(database: str) -> None:
    """Create the directory of the default database if it is missing; any other SQLite file
    may be created, but only in a directory that exists. Raises ConfigError."""
    directory = os.path.dirname(os.path.abspath(database))
    if is_url(database) or os.path.exists(directory):
        return
    if database != settings.DEFAULTS["DATABASE"]:
        # a mistyped path must not leave a tree of directories behind it
        raise ConfigError(f"no directory {directory} for the database {database}; create it first")
    os.makedirs(directory)  # data/ of a fresh clone or install: one command serves the demo


# Every app of this process, whose pending usage counts are written at exit (whatever served it)
_apps: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_apps() -> None:
    for services in list(_apps):
        services.close()


def create_app(config: dict | None = None) -> "Flask":
    """The WSGI app; `config` overrides PEOPLE_SERVICE_* settings (same names)."""
    # Flask and Ariadne are imported here, not with the package: the CLI starts without them
    from .graphql import view as graphql
    from .rest import openapi, ops, people, webhooks
    from .web import Services, lifecycle, metrics, pages, problems, ratelimit

    options = settings.load(config)
    # the level only: handlers are set up by the serving code or the first request (lifecycle)
    logging.getLogger("people_service").setLevel(str(options["LOG_LEVEL"]).upper())
    app = lifecycle.App(__name__, static_folder=None)
    app.config.update(options)
    app.config["MAX_CONTENT_LENGTH"] = options["MAX_BODY_BYTES"]
    database = options["DATABASE"]
    prepare_directory(database)
    try:
        store = open_store(database)
        store.upgrade_schema()
    except Exception as exc:  # any failure here is a configuration problem for the operator
        raise ConfigError(f"cannot open database {redacted(database)!r}: {exc}") from None
    try:
        token_secret = load_secret(options, store)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read or create the secret key: {exc}") from None
    # the secret signs login tokens only: Flask keeps no sessions, so it needs none
    app.config["SECRET_KEY"] = None
    services = app.extensions["people_service"] = Services(
        store=store,
        usage=UsageTracker(store, options["USAGE_FLUSH_SECONDS"]),
        token_secret=token_secret,
        unlimited={"ops.health"},
    )
    app.url_map.converters["id"] = openapi.IdConverter
    # /person//2 is an unknown path (404), not a 308 to a URL built from the Host header
    app.url_map.merge_slashes = False
    app.url_map.redirect_defaults = False
    if options["METRICS"]:
        metrics.init_app(app)  # first: its after_request runs last, once the answer is final
    problems.init_app(app)
    lifecycle.init_app(app)  # before the limiter: its after_request must run after the limiter's
    blueprints = (people.bp, people.messages, ops.bp, ops.tokens, graphql.bp, ops.front, pages.bp)
    for bp in (*blueprints, webhooks.bp):
        app.register_blueprint(bp)
    pages.init_cors(app)  # before the limiter: preflights are answered before anyone is charged
    services.limiter = ratelimit.init_app(
        app, unlimited=services.unlimited, handshake={"tokens.issue_token"}
    )
    _apps.add(services)
    return app
