"""GraphQL limits (depth, aliases, cost) as validation rules, decided before anything runs."""

from __future__ import annotations

from typing import NamedTuple

from graphql import (
    SKIP,
    FieldNode,
    GraphQLError,
    ValidationRule,
    validate,
)

from .meter import Meter
from .parsing import NESTED_TOO_DEEPLY, TooComplex, TooDeep, figure

# -- the rules -----------------------------------------------------------------------------------


class Budget(NamedTuple):
    """The caller's rate limit: the smallest amount of its windows, and the limit as written."""

    amount: int
    limit: str


class LimitRule(ValidationRule):
    """A limit on each operation of a document, measured by the request's Meter.

    Fragments are measured where they are spread, so the rule skips their definitions. The
    rules of one request share `reported`: each limit is reported once per document.
    """

    meter: Meter
    reported: set

    def enter_operation_definition(self, node, *_args):
        try:
            self.check(node)
        except TooDeep:
            self.report_once("nesting", NESTED_TOO_DEEPLY, node)
        return SKIP

    def enter_fragment_definition(self, *_args):
        return SKIP

    def report_once(self, limit: str, message: str, node) -> None:
        if limit not in self.reported:
            self.reported.add(limit)
            self.report_error(TooComplex(message, node))

    def check(self, operation) -> None:
        raise NotImplementedError


def limit_rules(
    meter: Meter, *, max_depth: int, max_aliases: int, max_cost: int, budget: Budget | None = None
) -> list[type[ValidationRule]]:
    """The validation rules of one request's limits, bound to its Meter (as Ariadne's
    cost_validator binds its variables)."""

    class DepthLimit(LimitRule):
        def check(self, operation):
            depth = meter.shape(operation).depth
            if depth > max_depth:
                message = f"The query is {figure(depth)} levels deep; the limit is {max_depth}."
                self.report_once("depth", message, operation)

    class AliasLimit(LimitRule):
        def check(self, operation):
            aliases = meter.shape(operation).aliases
            if aliases > max_aliases:
                message = f"The query has {figure(aliases)} aliases; the limit is {max_aliases}."
                self.report_once("aliases", message, operation)

    class CostLimit(LimitRule):
        def check(self, operation):
            if operation is not meter.running:
                return
            cost = meter.cost()
            if cost is None:
                return  # nothing will run: execution reports why (variables, operation name)
            if cost > max_cost:
                message = (
                    f"The query could return {figure(cost)} objects; the limit is {max_cost}. "
                    "Ask for fewer (smaller limits) or split the query."
                )
                self.report_once("cost", message, operation)
            elif budget is not None and meter.price() > budget.amount:
                message = (
                    f"The query could return {figure(cost)} objects, more than the "
                    f"{budget.amount} your rate limit ({budget.limit}) allows in a whole window, "
                    "so it can never run. Ask for fewer (smaller limits), split the query, or "
                    "use a key with a larger limit."
                )
                self.report_once("cost", message, operation)

    reported: set[str] = set()
    rules = [DepthLimit, AliasLimit, CostLimit]
    for rule in rules:
        rule.meter, rule.reported = meter, reported
    return rules


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
    """(errors, price): the limits a document breaks, in time linear in the document, and what
    its running operation is charged (0 when nothing will run); values and list_limits as Meter
    takes them."""
    meter = Meter(schema, document, values, operation_name, list_limits)
    rules = limit_rules(
        meter, max_depth=max_depth, max_aliases=max_aliases, max_cost=max_cost, budget=budget
    )
    errors = validate(schema, document, rules)
    if any(not isinstance(error, TooComplex) for error in errors):
        # validate() aborts by itself when fragments nest past what it can recurse through
        return (TooComplex(NESTED_TOO_DEEPLY),), 0
    return tuple(errors), 0 if errors else (meter.price() or 0)


class NoIntrospection(ValidationRule):
    """With INTROSPECTION off, `__schema` and `__type` are refused (`__typename` stays)."""

    def enter_field(self, node: FieldNode, *_args):
        name = node.name.value
        if name.startswith("__") and name != "__typename":
            self.report_error(
                GraphQLError(f"Cannot query '{name}': introspection is disabled.", node)
            )
