"""The webhook commands (webhooks create, list and delete; deliver): added to the
`people-service` group by cli.py, which passes its helpers."""

import signal
import threading

import click

from . import webhooks


def add_to(cli: click.Group, *, opened, settings, table) -> None:
    """Add the webhook commands to `cli`."""

    @cli.group("webhooks")
    def webhooks_group():
        """Webhooks: URLs that receive the events, signed (see docs/events.md)."""

    @webhooks_group.command("create")
    @click.argument("url")
    @click.option(
        "--events", help="Comma list of event types (default: every type, also later ones)."
    )
    @click.option("--description", help="What the webhook is for.")
    def webhooks_create(url, events, description):
        """Create a webhook for URL; its secret is printed once, alone on the last line."""
        events = events.split(",") if events is not None else None
        data = {"url": url, "events": events, "description": description}
        webhook = webhooks.create_webhook(opened(), data, settings())
        click.echo(
            f"created webhook {webhook['id']} for {webhook['url']}; its secret (shown once):"
        )
        click.echo(webhook["secret"])

    @webhooks_group.command("list")
    def webhooks_list():
        """The webhooks, one a line, id first."""
        rows = [
            (
                hook["id"],
                hook["url"],
                ",".join(hook["events"]) if hook["events"] is not None else "(all)",
                "yes" if hook["enabled"] else "no",
                hook["created_at"],
            )
            for hook in opened().list_webhooks()
        ]
        table(("id", "url", "events", "enabled", "created"), rows)

    @webhooks_group.command("delete")
    @click.argument("id", type=click.IntRange(1, 2**63 - 1))
    def webhooks_delete(id):  # the argument's name in --help
        """Delete the webhook ID and its deliveries."""
        webhooks.delete_webhook(opened(), id)
        click.echo(f"deleted webhook {id}")

    @cli.command()
    def deliver():
        """Deliver webhooks until SIGTERM or SIGINT (besides the serving processes, or alone)."""
        from . import delivery

        store = opened()  # the schema is up to date before the worker starts
        worker = delivery.Deliverer(settings(), store)
        stop = threading.Event()
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, lambda *_: stop.set())
        worker.start()
        click.echo("delivering webhooks; stop with Ctrl-C or SIGTERM", err=True)
        while not stop.wait(1):
            if not worker.thread.is_alive():
                raise click.ClickException("the delivery thread ended")
        worker.close(wait=worker.timeout + 2)
        store.close()
