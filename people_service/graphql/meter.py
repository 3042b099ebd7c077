"""GraphQL limits of a document (depth, aliases, cost), measured in linear time before it runs."""

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    GraphQLError,
    GraphQLIncludeDirective,
    GraphQLSkipDirective,
    InlineFragmentNode,
    NameNode,
    OperationDefinitionNode,
    TypeMetaFieldDef,
    ValidationRule,
    get_named_type,
    get_nullable_type,
    introspection_types,
    is_abstract_type,
    is_composite_type,
    is_enum_type,
    is_input_object_type,
    is_interface_type,
    is_list_type,
    is_object_type,
)
from graphql.execution.values import get_argument_values, get_directive_values

from .. import schemas
from .parsing import MAX_NESTING, NESTED_TOO_DEEPLY, TooComplex

# Counts saturate here: a refusal needs no exact figure beyond it, and numbers stay small.
CEILING = 10**9
# What one list field without a `limit` argument counts (the schema has none so far).
UNBOUNDED_LIST = 100
# An operation of introspection fields alone reads the schema in memory, not the database: it
# is charged this fraction of the objects it returns, so the explorers load at any limit.
INTROSPECTION_DISCOUNT = 100
# the `limit` each list field accepts: outside it the field fails, and nothing below it counts
LIST_LIMITS = {
    "Query.people": schemas.PEOPLE_LIMITS,
    "Person.friends": schemas.LIST_FIELD_LIMITS,
    "Person.messages": schemas.LIST_FIELD_LIMITS,
}
# a field node without arguments: the values it gets are the schema's defaults
_BARE = FieldNode(name=NameNode(value="limit"), arguments=())
_BUSY = object()  # a fragment being measured: a spread of it closes a cycle (a validation error)


def _has_fields(value) -> bool:
    return is_object_type(value) or is_interface_type(value)


# The elements of schema s and element v that each composite introspection field returns, as
# graphql-core's resolvers do (deprecated entries included: an upper bound)
_CHILDREN = {
    "types": lambda s, v: s.type_map.values(),
    "queryType": lambda s, v: [s.query_type],
    "mutationType": lambda s, v: [s.mutation_type],
    "subscriptionType": lambda s, v: [s.subscription_type],
    "directives": lambda s, v: s.directives,
    "args": lambda s, v: v.args.values(),
    "fields": lambda s, v: v.fields.values() if _has_fields(v) else (),
    "interfaces": lambda s, v: v.interfaces if _has_fields(v) else (),
    "possibleTypes": lambda s, v: s.get_possible_types(v) if is_abstract_type(v) else (),
    "enumValues": lambda s, v: v.values.values() if is_enum_type(v) else (),
    "inputFields": lambda s, v: v.fields.values() if is_input_object_type(v) else (),
    "ofType": lambda s, v: [getattr(v, "of_type", None)],
    "type": lambda s, v: [v.type],
}


def figure(value: int) -> str:
    return str(value) if value < CEILING else f"more than {CEILING - 1}"


def introspective(operation) -> bool:
    """Whether an operation asks only for introspection fields (the same answer for all)."""
    return operation is not None and all(
        isinstance(node, FieldNode) and node.name.value.startswith("__")
        for node in operation.selection_set.selections
    )


