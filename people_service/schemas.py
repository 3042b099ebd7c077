"""Marshmallow schemas: every input rule of REST, GraphQL, the CLI and the OpenAPI document."""

import re
from itertools import permutations

from marshmallow import EXCLUDE, RAISE, Schema, ValidationError, fields, validate, validates_schema

from . import passwords
from .config import limit_problem
from .errors import Invalid, ServiceError

ID_PATTERN = r"^[1-9][0-9]{0,17}$"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$"
NAME_RULE = "1 to 64 letters, digits or . _ @ -, starting with a letter or digit."
SCOPES = ("read", "write", "admin")


def full_match(pattern: str, error: str) -> validate.Regexp:
    """A validator: the whole value matches (`$` alone also matches before a final newline)."""
    return validate.Regexp(pattern.removesuffix("$") + r"\Z", error=error)


def is_id(value) -> bool:
    return isinstance(value, str) and re.fullmatch(ID_PATTERN, value) is not None


def is_username(value) -> bool:
    return isinstance(value, str) and re.fullmatch(NAME_PATTERN, value) is not None


NO_NUL = "^[^\\x00]*$"


def _storable(value: str) -> None:
    """JSON allows "\u0000" and lone surrogates ("\ud800"); neither can be stored or echoed."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError("Must be valid Unicode (no lone surrogates).") from None
    if "\x00" in value:
        raise ValidationError("Must not contain NUL characters.")


def text(max_length: int, min_length: int = 0, *rules, metadata=None, **kwargs):
    """A string that SQLite and UTF-8 can hold, of a length between the two (the document
    says no NUL; JSON Schema cannot say "no lone surrogates")."""
    length = validate.Length(min=min_length, max=max_length)
    metadata = {"pattern": NO_NUL, **(metadata or {})}
    return fields.String(validate=[_storable, length, *rules], metadata=metadata, **kwargs)


ID_RULE = full_match(ID_PATTERN, "Not a valid id.")


def id_field(metadata: dict | None = None, **kwargs) -> fields.String:
    """A person or message id as a string: "17"."""
    metadata = {"pattern": ID_PATTERN, "example": "17", **(metadata or {})}
    return fields.String(validate=ID_RULE, metadata=metadata, **kwargs)


class WholeNumber(fields.Integer):
    """A JSON integer: 36 and 36.0 (the same number in JSON), never 36.5, "36" or true."""

    def __init__(self, **kwargs):
        super().__init__(strict=True, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        value = int(value) if isinstance(value, float) and value.is_integer() else value
        return super()._deserialize(value, attr, data, **kwargs)


class Count(WholeNumber):
    """A whole number in a range, from JSON or from a query string of ASCII digits only."""

    def __init__(self, minimum: int, maximum: int, **kwargs):
        self.bounds, error = (minimum, maximum), f"Must be between {minimum} and {maximum}."
        super().__init__(validate=validate.Range(minimum, maximum, error=error), **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        # int("1_0"), int(" 7 ") and int("٣") all succeed; a query string must be plain digits
        # (a minus sign allowed, so that -1 gets the range's message, as in JSON and GraphQL)
        if isinstance(value, str):
            if not re.fullmatch(r"-?[0-9]{1,12}", value):
                raise ValidationError("Must be a whole number.")
            value = int(value)
        return super()._deserialize(value, attr, data, **kwargs)


# marshmallow's Email rule in its ASCII form, for the OpenAPI document
_ATOM = r"[-!#$%&'*+/=?^`{}|~0-9A-Za-z_]+"
_LABEL = r"[0-9A-Za-z](?:[0-9A-Za-z-]{0,61}[0-9A-Za-z])?"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|[01]?[0-9]?[0-9])"
EMAIL_PATTERN = (
    rf"^{_ATOM}(?:\.{_ATOM})*@(?:(?:{_LABEL}\.)+(?:[A-Za-z]{{2,6}}|[0-9A-Za-z-]{{2,}})"
    rf"|localhost|\[{_OCTET}(?:\.{_OCTET}){{3}}\])$"
)
EMAIL_RULE = "An address such as ada@example.org, unique among people ignoring case (409)."


class AddressSchema(Schema):
    street, city, country = (text(200, allow_none=True) for _ in range(3))


class PersonSchema(Schema):
    name = text(200, 1, required=True)
    age = WholeNumber(allow_none=True, validate=validate.Range(min=0, max=150))
    email = fields.Email(
        allow_none=True,
        validate=validate.Length(max=254),
        metadata={"pattern": EMAIL_PATTERN, "description": EMAIL_RULE},
    )
    address = fields.Nested(AddressSchema, allow_none=True)


class PersonPatchSchema(PersonSchema):
    name = text(200, 1)


class PersonUpdateSchema(PersonPatchSchema):
    id = id_field(required=True)


class MessageSchema(Schema):
    person_id, content = id_field(required=True), text(10_000, 1, required=True)


class PageSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    limit, offset = Count(1, 1000, load_default=100), Count(0, 2**31 - 1, load_default=0)


SORT_KEYS = ("id", "name", "age")
_ORDERS = [order for size in (1, 2, 3) for order in permutations(SORT_KEYS, size)]
# Every valid `sort` value, for the OpenAPI document (the field's checks give the messages)
SORT_PATTERN = "^(" + "|".join(",".join(f"-?{key}" for key in order) for order in _ORDERS) + ")$"
SORT_RULE = "use id, name or age, each optionally prefixed with '-' (descending)"


class SortOrder(fields.String):
    """'name,-age' (REST) or a list of such items (GraphQL), as (key, descending) pairs."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, str) and len(value) > 100:
            raise ValidationError(f"Too long; {SORT_RULE}.")
        if not isinstance(value, str | list | tuple):
            raise ValidationError(
                f"Must be a comma-separated list such as 'name,-age'; {SORT_RULE}."
            )
        order: dict[str, bool] = {}  # a repeated key stops the loop by the fourth item
        for item in value.split(",") if isinstance(value, str) else value:
            if not isinstance(item, str) or not item:
                raise ValidationError(f"Has an empty item; {SORT_RULE}, separated by commas.")
            if (key := item.removeprefix("-")) not in SORT_KEYS:
                raise ValidationError(f"Unknown sort key '{item[:40]}'; {SORT_RULE}.")
            if key in order:
                raise ValidationError(f"Sorts by '{key}' twice; give each key once.")
            order[key] = item.startswith("-")
        return tuple(order.items())


