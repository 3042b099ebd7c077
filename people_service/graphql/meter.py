"""Measuring a GraphQL operation: depth, aliases and the cost of what it runs, in linear time."""

from __future__ import annotations

from typing import NamedTuple

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    GraphQLError,
    GraphQLIncludeDirective,
    GraphQLSkipDirective,
    InlineFragmentNode,
    NameNode,
    TypeMetaFieldDef,
    get_named_type,
    get_nullable_type,
    get_operation_ast,
    is_abstract_type,
    is_composite_type,
    is_enum_type,
    is_input_object_type,
    is_interface_type,
    is_list_type,
    is_object_type,
    is_wrapping_type,
)
from graphql.execution.values import (
    get_argument_values,
    get_directive_values,
)

from .parsing import (
    CEILING,
    INTROSPECTION_DISCOUNT,
    INTROSPECTION_TYPES,
    MAX_NESTING,
    UNBOUNDED_LIST,
    TooDeep,
    saturated,
)


class Shape(NamedTuple):
    depth: int
    aliases: int


# a field node without arguments: the values it gets are the schema's defaults
_BARE = FieldNode(name=NameNode(value="limit"), arguments=())
_BUSY = object()  # a fragment being measured: a spread of it closes a cycle (a validation error)


def introspective(operation) -> bool:
    """Whether an operation asks only for introspection fields: its answer is the same for
    every caller and comes from the schema in memory."""
    return operation is not None and all(
        isinstance(node, FieldNode) and node.name.value.startswith("__")
        for node in operation.selection_set.selections
    )


