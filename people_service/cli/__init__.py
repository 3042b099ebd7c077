"""The `people-service` command (click): serve, init-db, keys, users, import, export, migrate."""

from __future__ import annotations

import click
from click.exceptions import NoArgsIsHelpError

from ..config import ConfigError
from ..errors import ServiceError
from . import data, keys, serve, users  # noqa: F401  (each adds its commands to the group)
from .base import cli, reason

__all__ = ["cli", "main"]


def main(argv=None) -> int:
    """Run the command; every error is one line on stderr and a non-zero status."""
    try:
        result = cli.main(args=argv, prog_name="people-service", standalone_mode=False)
    except ConfigError as exc:
        click.echo(f"people-service: configuration error: {exc}", err=True)
        return 2
    except NoArgsIsHelpError as exc:  # a group called alone: its help, as click shows it
        exc.show()
        return exc.exit_code
    except click.UsageError as exc:
        click.echo(f"people-service: {exc.format_message()} (see --help)", err=True)
        return 2
    except click.ClickException as exc:
        click.echo(f"people-service: {exc.format_message()}", err=True)
        return 1
    except ServiceError as exc:
        click.echo(f"people-service: {exc.detail}", err=True)
        return 1
    except (KeyboardInterrupt, click.Abort):
        return 130
    except OSError as exc:  # the file system refused: say which file, not which exception
        where = f"cannot access {exc.filename}: " if exc.filename else ""
        click.echo(f"people-service: {where}{reason(exc)}", err=True)
        return 1
    except Exception as exc:  # a CLI error is one line, never a traceback
        click.echo(f"people-service: unexpected error: {reason(exc)}", err=True)
        return 1
    return result if isinstance(result, int) else 0
