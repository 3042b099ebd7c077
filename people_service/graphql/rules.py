"""GraphQL limits (size, tokens, nesting, depth, aliases, cost) as rules decided in linear time."""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from graphql import (
    SKIP,
    FieldNode,
    FragmentDefinitionNode,
    GraphQLError,
    GraphQLIncludeDirective,
    GraphQLSkipDirective,
    InlineFragmentNode,
    NameNode,
    TypeMetaFieldDef,
    ValidationRule,
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
    parse,
    validate,
)
from graphql.execution.values import (
    get_argument_values,
    get_directive_values,
    get_variable_values,
)
from graphql.validation.rules import overlapping_fields_can_be_merged

from ..errors import QueryTooComplex

# graphql-core's own knob (documented, read when a validation starts): the work its
# OverlappingFieldsCanBeMergedRule may spend on one document before aborting it. The default,
# 500,000, let a 2,000-token document of repeated fields (`{ me { name } me { name } ... }`)
# take 1.6-2.4 s of CPU; at 50,000 it takes about 0.2 s. Real documents spend nothing or a
# few thousand (measured: the introspection query 0, thirty overlapping fragments 7,455).
VALIDATION_BUDGET = 50_000
overlapping_fields_can_be_merged.MAX_COMPLEXITY_BUDGET = VALIDATION_BUDGET
# The message of graphql-core's ValidationAbortedError when that budget runs out.
VALIDATION_ABORTED = "Validation aborted."

MAX_QUERY_BYTES = 100 * 1024
MAX_TOKENS = 2000
# Selection sets and fragment spreads nested in one another. The walks below recurse once per
# level, so a document nested deeper is refused before it could exhaust the stack (graphql-core's
# parser stops at 200 selection sets, but fragments can nest without limit).
MAX_NESTING = 100
# Counts saturate here: a refusal needs no exact figure beyond it, and numbers stay small.
CEILING = 10**9
NESTED_TOO_DEEPLY = "The query is nested too deeply."
# What one list field without a `limit` argument counts (the schema has none so far).
UNBOUNDED_LIST = 100
# The introspection type of each kind of schema element the introspection walk visits.
INTROSPECTION_TYPES = {
    "schema": "__Schema",
    "type": "__Type",
    "field": "__Field",
    "input": "__InputValue",
    "enum": "__EnumValue",
    "directive": "__Directive",
}


class TooComplex(GraphQLError):
    """A document over a limit; it is refused before it runs."""

    def __init__(self, message: str, nodes=None):
        super().__init__(message, nodes, extensions={"code": QueryTooComplex.graphql_code})


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
    """A parsed document; the same text is parsed once (bounded LRU cache).

    Raises TooComplex over the size, token or nesting limit, ParseFailed for other syntax errors.
    """
    if len(text.encode("utf-8", "surrogatepass")) > MAX_QUERY_BYTES:
        raise TooComplex(f"The query is longer than {MAX_QUERY_BYTES // 1024} KiB.")
    try:
        return parse(text, max_lexical_tokens=MAX_TOKENS, max_comments=MAX_TOKENS)
    except GraphQLError as error:
        # the parser's own limits, told apart by their messages (tests/test_graphql_pins.py)
        if "Document contains more than" in error.message:
            what = "comments" if "comments" in error.message else "tokens"
            raise TooComplex(f"The query has more than {MAX_TOKENS} {what}.") from None
        if "nested too deeply" in error.message:
            raise TooComplex(NESTED_TOO_DEEPLY) from None
        raise ParseFailed(error) from None


class Shape(NamedTuple):
    depth: int
    aliases: int


class _TooDeep(Exception):
    """A walk reached MAX_NESTING."""


_BUSY = object()  # a fragment being measured: a spread of it closes a cycle (a validation error)


def _saturated(value: int) -> int:
    return value if value < CEILING else CEILING


def _figure(value: int) -> str:
    return str(value) if value < CEILING else f"more than {CEILING - 1}"


