"""The webhook commands (webhooks create, list and delete, `deliver` on its own), and --db on
every subcommand: added to the `people-service` group by cli.py, which passes its helpers."""

import signal
import threading

import click

from . import webhooks
from .errors import Invalid, NotFound


def add_to(cli: click.Group, *, opened, settings, table, database_help: str) -> None:
    """Add the webhook commands to `cli`, then --db to every subcommand of it."""

    @cli.group("webhooks")
    def webhooks_group():
        """Webhooks: URLs that receive the events, signed (see docs/events.md)."""

    @webhooks_group.command("create")
    @click.argument("url")
    @click.option(
        "--events", help="Comma list of event types (default: every type, also later ones)."
    )
    @click.option("--description", help="What the webhook is for.")
    def webhooks_create(database, url, events, description):
        """Create a webhook for URL; its secret is printed once, alone on the last line."""
        data = {"url": url, "events": events.split(",") if events is not None else None}
        if description is not None:
            data["description"] = description
        try:
            webhook = webhooks.create_webhook(opened(database), data, settings(database))
        except Invalid as exc:
            raise click.ClickException(exc.detail) from None
        click.echo(
            f"created webhook {webhook['id']} for {webhook['url']}; its secret (shown once):"
        )
        click.echo(webhook["secret"])

    @webhooks_group.command("list")
    def webhooks_list(database):
        """The webhooks, one a line, id first."""
        rows = [
            (
                hook["id"],
                hook["url"],
                ",".join(hook["events"]) if hook["events"] is not None else "(all)",
                "yes" if hook["enabled"] else "no",
                hook["created_at"],
            )
            for hook in opened(database).list_webhooks()
        ]
        table(("id", "url", "events", "enabled", "created"), rows)

    @webhooks_group.command("delete")
    @click.argument("id")
    def webhooks_delete(database, id):  # noqa: A002 (the argument's name in --help)
        """Delete the webhook ID and its deliveries."""
        webhook_id = id
        if not webhook_id.isdigit() or not webhook_id.isascii():
            raise click.ClickException(f"no webhook {webhook_id}")
        try:
            webhooks.delete_webhook(opened(database), webhook_id)
        except NotFound:
            raise click.ClickException(f"no webhook {webhook_id}") from None
        click.echo(f"deleted webhook {webhook_id}")

    @cli.command()
    def deliver(database):
        """Deliver webhooks until SIGTERM or SIGINT (besides the serving processes, or alone)."""
        from . import delivery

        opened(database).close()  # the schema is up to date before the worker starts
        worker = delivery.Deliverer(settings(database))
        stop = threading.Event()
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, lambda *_: stop.set())
        worker.start()
        click.echo("delivering webhooks; stop with Ctrl-C or SIGTERM", err=True)
        while not stop.wait(1):
            if not worker.thread.is_alive():
                raise click.ClickException("the delivery thread ended")
        worker.stop(wait=worker.timeout + 2)
        return 0

    def database(ctx, param, value):  # --db after the subcommand, else the group's
        return value if value is not None else ctx.find_root().params.get("database")

    # click's option decorator adds a parameter to a Command it is given
    db = click.option("--db", "database", metavar="PATH", callback=database, help=database_help)
    groups = [cli, *(c for c in cli.commands.values() if isinstance(c, click.Group))]
    for group in groups:
        for command in group.commands.values():
            if not isinstance(command, click.Group):
                db(command)
