"""A GraphQL document: parsed once per text, what it costs (SPEC §11a) and its limits as a
validation rule, each in time linear in its size (fragments measured once)."""

from functools import cache, lru_cache, wraps

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLSyntaxError,
    InlineFragmentNode,
    NameNode,
    OperationDefinitionNode,
    ValidationRule,
    VariableNode,
    get_argument_values,
    get_named_type,
    get_nullable_type,
    get_operation_ast,
    is_list_type,
    parse,
    value_from_ast_untyped,
)

from .. import schemas
from ..errors import QueryTooComplex
from .resolvers import executable_schema

MAX_QUERY_BYTES = 100 * 1024
MAX_TOKENS = 2000
# Selection sets and fragment spreads nested in one another: the walks recurse once per level,
# and fragments can nest without the parser's limit.
MAX_NESTING = 100
# Values (at any depth) in one request's variables, counted before they are coerced.
MAX_VARIABLE_VALUES = 1000
# Texts up to this size are kept parsed, priced and validated: 512 texts of 100 KiB each
# would let one key grow a process by 100 MiB.
CACHED_TEXT_BYTES = 8 * 1024
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
BARE_LIMIT = FieldNode(name=NameNode(value="limit"), arguments=())  # for the schema's default


def by_text(function):
    """`function(text, ...)`, its results kept for short texts (a bounded LRU cache)."""
    # 128: a short text of 2,000 tokens parses to ~0.6 MB kept with its tokens (512 such: 300 MB)
    cached = lru_cache(maxsize=128)(function)

    @wraps(function)
    def call(text: str, *args):
        return (cached if len(text) <= CACHED_TEXT_BYTES else function)(text, *args)

    call.cache_info = cached.cache_info
    return call


