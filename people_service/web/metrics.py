"""Prometheus metrics (prometheus-client): requests, latency, GraphQL operations, refusals."""

import os
import re
import threading
import time

from flask import Blueprint, Response, g, request
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
from . import get_store
from .caller import authenticate, check_scope

# prometheus-client's switch: every process writes its samples there and a scrape adds them up
MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Distinct client operation names with a series of their own, so the scrape stays bounded
MAX_OPERATION_NAMES = 100
_NAME = re.compile(r"[_A-Za-z][_0-9A-Za-z]{0,63}")
STORE_ERROR_STATUSES = frozenset({503, 507})  # Unavailable, StorageFull

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

_names: set[str] = set()
_names_lock = threading.Lock()
bp = Blueprint("metrics", __name__)


def operation_label(name: str | None) -> str:
    """A bounded label for a client's operation name."""
    if not name:
        return "anonymous"
    if not _NAME.fullmatch(name):
        return "other"
    if name in _names:
        return name
    with _names_lock:
        if len(_names) >= MAX_OPERATION_NAMES:
            return "other"
        _names.add(name)
    return name


def _record(response: Response) -> Response:
    rule = request.url_rule
    route = rule.rule if rule is not None else "unmatched"
    method = request.method if request.method in METHODS else "other"
    status = response.status_code
    REQUESTS.labels(route, method, str(status)).inc()
    started = g.get("started")  # set by the first hook (web/lifecycle.py)
    if started is not None:
        LATENCY.labels(route, method).observe(time.perf_counter() - started)
    operation = g.get("graphql_operation")  # (name, type, cost), set once an operation ran
    if operation is not None:
        name, kind, cost = operation
        OPERATIONS.labels(operation_label(name), kind).inc()
        COST.labels(operation_label(name)).observe(cost)
    if status == 429:
        REFUSALS.labels(route).inc()
    elif status in STORE_ERROR_STATUSES:
        STORE_ERRORS.labels(str(status)).inc()
    return response


@bp.get("/metrics")
def metrics():
    """The Prometheus text format, for callers with the scope 'admin'."""
    check_scope(authenticate(), "admin")
    delivery.observe(get_store())  # the webhook backlog, as the database has it now
    registry = REGISTRY
    if os.environ.get(MULTIPROCESS_DIR):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    return Response(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


def init_app(app) -> None:
    """Count every request once it is answered."""
    app.after_request(_record)  # so it runs last of the after_request hooks
    app.register_blueprint(bp)
