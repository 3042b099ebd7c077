"""Static limits of a GraphQL document: text size, tokens, depth and estimated cost."""

from __future__ import annotations

from functools import lru_cache

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLList,
    GraphQLNonNull,
    InlineFragmentNode,
    IntValueNode,
    OperationDefinitionNode,
    VariableNode,
    get_named_type,
    is_composite_type,
    parse,
    value_from_ast_untyped,
)

MAX_QUERY_BYTES = 100 * 1024
MAX_TOKENS = 2000


class TooComplex(GraphQLError):
    """A document over a limit; it is refused before it runs."""

    def __init__(self, message: str):
        super().__init__(message, extensions={"code": "QUERY_TOO_COMPLEX"})


class ParseFailed(GraphQLError):
    """A document that is not GraphQL."""

    def __init__(self, error: GraphQLError):
        super().__init__(
            error.message,
            source=error.source,
            positions=error.positions,
            extensions={"code": "GRAPHQL_PARSE_FAILED"},
        )


@lru_cache(maxsize=512)
def parse_document(text: str):
    """A parsed document; the same text is parsed once (bounded LRU cache)."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_QUERY_BYTES:
        raise TooComplex(f"The query is longer than {MAX_QUERY_BYTES // 1024} KiB.")
    try:
        return parse(text, max_tokens=MAX_TOKENS)
    except GraphQLError as error:
        if "tokens" in error.message:
            raise TooComplex(f"The query has more than {MAX_TOKENS} tokens.") from None
        raise ParseFailed(error) from None
    except RecursionError:
        raise TooComplex("The query is nested too deeply.") from None


def _is_list(field_type) -> bool:
    if isinstance(field_type, GraphQLNonNull):
        field_type = field_type.of_type
    return isinstance(field_type, GraphQLList)


class Measure:
    """Depth and estimated cost of one operation.

    Cost counts the objects that can come back: a list field with a `limit` argument multiplies
    its selection by the limit (its default when not given), every other object counts one.
    Each alias counts. Introspection (`__schema`, `__type`) is bounded by the schema and left
    out of both measures, so explorers can load it.
    """

    def __init__(self, schema, document, variables: dict | None):
        self.schema = schema
        self.variables = variables if isinstance(variables, dict) else {}
        self.fragments = {
            node.name.value: node
            for node in document.definitions
            if isinstance(node, FragmentDefinitionNode)
        }

    def operation(self, node: OperationDefinitionNode) -> tuple[int, int]:
        root = self.schema.get_root_type(node.operation)
        if root is None:
            return 0, 0
        given = self.variables
        defaults = {
            definition.variable.name.value: value_from_ast_untyped(definition.default_value)
            for definition in node.variable_definitions or ()
            if definition.default_value is not None
        }
        self.variables = {**defaults, **given}
        try:
            return self.selection(root, node.selection_set, 0, frozenset())
        finally:
            self.variables = given

    def selection(self, parent, selection_set, depth: int, spreads: frozenset) -> tuple[int, int]:
        deepest, cost = depth, 0
        for node in selection_set.selections:
            if self._skipped(node):
                continue
            if isinstance(node, FieldNode):
                field_depth, field_cost = self.field(parent, node, depth, spreads)
            elif isinstance(node, InlineFragmentNode):
                kind = self._type(node.type_condition, parent)
                field_depth, field_cost = self.selection(kind, node.selection_set, depth, spreads)
            elif isinstance(node, FragmentSpreadNode):
                name = node.name.value
                fragment = self.fragments.get(name)
                if fragment is None or name in spreads:  # cycles are a validation error
                    continue
                kind = self._type(fragment.type_condition, parent)
                field_depth, field_cost = self.selection(
                    kind, fragment.selection_set, depth, spreads | {name}
                )
            else:
                continue
            deepest = max(deepest, field_depth)
            cost += field_cost
        return deepest, cost

    def field(self, parent, node: FieldNode, depth: int, spreads: frozenset) -> tuple[int, int]:
        name = node.name.value
        fields = getattr(parent, "fields", None)
        if name.startswith("__") or not fields or name not in fields:
            return depth, 0
        definition = fields[name]
        named = get_named_type(definition.type)
        if node.selection_set is None or not is_composite_type(named):
            return depth + 1, 0
        deepest, inner = self.selection(named, node.selection_set, depth + 1, spreads)
        multiplier = 1
        if _is_list(definition.type):
            multiplier = self._limit(node, definition)
        return deepest, multiplier * (1 + inner)

    def _limit(self, node: FieldNode, definition) -> int:
        argument = definition.args.get("limit")
        value = argument.default_value if argument is not None else 1
        for arg in node.arguments or ():
            if arg.name.value != "limit":
                continue
            if isinstance(arg.value, IntValueNode):
                value = int(arg.value.value)
            elif isinstance(arg.value, VariableNode):
                value = self.variables.get(arg.value.name.value, value)
        if isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31:
            # not a GraphQL Int: coercion refuses it later, with the error that says why
            return 1 if argument is None else int(argument.default_value or 1)
        return max(value, 0)

    def _type(self, condition, parent):
        if condition is None:
            return parent
        return self.schema.get_type(condition.name.value) or parent

    def _skipped(self, node) -> bool:
        for directive in node.directives or ():
            name = directive.name.value
            if name not in ("skip", "include"):
                continue
            for arg in directive.arguments:
                if arg.name.value != "if":
                    continue
                value = arg.value
                if isinstance(value, VariableNode):
                    flag = self.variables.get(value.name.value)
                else:
                    flag = getattr(value, "value", None)
                if isinstance(flag, bool) and flag == (name == "skip"):
                    return True
        return False


def measure(schema, document, operation_name, variables) -> tuple[int, int]:
    """(depth, cost) of the operation that would run; of the largest when it is ambiguous."""
    meter = Measure(schema, document, variables)
    operations = [
        node for node in document.definitions if isinstance(node, OperationDefinitionNode)
    ]
    if isinstance(operation_name, str):
        operations = [op for op in operations if op.name and op.name.value == operation_name]
    results = [meter.operation(op) for op in operations] or [(0, 0)]
    return max(depth for depth, _ in results), max(cost for _, cost in results)


def check(schema, document, operation_name, variables, max_depth: int, max_cost: int) -> int:
    """The estimated cost; raises TooComplex over the depth or cost limit."""
    depth, cost = measure(schema, document, operation_name, variables)
    if depth > max_depth:
        raise TooComplex(f"The query is {depth} levels deep; the limit is {max_depth}.")
    if cost > max_cost:
        raise TooComplex(
            f"The query could return {cost} objects; the limit is {max_cost}. "
            "Ask for fewer (smaller limits) or split the query."
        )
    return cost
