"""A graphql-core executor that completes objects of plain scalar fields without per-field work."""

from graphql import GraphQLNonNull, GraphQLObjectType, get_nullable_type, is_leaf_type
from graphql.execution.executor import Executor

_SLOW = object()


class LeafExecutor(Executor):
    """graphql-core's executor, completing an object of plain dict scalars in one loop."""

    _plans: dict = {}  # (type, *response and field names) -> [(name, field, serialize, non-null)]

    def complete_list_value(
        self, return_type, field_details_list, info, path, result, position_context
    ):
        # a list of such objects (friends, people) is built in one loop, item by item
        named = get_nullable_type(return_type.of_type)
        if (
            type(result) is list
            and isinstance(named, GraphQLObjectType)
            and named.is_type_of is None
            and self.middleware_manager is None
        ):
            grouped, new_defer_usages = self.collect_subfields(named, field_details_list)[:2]
            plan = None if new_defer_usages else self._plan(named, grouped)
            if plan is not None:
                items = [self._complete(plan, item) for item in result]
                if _SLOW not in items:
                    return items
        return super().complete_list_value(
            return_type, field_details_list, info, path, result, position_context
        )

    def execute_fields(self, parent_type, source_value, path, grouped_field_set, position_context):
        if type(source_value) is dict and self.middleware_manager is None:
            plan = self._plan(parent_type, grouped_field_set)
            if plan is not None:
                result = self._complete(plan, source_value)
                if result is not _SLOW:
                    return result
        return super().execute_fields(
            parent_type, source_value, path, grouped_field_set, position_context
        )

    @staticmethod
    def _complete(plan, source):
        if type(source) is not dict:
            return _SLOW
        result = {}
        for response_name, field_name, serialize, non_null in plan:
            value = source.get(field_name)
            if callable(value):
                return _SLOW
            try:
                value = None if value is None else serialize(value)
            except Exception:
                return _SLOW
            if value is None and non_null:
                return _SLOW
            result[response_name] = value
        return result

    def _plan(self, parent_type, grouped_field_set):
        # keyed by the field names too: aliases let the same response names stand for others
        items = grouped_field_set.items()
        key = (parent_type, *((name, details[0].node.name.value) for name, details in items))
        plans = LeafExecutor._plans
        if key in plans:
            return plans[key]
        plan = []
        for response_name, details in items:
            field_name = details[0].node.name.value
            definition = parent_type.fields.get(field_name)
            named = None if definition is None else get_nullable_type(definition.type)
            if (
                not is_leaf_type(named)
                or definition.resolve is not None
                or any(detail.node.arguments or detail.defer_usage for detail in details)
            ):
                plan = None
                break
            non_null = isinstance(definition.type, GraphQLNonNull)
            plan.append((response_name, field_name, named.serialize, non_null))
        if len(plans) < 4096:
            plans[key] = plan
        return plan
