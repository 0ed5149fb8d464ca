"""``hailq``: the operator command line.

The click group ``cli`` collects the commands of the ``commands_*`` modules
and, loaded only when asked for, the ``worker`` command of ``hailq.cli.worker``.
``main()`` is the console script: it turns every failure into one line on
stderr and an exit code (see ``hailq.cli.failure``).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Sequence

import click

import hailq
from hailq.cli import (
    commands_admin,
    commands_dead,
    commands_history,
    commands_metrics,
    commands_operate,
    commands_queues,
    commands_send,
    commands_topics,
)
from hailq.cli.context import common_options
from hailq.cli.failure import run_safely

# name -> (module, attribute) of commands owned elsewhere, imported on first use.
LAZY_COMMANDS = {
    "worker": ("hailq.cli.worker", "worker_command"),
    "autoscale": ("hailq.cli.commands_autoscale", "autoscale_command"),
    "declare": ("hailq.cli.commands_declare", "declare_command"),
    "bench": ("hailq.bench.command", "bench_command"),
    "demo": ("hailq.demo.command", "demo_command"),
    "doctor": ("hailq.cli.commands_doctor", "doctor"),
    "schedules": ("hailq.cli.commands_schedules", "schedules"),
    "scheduler": ("hailq.cli.commands_schedules", "scheduler"),
    "serve": ("hailq.cli.commands_serve", "serve"),
    "top": ("hailq.cli.commands_top", "top_command"),
}


class HailqGroup(click.Group):
    """A group that also offers the lazily imported commands that are installed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        lazy = [name for name, (module, _) in LAZY_COMMANDS.items() if _installed(module)]
        return sorted({*super().list_commands(ctx), *lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in LAZY_COMMANDS:
            command = _load(cmd_name, *LAZY_COMMANDS[cmd_name])
        return command


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _load(name: str, module: str, attribute: str) -> click.Command | None:
    """The command, None when its module does not exist, or a stand-in that explains why
    it cannot be loaded (so one broken command never breaks the others)."""
    try:
        command = getattr(importlib.import_module(module), attribute)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return None
        return _unavailable(name, f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # a broken module must not take the whole CLI down
        return _unavailable(name, f"{type(exc).__name__}: {exc}")
    if not isinstance(command, click.Command):
        return _unavailable(name, f"{module}.{attribute} is not a click command")
    return command


def _unavailable(name: str, why: str) -> click.Command:
    def fail() -> None:
        raise click.ClickException(f"the {name} command cannot be loaded ({why})")

    return click.Command(name, callback=fail, help=f"Unavailable: {why}",
                         context_settings={"ignore_unknown_options": True,
                                           "allow_extra_args": True})


@click.group(cls=HailqGroup, context_settings={"help_option_names": ["-h", "--help"],
                                               "max_content_width": 100})
@common_options
@click.version_option(hailq.__version__, "--version", prog_name="hailq")
def cli() -> None:
    """Operate hailq queues: send, inspect, redrive and purge messages.

    Every command takes --url (or HAILQ_URL; default sqlite:///hailq.db) and
    --json, before or after the command name; bench, which empties what it
    measures, takes neither, and demo runs in a workspace of its own unless
    given --url (never in HAILQ_URL). Output is a table on a terminal
    and JSON with --json. Errors are one line on stderr starting with
    'hailq: error:'. Exit codes: 0 success; 2 bad input, refused before
    anything was done (unknown option, bad value, body, message, URL or
    worker target, a URL whose backend is not installed); 1 a failure while
    doing it (database unreachable, no such database file, queue or topic,
    ...); 3 'hailq doctor' found something; 130 interrupted. Passwords in URLs
    are never printed.
    """


for _module in (commands_send, commands_queues, commands_dead, commands_topics, commands_admin,
                commands_metrics, commands_operate, commands_history):
    for _command in _module.COMMANDS:
        cli.add_command(_command)


def run(args: Sequence[str] | None = None) -> int:
    """Run the CLI on ``args`` (default ``sys.argv[1:]``); return the exit code."""
    argv = list(sys.argv[1:] if args is None else args)

    def invoke() -> int:
        result = cli.main(args=argv, prog_name="hailq", standalone_mode=False)
        return result if isinstance(result, int) else 0

    return run_safely(invoke, argv)


def main() -> None:
    """The ``hailq`` console script."""
    sys.exit(run())


if __name__ == "__main__":
    main()
