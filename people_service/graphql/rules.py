"""GraphQL limits (depth, aliases, cost) of a document, decided before anything runs."""

from __future__ import annotations

from typing import NamedTuple

from graphql import FieldNode, GraphQLError, OperationDefinitionNode, ValidationRule

from .meter import Meter
from .parsing import NESTED_TOO_DEEPLY, TooComplex, TooDeep, figure


class Budget(NamedTuple):
    """The caller's rate limit: the smallest amount of its windows, and the limit as written."""

    amount: int
    limit: str


def check_limits(
    schema,
    document,
    values,
    operation_name,
    *,
    max_depth: int,
    max_aliases: int,
    max_cost: int,
    budget: Budget | None = None,
    list_limits=None,
) -> tuple[tuple[GraphQLError, ...], int]:
    """(errors, price): the limits a document breaks (each reported once), in time linear in
    the document, and what its running operation is charged (0 when nothing will run).

    Depth and aliases hold for every operation, cost for the one that runs; values and
    list_limits as Meter takes them.
    """
    meter = Meter(schema, document, values, operation_name, list_limits)
    errors: dict[str, TooComplex] = {}
    try:
        for node in document.definitions:
            if not isinstance(node, OperationDefinitionNode):
                continue
            shape = meter.shape(node)
            if shape.depth > max_depth:
                message = (
                    f"The query is {figure(shape.depth)} levels deep; the limit is {max_depth}."
                )
                errors.setdefault("depth", TooComplex(message, node))
            if shape.aliases > max_aliases:
                message = (
                    f"The query has {figure(shape.aliases)} aliases; the limit is {max_aliases}."
                )
                errors.setdefault("aliases", TooComplex(message, node))
            cost = meter.cost() if node is meter.running else None
            if cost is None:
                continue  # not the one that runs, or nothing runs (execution says why)
            if cost > max_cost:
                message = (
                    f"The query could return {figure(cost)} objects; the limit is {max_cost}. "
                    "Ask for fewer (smaller limits) or split the query."
                )
                errors["cost"] = TooComplex(message, node)
            elif budget is not None and meter.price() > budget.amount:
                message = (
                    f"The query could return {figure(cost)} objects, more than the "
                    f"{budget.amount} your rate limit ({budget.limit}) allows in a whole window, "
                    "so it can never run. Ask for fewer (smaller limits), split the query, or "
                    "use a key with a larger limit."
                )
                errors["cost"] = TooComplex(message, node)
    except TooDeep:
        return (TooComplex(NESTED_TOO_DEEPLY),), 0
    return tuple(errors.values()), 0 if errors else (meter.price() or 0)


class NoIntrospection(ValidationRule):
    """With INTROSPECTION off, `__schema` and `__type` are refused (`__typename` stays)."""

    def enter_field(self, node: FieldNode, *_args):
        name = node.name.value
        if name.startswith("__") and name != "__typename":
            self.report_error(
                GraphQLError(f"Cannot query '{name}': introspection is disabled.", node)
            )
