"""REST resources for webhooks and their deliveries (scope admin)."""

import functools

from flask import Blueprint, current_app, request, url_for
from marshmallow import Schema, fields
from werkzeug.wrappers import Response

from .. import events, schemas, webhooks
from ..web import get_store
from ..web.caller import required
from ..web.jsonio import PATCH_TYPES, json_body, json_response
from .openapi import api

bp = Blueprint("webhooks", __name__)
admin = required(scope="admin")
TEXT = functools.partial(fields.String, required=True)  # fields of answers: always there
MAYBE = functools.partial(TEXT, allow_none=True)


class WebhookOutSchema(Schema):
    id, url = TEXT(), TEXT()
    events = fields.List(fields.String(), required=True, allow_none=True)
    description = MAYBE()
    enabled = fields.Boolean(required=True)
    created_at = fields.String(required=True, metadata={"format": "date-time"})


class WebhookCreatedSchema(WebhookOutSchema):
    secret = TEXT()


class DeliverySchema(Schema):
    event_id, event_type = TEXT(), TEXT()
    status = fields.String(required=True, metadata={"enum": ["pending", "succeeded", "failed"]})
    attempts = fields.Integer(required=True)
    last_status_code = fields.Integer(required=True, allow_none=True)
    last_error, next_attempt_at, delivered_at = MAYBE(), MAYBE(), MAYBE()


WEBHOOK = ("The webhook (never its secret).", WebhookOutSchema)
SECRET = Schema.from_dict({"secret": TEXT()}, name="Secret")


@bp.post("/webhooks")
@admin
@api(
    body=webhooks.WebhookSchema,
    ok={201: ("Created; the secret is shown only here.", WebhookCreatedSchema, "Location")},
)
def create_webhook():
    """Create a webhook: the events committed from now on, of its types, are posted to its URL"""
    webhook = webhooks.create_webhook(get_store(), json_body(), current_app.config)
    location = url_for("webhooks.get_webhook", webhook_id=webhook["id"])
    return json_response(webhook, 201, {"Location": location})


@bp.get("/webhooks")
@admin
@api(ok={200: ("The webhooks.", WebhookOutSchema(many=True))})
def list_webhooks():
    """List the webhooks"""
    return json_response(get_store().list_webhooks())


@bp.get("/webhooks/<id:webhook_id>")
@admin
@api(ok={200: WEBHOOK})
def get_webhook(webhook_id):
    """Get a webhook"""
    return json_response(webhooks.get_webhook(get_store(), webhook_id))


@bp.patch("/webhooks/<id:webhook_id>")
@admin
@api(body=webhooks.WebhookPatchSchema, ok={200: WEBHOOK})
def update_webhook(webhook_id):
    """Change a webhook's url, events, description or enabled (enabling sends what waited)"""
    data = json_body(PATCH_TYPES)
    return json_response(webhooks.update_webhook(get_store(), webhook_id, data, current_app.config))


@bp.delete("/webhooks/<id:webhook_id>")
@admin
@api(ok={204: ("Deleted.", None)})
def delete_webhook(webhook_id):
    """Delete a webhook and its deliveries"""
    webhooks.delete_webhook(get_store(), webhook_id)
    return Response(status=204)


@bp.post("/webhooks/<id:webhook_id>/rotate-secret")
@admin
@api(ok={200: ("The new secret, shown only here.", SECRET)})
def rotate_secret(webhook_id):
    """A new secret; for 24 hours deliveries are signed by the new and the previous one"""
    return json_response(webhooks.rotate_secret(get_store(), webhook_id))


@bp.get("/webhooks/<id:webhook_id>/deliveries")
@admin
@api(query=schemas.PageSchema, ok={200: ("A page of deliveries.", DeliverySchema(many=True))})
def list_deliveries(webhook_id):
    """A webhook's deliveries, one per event, newest first"""
    args = request.args.to_dict()
    return json_response(webhooks.list_deliveries(get_store(), webhook_id, **args))


@bp.post("/webhooks/<id:webhook_id>/deliveries/<id:event_id>/retry")
@admin
@api(ok={202: ("The delivery is pending again.", None)})
def retry_delivery(webhook_id, event_id):
    """Send an event to the webhook again, now, with a fresh retry schedule"""
    webhooks.retry_delivery(get_store(), webhook_id, event_id)
    return Response(status=202)


def openapi_webhooks() -> dict:
    """The OpenAPI `webhooks` object: each event type, posted signed by Standard Webhooks to
    each webhook that takes it (2xx: received; 410 disables the webhook; the rest is retried)."""
    event = {"$ref": "#/components/schemas/Event"}
    body = {"required": True, "content": {"application/json": {"schema": event}}}
    post = {"requestBody": body, "responses": {"2XX": {"description": "Received."}}}
    return {name: {"post": {**post, "description": data}} for name, data in events.TYPES.items()}