class Meter:
    """Depth, aliases and cost of a document's operations, for one request's coerced variables
    (graphql-core's VariableValues, as an executor holds them).

    Each walk memoizes fragments: a fragment is measured once however often it is spread (its
    measure does not depend on where), and every count saturates at CEILING, so measuring takes
    time linear in the document whatever its fragments do.

    Depth counts levels of fields; introspection fields (`__schema`, `__type`, `__typename`) add
    none, graphql-core's MaxIntrospectionDepthRule bounds those. Aliases count every aliased
    field, once per spread of the fragment holding it. Cost counts the objects that can come
    back with the values the operation will run with: schema defaults, coerced variables and
    @skip/@include as they say; a list field multiplies its selection by its `limit`, each field
    of the Query or Mutation type counts at least one (it runs a resolver), and introspection
    counts the objects it returns, which the schema fixes.
    """

    def __init__(self, schema, document, values=None, operation_name=None, list_limits=None):
        self.schema = schema
        self.list_limits = list_limits or {}  # "Type.field": (lowest, highest) `limit` it runs
        self.fragments = {
            node.name.value: node
            for node in document.definitions
            if isinstance(node, FragmentDefinitionNode)
        }
        # the operation that will run, and its coerced variables (None: nothing will run)
        self.running = get_operation_ast(document, operation_name)
        self.values = values
        self._roots = {schema.query_type, schema.mutation_type} - {None}
        self._operations: dict = {}
        self._shapes: dict = {}
        self._costs: dict = {}
        self._introspection: dict = {}
        self._cost = _BUSY

    # -- depth and aliases, of every operation -------------------------------------------------

    def shape(self, operation) -> Shape:
        """Depth and aliases of an operation; raises TooDeep past MAX_NESTING."""
        key = id(operation)
        if key not in self._operations:
            running = operation is self.running
            self._operations[key] = self._shape(operation.selection_set, running, False, 0)
        return self._operations[key]

    def _shape(self, selection_set, running: bool, introspective: bool, nesting: int) -> Shape:
        if nesting > MAX_NESTING:
            raise TooDeep
        depth = aliases = 0
        for node in selection_set.selections:
            if self._skipped(node, running):
                continue
            if isinstance(node, FieldNode):
                inner = introspective or node.name.value.startswith("__")
                found = (
                    self._shape(node.selection_set, running, inner, nesting + 1)
                    if node.selection_set
                    else Shape(0, 0)
                )
                depth = max(depth, 0 if inner else found.depth + 1)
                aliases += found.aliases + (node.alias is not None)
            else:
                found = self._spread_shape(node, running, introspective, nesting)
                depth = max(depth, found.depth)
                aliases += found.aliases
        return Shape(depth, saturated(aliases))

    def _spread_shape(self, node, running: bool, introspective: bool, nesting: int) -> Shape:
        if isinstance(node, InlineFragmentNode):
            return self._shape(node.selection_set, running, introspective, nesting + 1)
        fragment = self.fragments.get(node.name.value)
        key = (node.name.value, running, introspective)
        found = self._shapes.get(key)
        if fragment is None or found is _BUSY:
            return Shape(0, 0)
        if found is None:
            self._shapes[key] = _BUSY
            found = self._shape(fragment.selection_set, running, introspective, nesting + 1)
            self._shapes[key] = found
        return found

    def _skipped(self, node, running: bool) -> bool:
        """Whether @skip or @include leave the node out (as execution decides it)."""
        if not node.directives:
            return False
        values = self.values if running else None
        try:
            skip = get_directive_values(GraphQLSkipDirective, node, values)
            if skip is not None and skip.get("if") is True:
                return True
            include = get_directive_values(GraphQLIncludeDirective, node, values)
            return include is not None and include.get("if") is False
        except GraphQLError:
            return False  # undecidable before it runs (another operation's variable): it counts

    # -- cost, of the operation that runs --------------------------------------------------------

    def cost(self) -> int | None:
        """What the running operation can return; None when nothing will run.

        Raises TooDeep past MAX_NESTING.
        """
        if self._cost is _BUSY:
            root = None
            if self.running is not None and self.values is not None:
                root = self.schema.get_root_type(self.running.operation)
            self._cost = None if root is None else self._walk(self.running.selection_set, root, 0)
        return self._cost

    def price(self) -> int | None:
        """What running it is charged: its cost, a hundredth of it for an introspection."""
        cost = self.cost()
        if cost is None or not introspective(self.running):
            return cost
        return max(1, cost // INTROSPECTION_DISCOUNT)

    def _walk(self, selection_set, parent, nesting: int) -> int:
        if nesting > MAX_NESTING:
            raise TooDeep
        total = 0
        for node in selection_set.selections:
            if self._skipped(node, True):
                continue
            if isinstance(node, FieldNode):
                cost = self._field(node, parent, nesting)
                if parent in self._roots and node.name.value != "__typename":
                    cost = max(cost, 1)
            elif isinstance(node, InlineFragmentNode):
                kind = self._condition(node.type_condition, parent)
                cost = self._walk(node.selection_set, kind, nesting + 1)
            else:
                cost = self._fragment(node.name.value, nesting)
            total += cost
            if total >= CEILING:
                return CEILING
        return total

    def _fragment(self, name: str, nesting: int) -> int:
        fragment = self.fragments.get(name)
        found = self._costs.get(name)
        if fragment is None or found is _BUSY:
            return 0
        if found is None:
            self._costs[name] = _BUSY
            kind = self._condition(fragment.type_condition, None)
            found = self._walk(fragment.selection_set, kind, nesting + 1)
            self._costs[name] = found
        return found

    def _condition(self, condition, parent):
        return parent if condition is None else self.schema.get_type(condition.name.value)

    def _field(self, node: FieldNode, parent, nesting: int) -> int:
        name = node.name.value
        if parent is self.schema.query_type and name in ("__schema", "__type"):
            if name == "__schema":
                return self._introspected(node, "schema", self.schema, nesting)
            try:
                wanted = get_argument_values(TypeMetaFieldDef, node, self.values).get("name")
            except GraphQLError:
                wanted = None
            found = self.schema.get_type(wanted) if isinstance(wanted, str) else None
            return 0 if found is None else self._introspected(node, "type", found, nesting)
        fields = getattr(parent, "fields", None) if is_composite_type(parent) else None
        definition = fields.get(name) if fields else None
        if definition is None or node.selection_set is None:
            return 0
        named = get_named_type(definition.type)
        if not is_composite_type(named):
            return 0
        inner = self._walk(node.selection_set, named, nesting + 1)
        count = self._list_size(parent, definition, node) if self._is_list(definition) else 1
        return saturated(count * (1 + inner))

    @staticmethod
    def _is_list(definition) -> bool:
        return is_list_type(get_nullable_type(definition.type))

    def _list_size(self, parent, definition, node: FieldNode) -> int:
        """The `limit` the field runs with (given, a variable, the default); 0 when it fails."""
        if "limit" not in definition.args:
            return UNBOUNDED_LIST
        try:
            limit = get_argument_values(definition, node, self.values).get("limit")
        except GraphQLError:
            limit = None  # the field fails when it runs; its default is an upper bound
        if limit is None:  # an explicit null: the resolvers take the default, which
            # graphql-core 3.3 keeps in GraphQLArgument.default (default_value is Undefined)
            limit = get_argument_values(definition, _BARE).get("limit")
        if isinstance(limit, bool) or not isinstance(limit, int):
            return UNBOUNDED_LIST
        low, high = self.list_limits.get(f"{parent.name}.{node.name.value}", (0, limit))
        return min(limit, CEILING) if low <= limit <= high else 0

    # -- introspection ---------------------------------------------------------------------------

    def _introspected(self, node: FieldNode, kind: str, value, nesting: int) -> int:
        """1 for the object a `__schema` or `__type` field returns, plus what it selects."""
        if node.selection_set is None:
            return 1
        return saturated(1 + self._introspect(node.selection_set, kind, value, nesting + 1))

    def _introspect(self, selection_set, kind: str, value, nesting: int) -> int:
        """The objects a selection on one schema element returns, counted from the schema."""
        if nesting > MAX_NESTING:
            raise TooDeep
        key = (id(selection_set), kind, id(value))
        found = self._introspection.get(key)
        if found is not None:
            return 0 if found is _BUSY else found
        self._introspection[key] = _BUSY
        total = 0
        for node in selection_set.selections:
            if self._skipped(node, True):
                continue
            if isinstance(node, FieldNode):
                if node.selection_set is None:
                    continue
                child_kind, items = _introspection_children(self.schema, kind, value, node)
                for item in items:
                    total += 1 + self._introspect(node.selection_set, child_kind, item, nesting + 1)
                    if total >= CEILING:
                        break
            else:
                if isinstance(node, InlineFragmentNode):
                    condition, selections = node.type_condition, node.selection_set
                else:
                    fragment = self.fragments.get(node.name.value)
                    if fragment is None:
                        continue
                    condition, selections = fragment.type_condition, fragment.selection_set
                if condition is None or condition.name.value == INTROSPECTION_TYPES[kind]:
                    total += self._introspect(selections, kind, value, nesting + 1)
            if total >= CEILING:
                total = CEILING
                break
        self._introspection[key] = total
        return total


def _introspection_children(schema, kind: str, value, node: FieldNode) -> tuple[str, list]:
    """What an introspection field of a schema element returns: (kind, elements).

    The lists are those graphql-core's introspection resolvers return, deprecated entries
    included (an upper bound when a query leaves them out).
    """
    name = node.name.value
    if kind == "schema":
        if name == "types":
            return "type", list(schema.type_map.values())
        if name == "directives":
            return "directive", list(schema.directives)
        roots = {
            "queryType": schema.query_type,
            "mutationType": schema.mutation_type,
            "subscriptionType": schema.subscription_type,
        }
        if name in roots:
            return "type", [roots[name]] if roots[name] is not None else []
    elif kind == "type":
        if name == "ofType":
            return "type", [value.of_type] if is_wrapping_type(value) else []
        if name in ("fields", "interfaces"):
            if not (is_object_type(value) or is_interface_type(value)):
                return "type", []
            if name == "fields":
                return "field", list(value.fields.values())
            return "type", list(value.interfaces)
        if name == "possibleTypes":
            return "type", list(schema.get_possible_types(value)) if is_abstract_type(value) else []
        if name == "enumValues":
            return "enum", list(value.values.values()) if is_enum_type(value) else []
        if name == "inputFields":
            return "input", list(value.fields.values()) if is_input_object_type(value) else []
    elif kind in ("field", "input") and name == "type":
        return "type", [value.type]
    elif kind in ("field", "directive") and name == "args":
        return "input", list(value.args.values())
    return kind, []
