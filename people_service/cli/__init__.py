"""The `people-service` command (click): serve, init-db, keys, users, import, export, migrate."""

from . import commands, webhooks  # noqa: F401  (adds the commands to the group)
from .base import cli, main

__all__ = ["cli", "main"]