class Meter:
    """Depth, aliases and cost of a document's operations, each walk linear."""

    def __init__(self, schema, document, values):
        self.schema = schema
        self.fragments = {
            node.name.value: node
            for node in document.definitions
            if isinstance(node, FragmentDefinitionNode)
        }
        self.values = values  # None: the variables did not coerce, nothing will run
        self._roots = {schema.query_type, schema.mutation_type} - {None}
        self._measured: dict = {}  # fragments' and introspection selections' measures

    def _once(self, key, empty, measure, *args):
        """`measure(*args)`, once per key; `empty` while it is measured (a fragment cycle)."""
        found = self._measured.get(key)
        if found is None:
            self._measured[key] = _BUSY
            found = self._measured[key] = measure(*args)
        return empty if found is _BUSY else found

    def shape(self, selection_set, running: bool, introspective=False, nesting=0) -> tuple:
        """(depth, aliases) of a selection; raises TooComplex past MAX_NESTING."""
        if nesting > MAX_NESTING:
            raise TooComplex(NESTED_TOO_DEEPLY)
        depth = aliases = 0
        for node in selection_set.selections:
            if self._skipped(node, running):
                continue
            if isinstance(node, FieldNode):
                inner = introspective or node.name.value.startswith("__")
                found = (0, 0)
                if node.selection_set:
                    found = self.shape(node.selection_set, running, inner, nesting + 1)
                found = (0 if inner else found[0] + 1, found[1] + (node.alias is not None))
            elif isinstance(node, InlineFragmentNode):
                found = self.shape(node.selection_set, running, introspective, nesting + 1)
            elif (fragment := self.fragments.get(node.name.value)) is None:
                found = (0, 0)
            else:
                key = (fragment.name.value, running, introspective)
                args = (fragment.selection_set, running, introspective, nesting + 1)
                found = self._once(key, (0, 0), self.shape, *args)
            depth = max(depth, found[0])
            aliases += found[1]
        return depth, min(aliases, CEILING)

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

    def cost(self, selection_set, parent, nesting=0) -> int:
        """What a selection of the running operation can return; raises TooComplex if too deep."""
        if nesting > MAX_NESTING:
            raise TooComplex(NESTED_TOO_DEEPLY)
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
                cost = self.cost(node.selection_set, kind, nesting + 1)
            elif (fragment := self.fragments.get(node.name.value)) is None:
                cost = 0
            else:
                args = (fragment.selection_set, self._condition(fragment.type_condition, None))
                cost = self._once(fragment.name.value, 0, self.cost, *args, nesting + 1)
            total += cost
            if total >= CEILING:
                return CEILING
        return total

    def _condition(self, condition, parent):
        return parent if condition is None else self.schema.get_type(condition.name.value)

    def _field(self, node: FieldNode, parent, nesting: int) -> int:
        if node.selection_set is None:
            return 0  # a leaf (a field of a root type is charged 1 by the caller)
        name = node.name.value
        if parent is self.schema.query_type and name in ("__schema", "__type"):
            found = self.schema
            if name == "__type":
                try:
                    wanted = get_argument_values(TypeMetaFieldDef, node, self.values).get("name")
                except GraphQLError:
                    wanted = None
                found = self.schema.get_type(wanted) if isinstance(wanted, str) else None
            if found is None:
                return 0
            kind = "__Schema" if name == "__schema" else "__Type"
            return min(1 + self._introspect(node, kind, found, nesting), CEILING)  # 1: itself
        fields = getattr(parent, "fields", None) if is_composite_type(parent) else None
        definition = fields.get(name) if fields else None
        if definition is None:
            return 0
        named = get_named_type(definition.type)
        if not is_composite_type(named):
            return 0
        inner = self.cost(node.selection_set, named, nesting + 1)
        count = 1
        if is_list_type(get_nullable_type(definition.type)):
            count = self._list_size(parent, definition, node)
        return min(count * (1 + inner), CEILING)

    def _list_size(self, parent, definition, node: FieldNode) -> int:
        """The `limit` the field runs with (given, a variable, the default); 0 when it fails."""
        try:
            limit = get_argument_values(definition, node, self.values).get("limit")
        except GraphQLError:
            limit = None  # the field fails when it runs; its default is an upper bound
        if limit is None:  # an explicit null: the resolvers take the default, which
            # graphql-core 3.3 keeps in GraphQLArgument.default (default_value is Undefined)
            limit = get_argument_values(definition, _BARE).get("limit")
        if isinstance(limit, bool) or not isinstance(limit, int):
            return UNBOUNDED_LIST
        low, high = LIST_LIMITS.get(f"{parent.name}.{node.name.value}", (0, limit))
        return min(limit, CEILING) if low <= limit <= high else 0

    def _introspect(self, node, kind: str, value, nesting: int) -> int:
        """The objects a selection on `value` (of introspection type `kind`) returns."""
        if nesting > MAX_NESTING:
            raise TooComplex(NESTED_TOO_DEEPLY)
        key = (id(node.selection_set), kind, id(value))
        return self._once(key, 0, self._introspected, node, kind, value, nesting)

    def _introspected(self, node, kind: str, value, nesting: int) -> int:
        total = 0
        for child in node.selection_set.selections:
            if self._skipped(child, True):
                continue
            if isinstance(child, FieldNode):
                field = introspection_types[kind].fields.get(child.name.value)
                children = _CHILDREN.get(child.name.value) if field else None
                if children is None or child.selection_set is None:
                    continue
                child_kind = get_named_type(field.type).name
                for item in children(self.schema, value):
                    if item is not None:
                        total += 1 + self._introspect(child, child_kind, item, nesting + 1)
                    if total >= CEILING:
                        break
            else:
                if not isinstance(child, InlineFragmentNode):
                    child = self.fragments.get(child.name.value)
                condition = child and child.type_condition
                if child is not None and (condition is None or condition.name.value == kind):
                    total += self._introspect(child, kind, value, nesting + 1)
            if total >= CEILING:
                break
        return min(total, CEILING)