class PeopleQuerySchema(PageSchema):
    name, city, country = text(200), text(200), text(200)
    min_age, max_age = Count(0, 150), Count(0, 150)
    sort = SortOrder(metadata={"pattern": SORT_PATTERN, "example": "name,-age"})

    @validates_schema
    def _ages_in_order(self, data, **kwargs):
        if data.get("min_age", 0) > data.get("max_age", 150):
            raise ValidationError("Must not be greater than the maximum age.", "min_age")


class ImportPersonSchema(PersonSchema):
    id, friends = id_field(required=True), fields.List(id_field(), load_default=list)


class Scopes(fields.Field):
    """Scopes as 'read,write', 'read write' or a list: some of read, write and admin."""

    def _deserialize(self, value, attr, data, **kwargs):
        items = value.replace(",", " ").split() if isinstance(value, str) else value
        if not isinstance(items, list) or not items or not all(i in SCOPES for i in items):
            raise ValidationError(f"Must be some of {', '.join(SCOPES)}.")
        return [scope for scope in SCOPES if scope in items]


def _rate_limit(value: str) -> None:
    if problem := limit_problem(value):
        raise ValidationError(f"Must {problem}.")


def _not_guessable(password: str) -> None:
    if len(password) >= passwords.MIN_LENGTH and passwords.guessable(password):
        raise ValidationError("Too common or too easy to guess; choose another.")


