"""A GraphQL document's limits and cost (SPEC §11a), in one walk linear in its size."""

from functools import lru_cache

from graphql import GraphQLSyntaxError, Undefined, parse
from graphql.type import get_named_type, get_nullable_type, is_list_type
from graphql.utilities import value_from_ast_untyped

from .. import schemas
from ..errors import QueryTooComplex
from .resolvers import executable_schema

MAX_QUERY_BYTES, MAX_TOKENS, MAX_VARIABLE_VALUES = 100 * 1024, 2000, 1000
MAX_NESTING = 100  # the walk recurses per level
MAX_SAME_NAME = 10  # graphql-core compares the fields of one response name pairwise
CACHED_TEXT_BYTES = 8 * 1024  # longer texts are parsed anew: distinct ones cannot grow the process
CEILING = 10**9  # counts saturate: a refusal needs no exact figure beyond it
LIST_LIMITS = {  # a `limit` outside its range fails the field, and nothing below it counts
    ("Query", "people"): schemas.PEOPLE_LIMITS,
    ("Person", "friends"): schemas.LIST_FIELD_LIMITS,
    ("Person", "messages"): schemas.LIST_FIELD_LIMITS,
}
EMPTY = (0, 0, 0, {})  # objects, depth, aliases, count of each response name


def kib(size: int) -> int:
    return -(-size // 1024)


def by_text(function):
    """`function(text, ...)`, its results kept for short texts (128 at most)."""
    cached = lru_cache(maxsize=128)(function)
    return lambda text, *args: (cached if len(text) <= CACHED_TEXT_BYTES else function)(text, *args)


@by_text
def parse_document(text: str):
    """The document; QueryTooComplex over a parser's limit, GraphQLSyntaxError otherwise."""
    try:
        return parse(text, max_lexical_tokens=MAX_TOKENS, max_comments=MAX_TOKENS)
    except GraphQLSyntaxError as error:
        if error.message.endswith(" Parsing aborted."):  # one of the limits, not a typo
            detail = error.message.removeprefix("Syntax Error: ").removesuffix(" Parsing aborted.")
            raise QueryTooComplex(detail) from None
        raise


def check_variables(variables) -> None:
    count, pending = 0, [variables or {}]
    while pending:
        value = pending.pop()
        if isinstance(value, (dict, list)):
            if (count := count + len(value)) > MAX_VARIABLE_VALUES:
                raise QueryTooComplex(
                    f"The variables hold more than {MAX_VARIABLE_VALUES} values; send fewer."
                )
            pending.extend(value.values() if isinstance(value, dict) else value)


def figure(value: int) -> str:
    return str(value) if value < CEILING else f"more than {CEILING - 1}"


def written(selection_sets, kinds=("field", "fragment_spread")) -> int:
    """The fields and fragment spreads written in these selection sets (spreads not followed)."""
    count, pending = 0, [s for s in selection_sets if s is not None]
    while pending:
        for node in pending.pop().selections:
            count += node.kind in kinds
            if getattr(node, "selection_set", None) is not None:
                pending.append(node.selection_set)
    return count


def price(document, operation, variables, max_depth: int, max_aliases: int) -> tuple:
    """The cost (objects `operation` returns or fields written), why, and a limit broken."""
    schema = executable_schema()
    roots = [kind for kind in (schema.query_type, schema.mutation_type) if kind]
    definitions = document.definitions
    fragments = {n.name.value: n for n in definitions if n.kind == "fragment_definition"}
    memo, problems = {}, []  # a fragment is measured once, however often it is spread
    values = {
        node.variable.name.value: value_from_ast_untyped(node.default_value)
        for node in getattr(operation, "variable_definitions", None) or ()
        if node.default_value is not None
    } | (variables or {})

    def limit_of(parent, definition, node) -> int:
        if not is_list_type(get_nullable_type(definition.type)):
            return 1
        given = next((a.value for a in node.arguments or () if a.name.value == "limit"), None)
        value = value_from_ast_untyped(given, values) if given else None
        default = getattr(definition.args.get("limit"), "ast_node", None)
        if (value is None or value is Undefined) and default and default.default_value:
            value = value_from_ast_untyped(default.default_value)  # the resolvers' too
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            return 1  # a limit of the wrong type fails the request; a list is at least one
        low, high = LIST_LIMITS.get((parent.name, node.name.value), (0, CEILING))
        return value if low <= value <= high else 0

    def spread(name: str, nesting: int) -> tuple:
        if name not in memo:
            memo[name] = EMPTY  # an unknown name or a cycle: validation reports both
            if name in fragments:
                memo[name] = selection(fragments[name], None, nesting + 1)
        return memo[name]

    def selection(outer, parent, nesting: int) -> tuple:
        """What the selection set of `outer` (on `parent`, or its type condition) returns."""
        if nesting > MAX_NESTING:
            raise QueryTooComplex("The query is nested too deeply.")
        if condition := getattr(outer, "type_condition", None):
            parent = schema.get_type(condition.name.value)
        objects, depth, aliases, names, spread_here = 0, 0, 0, {}, set()
        for node in outer.selection_set.selections:
            if node.kind == "field":
                found = field(node, parent, nesting)
            elif node.kind == "inline_fragment":
                found = selection(node, parent, nesting + 1)
            else:
                found = spread(node.name.value, nesting)
                if node.name.value in spread_here:  # graphql-core merges a repeated spread once
                    found = (*found[:3], {})
                spread_here.add(node.name.value)
            objects = min(objects + found[0], CEILING)
            depth, aliases = max(depth, found[1]), min(aliases + found[2], CEILING)
            for name, count in found[3].items():
                names[name] = names.get(name, 0) + count
                if names[name] == MAX_SAME_NAME + 1:
                    problems.append(
                        f"The query selects '{name}' more than {MAX_SAME_NAME} times in one place."
                    )
        return objects, depth, aliases, names

    def field(node, parent, nesting: int) -> tuple:
        name = node.name.value
        definition = getattr(parent, "fields", {}).get(name)
        inner = EMPTY
        if node.selection_set is not None:
            kind = get_named_type(definition.type) if definition else None
            inner = selection(node, kind, nesting + 1)
        at_root = parent in roots and name != "__typename"  # a root field counts at least 1
        if at_root and name in ("__schema", "__type"):  # each field written below counts once
            objects = 1 + written([node.selection_set], ("field",))
        elif definition is None or node.selection_set is None:
            objects = int(at_root)
        else:
            count = limit_of(parent, definition, node)
            objects = max(int(at_root), min(count * (1 + inner[0]), CEILING))
        depth = 1 + (0 if name.startswith("__") else inner[1])  # introspection adds no depth
        aliases = (node.alias is not None) + inner[2]
        return objects, depth, aliases, {(node.alias or node.name).value: 1}

    objects = 1
    for node in definitions:
        if node.kind == "fragment_definition":
            spread(node.name.value, 0)  # an unused one is validated all the same
        elif node.kind == "operation_definition":
            found = selection(node, schema.get_root_type(node.operation), 0)
            if found[1] > max_depth:
                problems.append(f"The query is {found[1]} levels deep; the limit is {max_depth}.")
            if found[2] > max_aliases:
                problems.append(
                    f"The query has {figure(found[2])} aliases; the limit is {max_aliases}."
                )
            if node is operation:
                objects = max(1, found[0])
    fields = written([getattr(node, "selection_set", None) for node in definitions])
    problem = problems[0] if problems else None
    if objects >= fields:
        return objects, f"could return {figure(objects)} objects", problem
    return fields, f"writes {fields} fields and fragment spreads", problem
