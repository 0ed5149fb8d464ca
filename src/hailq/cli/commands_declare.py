"""``hailq declare TARGET``: an app's queues, subscriptions and schedules, stored before
any producer or worker starts (rule 19: a publish reaches only subscriptions that exist)."""

from __future__ import annotations

import click

from hailq.cli.context import common_options, current_app
from hailq.runtime.app import app_for, load_target
from hailq.runtime.declare import declare


@click.command("declare")
@click.argument("target")
@common_options
def declare_command(target: str) -> None:
    """Declare what TARGET (module:app) needs, without starting workers.

    Its handlers' queues with their settings, its subscribers' topics and
    subscriptions (with their filters), and its periodic schedules. Run it in a
    deployment before producers start: a message published before a
    subscription exists does not reach it. Idempotent: running it again
    changes nothing, or updates settings that changed in the code. Creates
    hailq's tables if the database has none.
    """
    app = current_app()
    handlers = app_for(load_target(target))  # before connecting: a bad target fails first
    with app.broker(create=True) as broker:
        done = declare(broker, handlers)
    if app.out.json:
        app.out.emit_json({"queues": done.queues,
                           "subscriptions": [{"topic": t, "subscription": s}
                                             for t, s in done.subscriptions],
                           "schedules": done.schedules})
        return
    subs = {s for _, s in done.subscriptions}
    for name in done.queues:
        if name not in subs:
            click.echo(f"queue {name}")
    for topic, sub in done.subscriptions:
        click.echo(f"subscription {sub} of topic {topic}")
    for name in done.schedules:
        click.echo(f"schedule {name}")
