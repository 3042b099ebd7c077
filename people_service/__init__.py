"""people-service: people, friendships and messages over REST and GraphQL; create_app wires it."""

import logging
import os
from typing import TYPE_CHECKING

from . import config as settings
from . import logs
from .config import ConfigError
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


def create_app(config: dict | None = None) -> "Flask":
    """The WSGI app; `config` overrides PEOPLE_SERVICE_* settings (same names). It opens
    nothing: each process makes its runtime on first use (runtime.py)."""
    # Flask and Ariadne are imported here, not with the package: the CLI starts without them
    from flask import Flask

    from . import web
    from .graphql import view as graphql
    from .rest import events, openapi, ops, people, webhooks
    from .runtime import Runtimes
    from .web import metrics, pages, problems, ratelimit

    options = settings.load(config)
    logging.getLogger("people_service").setLevel(str(options["LOG_LEVEL"]).upper())
    app = Flask(__name__, static_folder=None)
    app.config.update(options, MAX_CONTENT_LENGTH=options["MAX_BODY_BYTES"])
    # a WSGI server may set up logging after loading the app: the operator's is what was there
    app.config["TAKE_LOGS"] = not logs.operator_configured()
    app.config["SECRET_KEY"] = None  # the secret signs login tokens only: Flask keeps no sessions
    prepare_directory(options["DATABASE"])
    if is_url(options["DATABASE"]):
        try:
            open_store(options["DATABASE"])  # PostgreSQL's driver must be installed
        except RuntimeError as exc:
            shown = redacted(options["DATABASE"])
            raise ConfigError(f"cannot open database {shown!r}: {exc}") from None
    shared = app.extensions["people_service"] = Runtimes(app.config, options["SECRET_KEY"])
    app.url_map.converters["id"] = openapi.IdConverter
    # /person//2 is an unknown path (404), not a 308 to a URL built from the Host header
    app.url_map.merge_slashes = False
    app.url_map.redirect_defaults = False
    app.register_error_handler(Exception, problems.problem_response)
    blueprints = [people.bp, events.bp, ops.bp, ops.tokens, graphql.bp, ops.front, pages.bp]
    for bp in [*blueprints, webhooks.bp] + ([metrics.bp] if options["METRICS"] else []):
        app.register_blueprint(bp)
    # the caller before the limiter: flask-limiter's key and cost read what this step left
    app.before_request(web.start_request)
    shared.limiter = ratelimit.init_app(app, logins=ops.tokens)
    app.before_request(openapi.check_options)  # views check their own query string
    pages.init_cors(app)  # CORS_ORIGINS
    app.after_request(web.finish_request)
    app.teardown_request(web.end_request)
    app.wsgi_app = web.wsgi_middleware(app.wsgi_app, options)
    return app
