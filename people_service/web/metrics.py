"""Prometheus metrics (prometheus-client): requests, latency, GraphQL operations, refusals."""

import os
import re

from flask import Blueprint, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)

from .. import delivery
from ..runtime import operation_names
from . import get_store
from .caller import required

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
MAX_OPERATION_NAMES = 100  # client operation names with a series of their own, per process
_NAME = re.compile(r"[_A-Za-z][_0-9A-Za-z]{0,63}")

REQUESTS = Counter(
    "people_service_requests_total",
    "HTTP requests answered, by route template, method and status.",
    ["route", "method", "status"],
)
LATENCY = Histogram(
    "people_service_request_duration_seconds",
    "Time from the first hook to the answer, by route template and method.",
    ["route", "method"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0),
)
OPERATIONS = Counter(
    "people_service_graphql_operations_total",
    "GraphQL operations run, by operation name and type.",
    ["operation", "type"],
)
COST = Histogram(
    "people_service_graphql_operation_cost",
    "The estimated cost charged for each GraphQL operation, by operation name.",
    ["operation"],
    buckets=(1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000),
)
REFUSALS = Counter(
    "people_service_rate_limit_refusals_total",
    "Requests refused with 429 by a rate limit, by route template.",
    ["route"],
)
STORE_ERRORS = Counter(
    "people_service_store_errors_total",
    "Answers the store could not give (503 unavailable, 507 full), by status.",
    ["status"],
)
bp = Blueprint("metrics", __name__)


def operation_label(name: str | None, known: set) -> str:
    """A bounded label for a client's operation name: the first MAX_OPERATION_NAMES names a
    process sees keep theirs (SPEC 12a: the cap may hold per process), the rest are "other"."""
    if not name:
        return "anonymous"
    if not _NAME.fullmatch(name):
        return "other"
    if name not in known and len(known) < MAX_OPERATION_NAMES:
        known.add(name)
    return name if name in known else "other"


def record(request, status: int, elapsed: float, operation: tuple | None) -> None:
    """Count one answered request (`operation`: GraphQL's name, type and cost, if one ran)."""
    rule = request.url_rule
    route = rule.rule if rule is not None else "unmatched"
    method = request.method if request.method in METHODS else "other"
    REQUESTS.labels(route, method, str(status)).inc()
    LATENCY.labels(route, method).observe(elapsed)
    if operation is not None:
        name, kind, cost = operation
        label = operation_label(name, operation_names())
        OPERATIONS.labels(label, kind).inc()
        COST.labels(label).observe(cost)
    if status == 429:
        REFUSALS.labels(route).inc()
    elif status in (503, 507):  # Unavailable, StorageFull
        STORE_ERRORS.labels(str(status)).inc()


@bp.get("/metrics")
@required(scope="admin")
def metrics():
    """The Prometheus text format, for callers with the scope 'admin'."""
    delivery.observe(get_store())  # the webhook backlog, as the database has it now
    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):  # every process writes its samples there
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    return Response(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