class GrantSchema(Schema):
    scopes = Scopes(load_default=lambda: ["read", "write"])
    rate_limit = fields.String(load_default=None, allow_none=True, validate=_rate_limit)


class KeyRequestSchema(GrantSchema):
    name = fields.String(required=True, validate=full_match(NAME_PATTERN, NAME_RULE))


class UserRequestSchema(GrantSchema):
    username = fields.String(required=True, validate=full_match(NAME_PATTERN, NAME_RULE))
    password = text(1024, passwords.MIN_LENGTH, _not_guessable, required=True)


class TokenRequestSchema(Schema):
    username, password = text(200, 1, required=True), text(1024, 1, required=True)


person_schema, person_patch_schema = PersonSchema(), PersonPatchSchema()
person_update_schema, message_schema = PersonUpdateSchema(), MessageSchema()
people_query_schema, page_schema = PeopleQuerySchema(), PageSchema()
list_field_schema = Schema.from_dict({"limit": Count(0, 100, load_default=10)})()
# the `limit` of a page of people, and of a list inside a person (friends, messages)
PEOPLE_LIMITS = page_schema.fields["limit"].bounds
LIST_FIELD_LIMITS = list_field_schema.fields["limit"].bounds
person_name_schema = Schema.from_dict({"name": text(200, required=True)})()
import_schema = Schema.from_dict(
    {"people": fields.List(fields.Nested(ImportPersonSchema), required=True)}
)()
token_request_schema, key_request_schema = TokenRequestSchema(), KeyRequestSchema()
user_request_schema, password_schema = UserRequestSchema(), UserRequestSchema(only=("password",))


def _lines(errors, prefix: str = ""):
    if isinstance(errors, dict):
        for key, value in errors.items():
            name = prefix if key == "_schema" else f"{prefix}.{key}" if prefix else str(key)
            yield from _lines(value, name)
    elif isinstance(errors, list):
        for item in errors:
            yield from _lines(item, prefix)
    else:
        yield f"{prefix}: {errors}" if prefix else str(errors)


def sentence(errors) -> str:
    """Field messages as one readable detail: 'name: Length must be between 1 and 200.'"""
    return " ".join(line if line[-1:] in ".?!" else line + "." for line in _lines(errors))


JSON_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number"}
JSON_KINDS |= {bool: "true or false", type(None): "null"}
MAX_UNKNOWN = 10  # unknown fields of one object given to marshmallow, which is slow to name many


def _pruned(schema: Schema, data: dict) -> tuple[dict, int]:
    """`data` without the unknown fields past MAX_UNKNOWN per object, and how many were cut."""
    if schema.unknown != RAISE:
        return data, 0
    known, pruned, unknown, left_out = schema.load_fields, {}, 0, 0
    for key, value in data.items():
        field = known.get(key)
        if field is None:
            unknown += 1
            if unknown > MAX_UNKNOWN:
                left_out += 1
                continue
        elif isinstance(field, fields.Nested) and isinstance(value, dict) and not field.many:
            value, more = _pruned(field.schema, value)
            left_out += more
        pruned[key] = value
    return pruned, left_out


def load(schema: Schema, data, *, error: type[ServiceError] = Invalid) -> dict:
    """`data` checked by `schema`; raises `error` with the field messages."""
    if not isinstance(data, dict):  # marshmallow would say only "Invalid input type."
        message = f"Must be a JSON object, not {JSON_KINDS.get(type(data), 'that')}."
        raise error(message, errors={"_schema": [message]})
    data, left_out = _pruned(schema, data)
    try:
        return schema.load(data)
    except ValidationError as exc:
        errors = exc.messages
        if left_out:
            errors["_schema"] = [*errors.get("_schema", []), f"And {left_out} more unknown fields."]
        raise error(sentence(errors), errors=errors) from None
