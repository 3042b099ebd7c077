"""Operational endpoints: health, the OpenAPI document, and who the caller is."""

from flask import Blueprint, current_app, request

from .. import service
from ..web import get_store, services
from ..web.caller import caller_summary, current_caller, required
from ..web.jsonio import json_response
from . import shapes
from .openapi import build_spec, doc
from .params import strict_query

bp = Blueprint("ops", __name__)
strict_query(bp)


@bp.get("/health")
@doc(
    "Whether the service and its database answer",
    ok={
        200: ("Healthy.", shapes.HealthSchema, []),
        503: ("The database is missing, read-only or unreadable.", shapes.HealthSchema, []),
    },
    auth=False,
    tag="operations",
)
def health():
    database = service.check_health(get_store())
    if database == "ok":
        return json_response({"status": "ok", "database": "ok"})
    return json_response({"status": "unavailable", "database": database}, 503)


@bp.get("/openapi.json")
def openapi():
    ext = services()
    if ext.openapi is None:
        ext.openapi = build_spec(current_app, ext.unlimited)
    if request.script_root:  # mounted under a prefix: the paths are under it too
        return json_response({**ext.openapi, "servers": [{"url": request.script_root}]})
    return json_response(ext.openapi)


@bp.get("/me")
@required
@doc(
    "Who the caller is, its limit and its usage",
    ok={200: ("The caller.", shapes.CallerSchema, [])},
    tag="operations",
)
def me():
    return json_response(caller_summary(current_caller()))