@by_text
def parse_document(text: str):
    """The parsed document; raises QueryTooComplex over a limit, GraphQLSyntaxError otherwise."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_QUERY_BYTES:
        raise QueryTooComplex(f"The query is longer than {MAX_QUERY_BYTES // 1024} KiB.")
    try:
        return parse(text, max_lexical_tokens=MAX_TOKENS, max_comments=MAX_TOKENS)
    except GraphQLSyntaxError as error:
        if error.message.endswith(" Parsing aborted."):  # one of the limits, not a typo
            detail = error.message.removeprefix("Syntax Error: ").removesuffix(" Parsing aborted.")
            raise QueryTooComplex(detail) from None
        raise


def check_variables(variables) -> None:
    """Raises QueryTooComplex when `variables` (JSON) hold more than MAX_VARIABLE_VALUES values."""
    count, pending = 0, [variables] if variables else []
    while pending:
        value = pending.pop()
        if isinstance(value, (dict, list)):
            count += len(value)
            if count > MAX_VARIABLE_VALUES:
                raise QueryTooComplex(
                    f"The variables hold more than {MAX_VARIABLE_VALUES} values; send fewer."
                )
            pending.extend(value.values() if isinstance(value, dict) else value)


def check_nesting(nesting: int) -> None:
    if nesting > MAX_NESTING:
        raise QueryTooComplex("The query is nested too deeply.")


def figure(value: int) -> str:
    return str(value) if value < CEILING else f"more than {CEILING - 1}"


def by_fragment(document, measure, empty):
    """`fragment(name, nesting)`: `measure(definition, nesting + 1)` once per name; `empty`
    for an unknown name or a cycle (graphql-core's validation reports both)."""
    definitions = {
        node.name.value: node
        for node in document.definitions
        if isinstance(node, FragmentDefinitionNode)
    }
    memo: dict = {}

    def fragment(name: str, nesting: int):
        if name not in memo:
            memo[name] = empty
            if name in definitions:
                memo[name] = measure(definitions[name], nesting + 1)
        return memo[name]

    return fragment


def written(selection_sets, kinds=(FieldNode, FragmentSpreadNode)) -> int:
    """The fields and fragment spreads written in these selection sets (not following spreads)."""
    count, pending = 0, [s for s in selection_sets if s is not None]
    while pending:
        for node in pending.pop().selections:
            count += isinstance(node, kinds)
            if getattr(node, "selection_set", None) is not None:
                pending.append(node.selection_set)
    return count


def returned(document, operation, variables) -> int:
    """The nodes `operation` can return: lists multiply by their `limit` (argument, variable or
    default); below __schema and __type each field written counts once. Directives are ignored."""
    schema = executable_schema()
    root = schema.get_root_type(operation.operation)
    variables = {
        **{
            definition.variable.name.value: value_from_ast_untyped(definition.default_value)
            for definition in operation.variable_definitions or ()
            if definition.default_value is not None
        },
        **(variables or {}),
    }

    def limit_of(parent, definition, node) -> int:
        value = next((a.value for a in node.arguments or () if a.name.value == "limit"), None)
        if isinstance(value, VariableNode):
            value = variables.get(value.name.value)
        elif value is not None:
            value = value_from_ast_untyped(value)
        if value is None:  # omitted or null: the schema's default (the resolvers' too)
            value = get_argument_values(definition, BARE_LIMIT).get("limit")
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
                total += typed(node, parent, nesting + 1)
            else:
                total += fragment(node.name.value, nesting)
            if total >= CEILING:
                return CEILING
        return total

    def typed(node, parent, nesting: int) -> int:  # a fragment, under its type condition
        kind = schema.get_type(node.type_condition.name.value) if node.type_condition else parent
        return selection(node.selection_set, kind, nesting) if kind else 0

    fragment = by_fragment(document, lambda node, nesting: typed(node, None, nesting), 0)

    def field(node, parent, nesting: int) -> int:
        name = node.name.value
        at_root = parent is root and name != "__typename"
        if at_root and name in ("__schema", "__type"):
            return 1 + written([node.selection_set], FieldNode)
        definition = getattr(parent, "fields", {}).get(name)
        if node.selection_set is None or definition is None:
            return int(at_root)  # a leaf: a root field counts 1 all the same
        inner = selection(node.selection_set, get_named_type(definition.type), nesting + 1)
        count = 1
        if is_list_type(get_nullable_type(definition.type)):
            count = limit_of(parent, definition, node)
        return max(int(at_root), min(count * (1 + inner), CEILING))

    return max(1, selection(operation.selection_set, root, 0)) if root else 1


def price(document, operation_name: str | None, variables=None) -> tuple[int, str]:
    """What a request pays, the larger of the nodes it can return and the fields and spreads it
    writes (a fragment's once), at least 1; and a phrase saying why."""
    operation = get_operation_ast(document, operation_name)
    nodes = returned(document, operation, variables) if operation else 1
    fields = written([getattr(node, "selection_set", None) for node in document.definitions])
    if nodes >= fields:
        return max(1, nodes), f"could return {figure(nodes)} objects"
    return fields, f"writes {fields} fields and fragment spreads"


@by_text
def priced(text: str, operation_name: str | None) -> tuple[int, str]:
    """The price of a text without variables."""
    return price(parse_document(text), operation_name)


def check_limits(document, max_depth: int, max_aliases: int) -> None:
    """Raises QueryTooComplex if an operation is too deep (introspection's levels count 0), has
    too many aliases (a fragment's each time it is spread) or one response name too often."""
    empty = (0, 0, {})

    def shape(selection_set, nesting: int) -> tuple[int, int, dict]:
        """Depth, aliases and the count of each response name of a selection set."""
        check_nesting(nesting)
        depth, aliases, names, spread = 0, 0, {}, set()
        for node in selection_set.selections:
            if isinstance(node, FieldNode):
                inner = shape(node.selection_set, nesting + 1) if node.selection_set else empty
                below = 0 if node.name.value.startswith("__") else inner[0]
                found = (
                    1 + below,
                    (node.alias is not None) + inner[1],
                    {(node.alias or node.name).value: 1},
                )
            elif isinstance(node, InlineFragmentNode):
                found = shape(node.selection_set, nesting + 1)
            else:
                found = fragment(node.name.value, nesting)
                if node.name.value in spread:  # graphql-core merges a repeated spread once
                    found = (*found[:2], {})
                spread.add(node.name.value)
            depth, aliases = max(depth, found[0]), min(aliases + found[1], CEILING)
            for name, count in found[2].items():
                names[name] = names.get(name, 0) + count
                if names[name] > MAX_SAME_NAME:
                    raise QueryTooComplex(
                        f"The query selects '{name}' more than {MAX_SAME_NAME} times in one place."
                    )
        return depth, aliases, names

    fragment = by_fragment(
        document, lambda node, nesting: shape(node.selection_set, nesting), empty
    )
    for operation in document.definitions:
        if isinstance(operation, OperationDefinitionNode):
            depth, aliases, _ = shape(operation.selection_set, 0)
            if depth > max_depth:
                raise QueryTooComplex(
                    f"The query is {depth} levels deep; the limit is {max_depth}."
                )
            if aliases > max_aliases:
                raise QueryTooComplex(
                    f"The query has {figure(aliases)} aliases; the limit is {max_aliases}."
                )


@cache
def limits_rule(max_depth: int, max_aliases: int) -> type[ValidationRule]:
    """check_limits as a validation rule; it raises, so graphql-core's own rules (some of
    them quadratic) never see a document over the limits."""

    class Limits(ValidationRule):
        def enter_document(self, document, *_args):
            check_limits(document, max_depth, max_aliases)
            return self.SKIP

    return Limits
