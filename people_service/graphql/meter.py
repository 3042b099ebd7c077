"""What a GraphQL document costs (SPEC §11a) and its limits as validation rules, all linear."""

from functools import cache

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    NameNode,
    OperationDefinitionNode,
    ValidationRule,
    VariableNode,
    get_argument_values,
    get_named_type,
    get_nullable_type,
    is_list_type,
    value_from_ast_untyped,
)

from .. import schemas
from ..errors import QueryTooComplex
from .parsing import MAX_NESTING, NESTED_TOO_DEEPLY

# Counts saturate here: a refusal needs no exact figure beyond it, and numbers stay small.
CEILING = 10**9
# A response name given more often than this in one selection set (fragments included) is
# refused: graphql-core checks such fields pairwise before it merges them.
MAX_SAME_NAME = 10
# the `limit` each list field accepts: outside it the field fails, and nothing below it counts
LIST_LIMITS = {
    ("Query", "people"): schemas.PEOPLE_LIMITS,
    ("Person", "friends"): schemas.LIST_FIELD_LIMITS,
    ("Person", "messages"): schemas.LIST_FIELD_LIMITS,
}
INTROSPECTION_ROOTS = ("__schema", "__type")
_BUSY = object()  # a fragment being walked: a spread of it closes a cycle (a validation error)


def figure(value: int) -> str:
    return str(value) if value < CEILING else f"more than {CEILING - 1}"


class Walk:
    """Linear walks of one document: each fragment is measured once (memoized per key)."""

    def __init__(self, document):
        self.fragments = {
            node.name.value: node
            for node in document.definitions
            if isinstance(node, FragmentDefinitionNode)
        }
        self.memo: dict = {}

    def fragment(self, spread, key, empty, measure, nesting: int, once=False):
        """`measure(fragment, nesting + 1)` once per (name, key); `empty` in a cycle, and
        after the first time if `once`."""
        node = self.fragments.get(spread.name.value)
        if node is None:
            return empty
        memo_key = (spread.name.value, key)
        found = self.memo.get(memo_key)
        if found is None:
            self.memo[memo_key] = _BUSY
            self.memo[memo_key] = measure(node, nesting + 1)
            return empty if once else self.memo[memo_key]
        return empty if found is _BUSY or once else found


def check_nesting(nesting: int) -> None:
    if nesting > MAX_NESTING:
        raise QueryTooComplex(NESTED_TOO_DEEPLY)


_DEFAULTS: dict = {}
_BARE = FieldNode(name=NameNode(value="limit"), arguments=())


def default_limit(parent, definition, name: str):
    """The `limit` a list field runs with when given none (graphql-core 3.3 keeps it in
    GraphQLArgument.default, not default_value: ask it as execution does)."""
    key = (parent.name, name)
    if key not in _DEFAULTS:
        _DEFAULTS[key] = get_argument_values(definition, _BARE).get("limit")
    return _DEFAULTS[key]


def written(document) -> int:
    """Fields and fragment spreads as written (a fragment's once), the least a request pays."""
    count, pending = 0, [node.selection_set for node in document.definitions]
    while pending:
        for node in pending.pop().selections:
            count += isinstance(node, (FieldNode, FragmentSpreadNode))
            if getattr(node, "selection_set", None) is not None:
                pending.append(node.selection_set)
    return count


def returned(schema, document, operation, variables) -> int:
    """The nodes `operation` can return: lists multiply by their `limit` (argument, variable or
    default); below __schema and __type each field written counts once. Directives are ignored."""
    walk, root = Walk(document), schema.get_root_type(operation.operation)
    variables, defaults = variables or {}, {}
    for definition in operation.variable_definitions or ():
        if definition.default_value is not None:
            defaults[definition.variable.name.value] = definition.default_value

    def limit_of(parent, definition, node) -> int:
        argument = next((a for a in node.arguments or () if a.name.value == "limit"), None)
        value = None
        if isinstance(argument and argument.value, VariableNode):
            name = argument.value.name.value
            value = variables.get(name)
            if name not in variables and name in defaults:
                value = value_from_ast_untyped(defaults[name])
        elif argument is not None:
            value = value_from_ast_untyped(argument.value)
        if value is None:  # omitted or null: the schema's default (the resolvers' too)
            value = default_limit(parent, definition, node.name.value)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            return 1  # a limit of the wrong type fails the request; a list is at least one
        low, high = LIST_LIMITS.get((parent.name, node.name.value), (0, CEILING))
        return value if low <= value <= high else 0  # out of range: the field fails

    def selection(selection_set, parent, nesting: int) -> int:
        check_nesting(nesting)
        total = 0
        for node in selection_set.selections:
            if isinstance(node, FieldNode):
                total += field(node, parent, nesting)
            elif isinstance(node, InlineFragmentNode):
                kind = (
                    schema.get_type(node.type_condition.name.value)
                    if node.type_condition
                    else parent
                )
                total += selection(node.selection_set, kind, nesting + 1) if kind else 0
            else:
                total += walk.fragment(node, "cost", 0, fragment_cost, nesting)
            if total >= CEILING:
                return CEILING
        return total

    def condition(node, parent):
        return schema.get_type(node.type_condition.name.value) if node.type_condition else parent

    def fragment_cost(node, nesting: int) -> int:
        kind = condition(node, None)
        return selection(node.selection_set, kind, nesting) if kind else 0

    def field(node, parent, nesting: int) -> int:
        name = node.name.value
        at_root = parent is root and name != "__typename"
        if at_root and name in INTROSPECTION_ROOTS:
            return 1 + introspection(node.selection_set, nesting + 1)
        definition = getattr(parent, "fields", {}).get(name)
        if node.selection_set is None or definition is None:
            return int(at_root)  # a leaf: a root field counts 1 all the same
        inner = selection(node.selection_set, get_named_type(definition.type), nesting + 1)
        count = 1
        if is_list_type(get_nullable_type(definition.type)):
            count = limit_of(parent, definition, node)
        return max(int(at_root), min(count * (1 + inner), CEILING))

    def introspection(selection_set, nesting: int) -> int:
        if selection_set is None:
            return 0
        check_nesting(nesting)
        total = 0
        for node in selection_set.selections:
            if isinstance(node, FragmentSpreadNode):
                total += walk.fragment(node, "fields", 0, fragment_fields, nesting, once=True)
            else:
                total += isinstance(node, FieldNode) + introspection(
                    node.selection_set, nesting + 1
                )
        return total

    def fragment_fields(node, nesting: int):  # counted once, however often it is spread
        return introspection(node.selection_set, nesting)

    return max(1, selection(operation.selection_set, root, 0)) if root else 1