class Meter:
    """Depth, aliases and cost of a document's operations, for one request's variables.

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

    def __init__(self, schema, document, variables=None, operation_name=None):
        self.schema = schema
        self.fragments = {
            node.name.value: node
            for node in document.definitions
            if isinstance(node, FragmentDefinitionNode)
        }
        # the operation that will run, and its coerced variables; None: nothing will run
        self.running = get_operation_ast(document, operation_name)
        self.values = None
        if self.running is not None:
            try:
                coerced = get_variable_values(
                    schema,
                    self.running.variable_definitions or (),
                    variables if isinstance(variables, dict) else {},
                )
            except GraphQLError:
                coerced = []
            if not isinstance(coerced, list):  # a list holds the errors execution will report
                self.values = coerced
        self._roots = {schema.query_type, schema.mutation_type} - {None}
        self._operations: dict = {}
        self._shapes: dict = {}
        self._costs: dict = {}
        self._introspection: dict = {}
        self._defaults: dict = {}
        self._cost = _BUSY

    # -- depth and aliases, of every operation -------------------------------------------------

    def shape(self, operation) -> Shape:
        """Depth and aliases of an operation; raises _TooDeep past MAX_NESTING."""
        key = id(operation)
        if key not in self._operations:
            running = operation is self.running
            self._operations[key] = self._shape(operation.selection_set, running, False, 0)
        return self._operations[key]

    def _shape(self, selection_set, running: bool, introspective: bool, nesting: int) -> Shape:
        if nesting > MAX_NESTING:
            raise _TooDeep
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
        return Shape(depth, _saturated(aliases))

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

        Raises _TooDeep past MAX_NESTING.
        """
        if self._cost is _BUSY:
            root = None
            if self.running is not None and self.values is not None:
                root = self.schema.get_root_type(self.running.operation)
            self._cost = None if root is None else self._walk(self.running.selection_set, root, 0)
        return self._cost

    def _walk(self, selection_set, parent, nesting: int) -> int:
        if nesting > MAX_NESTING:
            raise _TooDeep
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
        count = self._list_size(definition, node) if self._is_list(definition) else 1
        return _saturated(count * (1 + inner))

    @staticmethod
    def _is_list(definition) -> bool:
        return is_list_type(get_nullable_type(definition.type))

    def _list_size(self, definition, node: FieldNode) -> int:
        """The `limit` the field will run with: given, from a variable, or the schema's default."""
        if "limit" not in definition.args:
            return UNBOUNDED_LIST
        try:
            limit = get_argument_values(definition, node, self.values).get("limit")
        except GraphQLError:
            limit = None  # the field fails when it runs; its default is an upper bound
        if limit is None:  # an explicit null: the resolvers take the default
            limit = self._default_limit(definition)
        if isinstance(limit, bool) or not isinstance(limit, int):
            return UNBOUNDED_LIST
        return min(max(limit, 0), CEILING)

    def _default_limit(self, definition):
        # graphql-core 3.3 keeps an SDL default in GraphQLArgument.default (default_value is
        # Undefined); the arguments of a bare field node are exactly the schema's defaults
        key = id(definition)
        if key not in self._defaults:
            try:
                bare = FieldNode(name=NameNode(value="limit"), arguments=())
                self._defaults[key] = get_argument_values(definition, bare).get("limit")
            except GraphQLError:
                self._defaults[key] = None
        return self._defaults[key]

    # -- introspection ---------------------------------------------------------------------------

    def _introspected(self, node: FieldNode, kind: str, value, nesting: int) -> int:
        """1 for the object a `__schema` or `__type` field returns, plus what it selects."""
        if node.selection_set is None:
            return 1
        return _saturated(1 + self._introspect(node.selection_set, kind, value, nesting + 1))

    def _introspect(self, selection_set, kind: str, value, nesting: int) -> int:
        """The objects a selection on one schema element returns, counted from the schema."""
        if nesting > MAX_NESTING:
            raise _TooDeep
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
        except _TooDeep:
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
                message = f"The query is {_figure(depth)} levels deep; the limit is {max_depth}."
                self.report_once("depth", message, operation)

    class AliasLimit(LimitRule):
        def check(self, operation):
            aliases = meter.shape(operation).aliases
            if aliases > max_aliases:
                message = f"The query has {_figure(aliases)} aliases; the limit is {max_aliases}."
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
                    f"The query could return {_figure(cost)} objects; the limit is {max_cost}. "
                    "Ask for fewer (smaller limits) or split the query."
                )
                self.report_once("cost", message, operation)
            elif budget is not None and cost > budget.amount:
                message = (
                    f"The query could return {_figure(cost)} objects, more than the "
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
    variables,
    operation_name,
    *,
    max_depth: int,
    max_aliases: int,
    max_cost: int,
    budget: Budget | None = None,
) -> tuple[tuple[GraphQLError, ...], int]:
    """(errors, cost): the limits a document breaks, in time linear in the document, and what
    its running operation costs (0 when nothing will run)."""
    meter = Meter(schema, document, variables, operation_name)
    rules = limit_rules(
        meter, max_depth=max_depth, max_aliases=max_aliases, max_cost=max_cost, budget=budget
    )
    errors = validate(schema, document, rules)
    if any(not isinstance(error, TooComplex) for error in errors):
        # validate() aborts by itself when fragments nest past what it can recurse through
        return (TooComplex(NESTED_TOO_DEEPLY),), 0
    return tuple(errors), 0 if errors else (meter.cost() or 0)


class NoIntrospection(ValidationRule):
    """With INTROSPECTION off, `__schema` and `__type` are refused (`__typename` stays)."""

    def enter_field(self, node: FieldNode, *_args):
        name = node.name.value
        if name.startswith("__") and name != "__typename":
            self.report_error(
                GraphQLError(f"Cannot query '{name}': introspection is disabled.", node)
            )