def limits_of(schema, document, values, running, config, budget) -> tuple:
    """(errors, price) of a document if `running` runs; `budget` is ratelimit.budget()'s."""
    max_depth, max_aliases = config["GRAPHQL_MAX_DEPTH"], config["GRAPHQL_MAX_ALIASES"]
    max_cost = config["GRAPHQL_MAX_COST"]
    meter = Meter(schema, document, values)
    errors: dict[str, TooComplex] = {}
    price = 0
    try:
        for node in document.definitions:
            if not isinstance(node, OperationDefinitionNode):
                continue
            depth, aliases = meter.shape(node.selection_set, node is running)
            if depth > max_depth:
                message = f"The query is {figure(depth)} levels deep; the limit is {max_depth}."
                errors.setdefault("depth", TooComplex(message, node))
            if aliases > max_aliases:
                message = f"The query has {figure(aliases)} aliases; the limit is {max_aliases}."
                errors.setdefault("aliases", TooComplex(message, node))
            root = schema.get_root_type(node.operation)
            if node is not running or values is None or root is None:
                continue  # not the one that runs, or nothing runs (execution says why)
            cost = meter.cost(node.selection_set, root)
            price = max(1, cost // INTROSPECTION_DISCOUNT) if introspective(node) else cost
            if cost > max_cost:
                message = (
                    f"The query could return {figure(cost)} objects; the limit is {max_cost}. "
                    "Ask for fewer (smaller limits) or split the query."
                )
                errors["cost"] = TooComplex(message, node)
            elif price > budget[0]:
                message = (
                    f"The query could return {figure(cost)} objects, more than the "
                    f"{budget[0]} your rate limit ({budget[1]}) allows in a whole window, "
                    "so it can never run. Ask for fewer (smaller limits), split the query, or "
                    "use a key with a larger limit."
                )
                errors["cost"] = TooComplex(message, node)
    except TooComplex as error:  # nested past MAX_NESTING
        return (error,), 0
    return tuple(errors.values()), 0 if errors else price


class NoIntrospection(ValidationRule):
    """With INTROSPECTION off, `__schema` and `__type` are refused (`__typename` stays)."""

    def enter_field(self, node: FieldNode, *_args):
        name = node.name.value
        if name.startswith("__") and name != "__typename":
            self.report_error(
                GraphQLError(f"Cannot query '{name}': introspection is disabled.", node)
            )