def price(schema, document, operation, variables) -> tuple[int, str]:
    """What a request pays (the larger count, at least 1), and a phrase saying why."""
    nodes = returned(schema, document, operation, variables) if operation else 1
    fields = written(document)
    if nodes >= fields:
        return max(1, nodes), f"could return {figure(nodes)} objects"
    return fields, f"writes {fields} fields and fragment spreads"


# -- limits of the document as graphql-core validation rules (each walk linear) -----------


class DocumentRule(ValidationRule):
    """A rule measuring each operation once, fragments memoized; reports QUERY_TOO_COMPLEX."""

    def enter_document(self, document, *_args):
        walk = Walk(document)
        for node in document.definitions:
            if isinstance(node, OperationDefinitionNode):
                try:
                    message = self.check(walk, node)
                except QueryTooComplex as error:  # nested past MAX_NESTING
                    message = error.detail
                if message:
                    extensions = {"code": QueryTooComplex.graphql_code}
                    self.report_error(GraphQLError(message, node, extensions=extensions))
                    break
        return self.SKIP  # every operation measured: nothing below to visit

    def check(self, walk: Walk, operation) -> str | None:
        raise NotImplementedError


class DepthRule(DocumentRule):
    """Fields nested in fields at most GRAPHQL_MAX_DEPTH deep (introspection's count 0)."""

    maximum = 10

    def check(self, walk, operation):
        def depth(selection_set, nesting: int) -> int:
            check_nesting(nesting)
            deepest = 0
            for node in selection_set.selections:
                if isinstance(node, FieldNode):
                    inner = node.selection_set and not node.name.value.startswith("__")
                    found = 1 + depth(node.selection_set, nesting + 1) if inner else 1
                elif isinstance(node, InlineFragmentNode):
                    found = depth(node.selection_set, nesting + 1)
                else:
                    found = walk.fragment(node, "depth", 0, fragment, nesting)
                deepest = max(deepest, found)
            return deepest

        def fragment(node, nesting):
            return depth(node.selection_set, nesting)

        found = depth(operation.selection_set, 0)
        if found > self.maximum:
            return f"The query is {figure(found)} levels deep; the limit is {self.maximum}."
        return None


class AliasRule(DocumentRule):
    """At most GRAPHQL_MAX_ALIASES aliases in the answer (a fragment's, each time it is spread)."""

    maximum = 30

    def check(self, walk, operation):
        def aliases(selection_set, nesting: int) -> int:
            check_nesting(nesting)
            total = 0
            for node in selection_set.selections:
                if isinstance(node, FieldNode):
                    total += node.alias is not None
                if isinstance(node, FragmentSpreadNode):
                    total += walk.fragment(node, "aliases", 0, fragment, nesting)
                elif node.selection_set is not None:
                    total += aliases(node.selection_set, nesting + 1)
            return min(total, CEILING)

        def fragment(node, nesting):
            return aliases(node.selection_set, nesting)

        found = aliases(operation.selection_set, 0)
        if found > self.maximum:
            return f"The query has {figure(found)} aliases; the limit is {self.maximum}."
        return None


class RepeatedNameRule(DocumentRule):
    """One response name at most MAX_SAME_NAME times in a selection set, fragments included."""

    def check(self, walk, operation):
        def names(selection_set, nesting: int) -> dict:
            check_nesting(nesting)
            counts: dict[str, int] = {}
            spread = set()
            for node in selection_set.selections:
                if isinstance(node, FieldNode):
                    found = {(node.alias or node.name).value: 1}
                    if node.selection_set is not None:
                        names(node.selection_set, nesting + 1)
                elif isinstance(node, InlineFragmentNode):
                    found = names(node.selection_set, nesting + 1)
                elif node.name.value in spread:
                    continue  # graphql-core merges a fragment spread twice in one place once
                else:
                    spread.add(node.name.value)
                    found = walk.fragment(node, "names", {}, fragment, nesting)
                for name, count in found.items():
                    counts[name] = counts.get(name, 0) + count
                    if counts[name] > MAX_SAME_NAME:
                        raise Repeated(name)
            return counts

        def fragment(node, nesting):
            return names(node.selection_set, nesting)

        try:
            names(operation.selection_set, 0)
        except Repeated as error:
            return f"The query selects '{error}' more than {MAX_SAME_NAME} times in one place."
        return None


class Repeated(Exception):
    """A response name over MAX_SAME_NAME (ends the walk at once)."""


def is_limit(rule) -> bool:
    return issubclass(rule, DocumentRule)


@cache
def limit_rules(max_depth: int, max_aliases: int) -> tuple:
    """The rules for these limits (classes: graphql-core instantiates them per validation)."""
    depth = type("DepthRule", (DepthRule,), {"maximum": max_depth})
    aliases = type("AliasRule", (AliasRule,), {"maximum": max_aliases})
    return depth, aliases, RepeatedNameRule
