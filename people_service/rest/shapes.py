"""The shapes of REST answers, for the OpenAPI document (the service builds the answers)."""

from marshmallow import Schema, fields, validate

from .. import schemas


class AddressOutSchema(Schema):
    street = fields.String(required=True, allow_none=True)
    city = fields.String(required=True, allow_none=True)
    country = fields.String(required=True, allow_none=True)


class PersonEntrySchema(Schema):
    id = fields.String(required=True, metadata={"example": "17"})
    name = fields.String(required=True)


class PersonOutSchema(PersonEntrySchema):
    age = fields.Integer(required=True, allow_none=True)
    email = fields.String(required=True, allow_none=True)
    address = fields.Nested(AddressOutSchema, required=True)


class MessageOutSchema(Schema):
    id = fields.String(required=True)
    person_id = fields.String(required=True)
    content = fields.String(required=True)
    sender = fields.String(required=True)
    created_at = fields.String(
        required=True, metadata={"format": "date-time", "example": "2026-11-22T03:44:24.123Z"}
    )


class TokenSchema(Schema):
    access_token = fields.String(required=True)
    token_type = fields.String(required=True, metadata={"example": "Bearer"})
    expires_in = fields.Integer(required=True, metadata={"example": 3600})


class CallerSchema(Schema):
    kind = fields.String(required=True, validate=validate.OneOf(["api_key", "user"]))
    name = fields.String(required=True)
    scopes = fields.List(fields.String(), required=True)
    rate_limit = fields.String(required=True)
    request_count = fields.Integer(required=True)
    last_used = fields.String(required=True, allow_none=True)


class HealthSchema(Schema):
    status = fields.String(required=True, validate=validate.OneOf(["ok", "unavailable"]))
    database = fields.String(
        required=True,
        validate=validate.OneOf(["ok", "missing", "read-only", "unreadable", "unreachable"]),
    )


class ProblemSchema(Schema):
    type = fields.String(required=True, metadata={"example": "about:blank"})
    title = fields.String(required=True, metadata={"example": "Unprocessable Entity"})
    status = fields.Integer(required=True, metadata={"example": 422})
    detail = fields.String(required=True)
    errors = fields.Dict(
        metadata={
            "description": "Field messages, nested the way the body nests fields (422); "
            "at most 50 messages.",
            "example": {"address": {"city": ["Longer than maximum length 200."]}},
        }
    )
    errors_omitted = fields.Integer(
        metadata={"description": "How many field messages were left out of `errors`."}
    )


# Bodies as the OpenAPI document describes them where the service accepts more than the
# rule's schema: PUT and PATCH may repeat the path's id (the service checks and drops it).
PATH_ID = {"description": "The id of the path, repeated; any other id is refused (422)."}


class PersonReplaceSchema(schemas.PersonSchema):
    id = schemas.Id(metadata=PATH_ID)


class PersonMergeSchema(schemas.PersonPatchSchema):
    id = schemas.Id(metadata=PATH_ID)
