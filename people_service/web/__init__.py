"""The HTTP layer: request plumbing, callers, rate limits and the services one app holds."""

from dataclasses import dataclass, field

from flask import current_app

from ..credentials import UsageTracker
from ..store import Store


@dataclass(eq=False)  # compared and hashed by identity: one per app
class Services:
    """What the views of one app share, built once by create_app."""

    store: Store
    usage: UsageTracker
    token_secret: str  # signs and checks login tokens
    unlimited: set[str] = field(default_factory=set)  # endpoints never rate limited
    limiter: object | None = None  # flask-limiter's, set once the blueprints are registered
    explorer: str | None = None  # the explorer page, rendered once, on first use
    openapi: dict | None = None  # the OpenAPI document, built once, on first use
    introspection: dict = field(default_factory=dict)  # kept introspection answers

    def close(self) -> None:
        """Write pending usage counts and close the store's connections (idempotent)."""
        from .. import delivery  # not at import: server.py sets up the metrics first

        delivery.stop_for(self, wait=2)  # its webhook worker, once its attempts are recorded
        self.usage.stop()
        self.store.close()


def services(app=None) -> Services:
    """The services of `app` (default: the app of the current request)."""
    return (app or current_app).extensions["people_service"]


def get_store() -> Store:
    return services().store
