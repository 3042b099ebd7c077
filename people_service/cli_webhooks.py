"""The `webhooks` commands and `deliver`."""

import signal
import threading

import click

from . import webhooks as service
from .cli_base import Fail, opened, settings, table


@click.group()
def webhooks():
    """Webhooks: URLs that receive the events, signed (see docs/events.md)."""


@webhooks.command("create")
@click.argument("url")
@click.option("--events", help="Comma list of event types (default: every type, also later ones).")
@click.option("--description", help="What the webhook is for.")
def webhooks_create(url, events, description):
    """Create a webhook for URL; its secret is printed once, alone on the last line."""
    events = events if events is None else events.split(",")
    data = {"url": url, "events": events, "description": description}
    webhook = service.create_webhook(opened(), data, settings())
    click.echo(f"created webhook {webhook['id']} for {webhook['url']}; its secret (shown once):")
    click.echo(webhook["secret"])


@webhooks.command("list")
def webhooks_list():
    """List the webhooks, one a line, id first."""
    rows = []
    for hook in opened(create=False).list_webhooks():
        events = "(all)" if hook["events"] is None else ",".join(hook["events"])
        enabled = "yes" if hook["enabled"] else "no"
        rows.append((hook["id"], hook["url"], events, enabled, hook["created_at"]))
    table(("id", "url", "events", "enabled", "created"), rows)


@webhooks.command("delete")
@click.argument("id", type=click.IntRange(1, 2**63 - 1))
def webhooks_delete(id):
    """Delete the webhook ID and its deliveries."""
    service.delete_webhook(opened(), id)
    click.echo(f"deleted webhook {id}")


@click.command()
def deliver():
    """Deliver webhooks until SIGTERM or SIGINT (beside the serving processes, or alone)."""
    from . import delivery

    store = opened()  # the schema is up to date before the worker starts
    worker, stop = delivery.Deliverer(settings(), store), threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stop.set())
    worker.start()
    click.echo("delivering webhooks; stop with Ctrl-C or SIGTERM", err=True)
    while not stop.wait(1):
        if not worker.thread.is_alive():
            raise Fail("the delivery thread ended")
    worker.close(wait=worker.timeout + 2)
    store.close()
