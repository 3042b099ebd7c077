"""Webhooks: who is told of which events, their secrets, and the address rules (SPEC 11c)."""

import base64
import ipaddress
import secrets
import socket
import time
from urllib.parse import SplitResult, urlsplit

from marshmallow import Schema, fields, validate

from . import schemas
from .errors import Invalid, NotFound
from .events import TYPES, made_due
from .service import page

MOST = 100  # webhooks one service keeps
ALLOW = "set PEOPLE_SERVICE_WEBHOOK_ALLOW_PRIVATE=true to allow it"
UNKNOWN_TYPE = f"Unknown event type. Use {', '.join(TYPES)}."
URL = {"pattern": "^https?://"}  # for the OpenAPI document; target() checks the rest


class WebhookSchema(Schema):
    url = schemas.text(2000, 1, required=True, metadata=URL)
    events = fields.List(
        fields.String(validate=validate.OneOf(TYPES, error=UNKNOWN_TYPE)),
        allow_none=True,
        validate=validate.Length(min=1, error="Name at least one event type, or null for all."),
    )
    description = schemas.text(500, allow_none=True)


class WebhookPatchSchema(WebhookSchema):
    url = schemas.text(2000, 1, metadata=URL)
    enabled = fields.Boolean(truthy={True}, falsy={False})


def refused(address: str) -> str | None:
    """What kind of address a webhook may not reach this is (also inside 6to4, Teredo, mapped)."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if ip.version == 6:
        ip = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None) or ip
    kinds = ("loopback", "private", "link_local", "unspecified", "multicast", "reserved")
    kind = next((kind for kind in kinds if getattr(ip, f"is_{kind}")), None)
    if kind or not ip.is_global:  # not global: 100.64.0.0/10 (cloud metadata), ...
        return f"{(kind or 'non-global').replace('_', '-')} address"
    return None


def target(url: str, allow_private: bool) -> tuple[SplitResult, str] | None:
    """The URL's parts and the address checked (None: none now); ValueError: the rule broken."""
    if not url.isascii() or any(char <= " " or char == "\x7f" for char in url):
        raise ValueError("Must be ASCII without spaces (percent-encode other characters).")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError("Must be an http or https URL.")
    if parts.username is not None or parts.password is not None:
        raise ValueError("Must not carry credentials.")
    host, port = parts.hostname, parts.port  # a bad port: ValueError saying so
    if not host:
        raise ValueError("Must name a host.")
    name = host.rstrip(".")
    if not allow_private and (name == "localhost" or name.endswith(".localhost")):
        raise ValueError(f"Its host is a loopback name (localhost), not allowed ({ALLOW}).")
    try:
        addresses = [info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]
    except (OSError, UnicodeError):
        return None
    for reason in filter(None, map(refused, [] if allow_private else addresses)):
        raise ValueError(f"Its host resolves to a {reason}, not allowed ({ALLOW}).")
    return parts, addresses[0]


def _load(schema, data, config: dict) -> dict:
    loaded = schemas.load(schema, data)
    try:
        if "url" in loaded:
            target(loaded["url"], config["WEBHOOK_ALLOW_PRIVATE"])
    except ValueError as exc:
        raise Invalid.of_field("url", str(exc)) from None
    return loaded


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def create_webhook(store, data, config: dict) -> dict:
    """A new webhook, with its secret (shown only now)."""
    loaded, secret = _load(WebhookSchema(), data, config), new_secret()
    if (webhook := store.insert_webhook(loaded, secret, MOST)) is None:
        raise Invalid(f"This service has {MOST} webhooks, the most it keeps: delete one first.")
    return {**webhook, "secret": secret}


def get_webhook(store, webhook_id) -> dict:
    if (webhook := store.get_webhook(int(webhook_id))) is None:
        raise NotFound("No such webhook.")
    return webhook


def update_webhook(store, webhook_id, data, config: dict) -> dict:
    loaded = _load(WebhookPatchSchema(), data, config)
    if (webhook := store.update_webhook(int(webhook_id), loaded, time.time())) is None:
        raise NotFound("No such webhook.")
    if loaded.get("enabled"):
        made_due()  # its pending deliveries go now
    return webhook


def delete_webhook(store, webhook_id) -> None:
    if not store.delete_webhook(int(webhook_id)):
        raise NotFound("No such webhook.")


def rotate_secret(store, webhook_id) -> dict:
    """A new secret; for 24 hours deliveries carry a signature by the previous one too."""
    secret = new_secret()
    if not store.rotate_webhook_secret(int(webhook_id), secret, time.time() + 86_400):
        raise NotFound("No such webhook.")
    return {"secret": secret}


def list_deliveries(store, webhook_id, limit=None, offset=None) -> list[dict]:
    count, skip = page(limit, offset)
    return store.list_deliveries(int(get_webhook(store, webhook_id)["id"]), count, skip)


def retry_delivery(store, webhook_id, event_id) -> None:
    """Make a delivery pending again, now, with its schedule from the start."""
    get_webhook(store, webhook_id)
    if not store.retry_delivery(int(webhook_id), int(event_id), time.time()):
        raise NotFound("No such event.")
    made_due()
