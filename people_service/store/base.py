"""The store's one interface: every query of the service, composed from one mixin per job."""

from __future__ import annotations

from .common import StoreBase
from .credentials import CredentialStore
from .idempotency import IdempotencyStore
from .messages import MessageStore
from .people import PeopleStore
from .persisted import PersistedStore
from .transfer import TransferStore


class Store(
    PeopleStore,
    MessageStore,
    CredentialStore,
    IdempotencyStore,
    PersistedStore,
    TransferStore,
    StoreBase,
):
    """People, friendships, messages, credentials and idempotency records in a SQL database.

    The SQL is written once for both backends (SQLite and PostgreSQL), which provide
    connections, transactions and their dialect (see StoreBase).
    """
