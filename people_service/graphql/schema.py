"""The executable GraphQL schema: schema.graphql bound to the resolvers, built once."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from ariadne import load_schema_from_path, make_executable_schema

from .resolvers import bindables

# The SDL lives at the repository root; the package holds a link to it so installs find it too.
SCHEMA_PATH = Path(__file__).with_name("schema.graphql")


@cache
def sdl() -> str:
    """The schema's SDL text, as written."""
    return load_schema_from_path(str(SCHEMA_PATH))


@cache
def executable_schema():
    return make_executable_schema(sdl(), *bindables, convert_names_case=True)
