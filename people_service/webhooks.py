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
from .events import TYPES, UNKNOWN_TYPE, made_due
from .service import page
from .store import iso

SECRET_PREFIX = "whsec_"
ROTATION_SECONDS = 24 * 3600  # the previous secret still signs this long after a rotation
MAX_URL = 2000
MOST = 100  # webhooks one service keeps
ALLOW = "set PEOPLE_SERVICE_WEBHOOK_ALLOW_PRIVATE=true to allow it"


class WebhookSchema(Schema):
    url = schemas.text(MAX_URL, 1, required=True, metadata={"pattern": "^https?://"})
    events = fields.List(
        fields.String(validate=validate.OneOf(TYPES, error=UNKNOWN_TYPE)),
        allow_none=True,
        validate=validate.Length(min=1, error="Name at least one event type, or null for all."),
    )
    description = schemas.text(500, allow_none=True)


class WebhookPatchSchema(WebhookSchema):
    url = schemas.text(MAX_URL, 1, metadata={"pattern": "^https?://"})
    enabled = fields.Boolean(truthy={True}, falsy={False})


create_schema, patch_schema = WebhookSchema(), WebhookPatchSchema()


def refused(address: str) -> str | None:
    """The kind of address a webhook may not reach (loopback, private, ...), or None: only
    global unicast addresses (also an IPv4 inside 6to4, Teredo or a mapped IPv6)."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if ip.version == 6:
        ip = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None) or ip
    for kind in ("loopback", "private", "link_local", "unspecified", "multicast", "reserved"):
        if getattr(ip, f"is_{kind}"):
            return f"{kind.replace('_', '-')} address"
    if not ip.is_global:  # shared (100.64.0.0/10: cloud metadata), benchmarking, ...
        return "non-global address"
    return None


def target(url: str, allow_private: bool) -> tuple[SplitResult, str] | None:
    """Check a URL by SPEC 11c's rules and resolve its host once: the URL's parts and the
    checked address to connect to; raises ValueError with the reason. None when the host does
    not resolve now."""
    if not url.isascii() or any(char <= " " or char == "\x7f" for char in url):
        raise ValueError("Must be ASCII without spaces (percent-encode other characters).")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError("Must be an http or https URL.")
    if parts.username is not None or parts.password is not None:
        raise ValueError("Must not carry credentials.")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        raise ValueError("Has an invalid port.") from None
    if not host:
        raise ValueError("Must name a host.")
    name = host.rstrip(".")
    if not allow_private and (name == "localhost" or name.endswith(".localhost")):
        raise ValueError(f"Its host is a loopback name (localhost), not allowed ({ALLOW}).")
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return None
    addresses = [info[4][0] for info in found]
    if not allow_private:
        for address in addresses:
            if reason := refused(address):
                raise ValueError(f"Its host resolves to a {reason}, not allowed ({ALLOW}).")
    return parts, addresses[0]


def checked(data: dict, config: dict) -> dict:
    if "url" in data:
        try:
            target(data["url"], config["WEBHOOK_ALLOW_PRIVATE"])
        except ValueError as exc:
            raise Invalid.of_field("url", str(exc)) from None
    return data


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


def _found(webhook: dict | None) -> dict:
    if webhook is None:
        raise NotFound("No such webhook.")
    return webhook


def create_webhook(store, data, config: dict) -> dict:
    """A new webhook, with its secret (shown only now)."""
    loaded = checked(schemas.load(create_schema, data), config)
    secret = new_secret()
    webhook = store.insert_webhook(
        loaded["url"], loaded.get("events"), loaded.get("description"), secret, MOST
    )
    if webhook is None:
        raise Invalid(f"This service has {MOST} webhooks, the most it keeps: delete one first.")
    return {**webhook, "secret": secret}


def get_webhook(store, webhook_id) -> dict:
    return _found(store.get_webhook(int(webhook_id)))


def update_webhook(store, webhook_id, data, config: dict) -> dict:
    """Change url, events, description or enabled (enabling sends its pending ones now)."""
    loaded = checked(schemas.load(patch_schema, data), config)
    webhook = _found(store.update_webhook(int(webhook_id), loaded, time.time()))
    if loaded.get("enabled"):
        made_due()
    return webhook


def delete_webhook(store, webhook_id) -> None:
    if not store.delete_webhook(int(webhook_id)):
        raise NotFound("No such webhook.")


def rotate_secret(store, webhook_id) -> dict:
    """A new secret; deliveries carry a signature by the previous one too for 24 hours."""
    secret = new_secret()
    if not store.rotate_webhook_secret(int(webhook_id), secret, time.time() + ROTATION_SECONDS):
        raise NotFound("No such webhook.")
    return {"secret": secret}


def list_deliveries(store, webhook_id, limit=None, offset=None) -> list[dict]:
    """A webhook's deliveries, newest event first."""
    count, skip = page(limit, offset)
    get_webhook(store, webhook_id)
    rows = store.list_deliveries(int(webhook_id), count, skip)
    return [
        {
            **row,
            "event_id": str(row["event_id"]),
            "next_attempt_at": iso(row["next_attempt_at"]) if row["status"] == "pending" else None,
        }
        for row in rows
    ]


def retry_delivery(store, webhook_id, event_id) -> None:
    """Make a delivery pending again, now, with its schedule from the start."""
    get_webhook(store, webhook_id)
    if not store.retry_delivery(int(webhook_id), int(event_id), time.time()):
        raise NotFound("No such event.")
    made_due()
