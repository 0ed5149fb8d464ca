"""What every command shares: the broker URL, the output mode, and opening the broker.

This is the only place in hailq that reads an environment variable
(``HAILQ_URL``). ``--url`` and ``--json`` are accepted both before the
command (``hailq --json queues``) and after it (``hailq queues --json``);
the one nearer the command wins.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

import hailq
from hailq.cli.output import Output
from hailq.ids import check_message_id
from hailq.settings import check_name
from hailq.url import DEFAULT_URL, BrokerURL, parse_url

ENV_URL = "HAILQ_URL"
_URL_KEY = "hailq.url"
_JSON_KEY = "hailq.json"

F = TypeVar("F", bound=Callable[..., Any])


def _remember(key: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value or (value == "" and key == _URL_KEY):  # a value actually given, even
            # an empty --url (an unset variable in a script), overrides one given earlier
            ctx.meta[key] = value
        return value
    return callback


URL_HELP = (f"Broker URL, sqlite:///path.db or postgresql://user@host:port/db "
            f"[env {ENV_URL}; default {DEFAULT_URL}].")


def common_options(f: F) -> F:
    """Add ``--url`` and ``--json`` to a group or command."""
    return options_with(URL_HELP, "Print JSON for scripts instead of tables.")(f)


def log_options(f: F) -> F:
    """``common_options`` for the commands that run and print a log, not tables
    (worker, autoscale, scheduler)."""
    return options_with(URL_HELP, "Write the log as JSON lines (time, level, logger, pid, "
                                  "message; queue, message_id and attempt on lines about "
                                  "a message) instead of text.")(f)


def options_with(url_help: str, json_help: str) -> Callable[[F], F]:
    """``common_options`` with help texts of a command's own (``hailq demo``)."""
    def add(f: F) -> F:
        f = click.option("--json", "json_mode", is_flag=True, expose_value=False,
                         callback=_remember(_JSON_KEY), help=json_help)(f)
        f = click.option("--url", metavar="URL", expose_value=False,
                         callback=_remember(_URL_KEY), help=url_help)(f)
        return f
    return add


def given_url(*, from_env: bool = True) -> str | None:
    """The broker URL of ``--url`` (nearest the command wins), else (with ``from_env``)
    ``HAILQ_URL``; None if neither is given."""
    url = click.get_current_context().meta.get(_URL_KEY)
    if url is None and from_env:
        url = os.environ.get(ENV_URL)  # set but empty stays "": refused, as connect() does
    return None if url is None else str(url)


def env_url_set() -> bool:
    """Whether ``HAILQ_URL`` is set, for a command that does not use it to say so."""
    return bool(os.environ.get(ENV_URL))


def json_requested() -> bool:
    """Whether ``--json`` was given, before or after the command name."""
    return bool(click.get_current_context().meta.get(_JSON_KEY))


class Finite(click.FloatRange):
    """A finite number within a range. click's FloatRange lets ``nan`` through (every
    comparison with it is false), which would fail later, mid-run."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def check_queue_name(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Click callback: reject a bad queue/topic name before anything is opened."""
    for name in value if isinstance(value, tuple) else [value]:
        if name is not None:
            try:
                check_name(name, f"{param.human_readable_name.lower()} name")
            except hailq.InvalidArgument as exc:
                raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    return value


def check_id(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Click callback: a message id as hailq makes them, before anything is opened (a
    bad one is bad input, exit 2, as ``InvalidArgument`` is in Python)."""
    for item in value if isinstance(value, tuple) else [value]:
        if item is not None:
            try:
                check_message_id(item)
            except hailq.InvalidArgument as exc:
                raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    return value


@dataclass(frozen=True)
class App:
    """The resolved options of one invocation."""

    url: str
    out: Output

    @contextmanager
    def broker(self, *, create: bool = False) -> Iterator[hailq.Broker]:
        """Open the broker, closing it afterwards.

        Without ``create``, a SQLite file that does not exist is an error rather
        than an empty database silently created by a typo in the path.
        """
        parsed = parse_url(self.url)
        if not create and parsed.scheme == "sqlite" and not Path(parsed.target).exists():
            raise click.ClickException(
                f"no hailq database at {parsed.target} ({parsed.display}); check --url or "
                f"{ENV_URL}, or create it with 'hailq migrate'")
        _quiet_driver_logs()
        broker = hailq.connect(self.url, migrate=False)
        try:
            if create:
                broker.migrate()
            else:
                self._check_schema(broker, parsed)
            yield broker
        finally:
            broker.close()

    @staticmethod
    def _check_schema(broker: hailq.Broker, parsed: BrokerURL) -> None:
        """A command that only looks neither installs nor upgrades hailq's schema: not in
        another application's database or a mistyped PostgreSQL schema, not under
        workers of an older hailq, not as a role that may only read."""
        found, latest = broker.schema_status()
        where = parsed.display + ("" if parsed.scheme == "sqlite" else
                                  f" (schema {parsed.options.get('schema', 'hailq')})")
        if found == 0:
            raise click.ClickException(
                f"no hailq schema at {where}: the database holds no hailq tables; check "
                f"--url or {ENV_URL}, or create them with 'hailq migrate'")
        if found < latest:
            raise click.ClickException(
                f"the hailq schema at {where} is version {found}, this hailq needs "
                f"{latest}: upgrade it with 'hailq migrate' (a command that only looks "
                "never does)")
        if found > latest:
            raise click.ClickException(
                f"the hailq schema at {where} is version {found}; this hailq knows up to "
                f"{latest}: upgrade hailq")

    def queue(self, broker: hailq.Broker, name: str) -> hailq.Queue:
        """An existing queue; a clear error (not a new queue) when it was never declared."""
        try:
            return broker.get_queue(name)
        except hailq.QueueNotFound:
            raise click.ClickException(
                f"no queue named {name!r} at {broker.url}; 'hailq queues' lists them, "
                "'hailq send --create' creates one") from None

    def topic(self, broker: hailq.Broker, name: str) -> hailq.Topic:
        """An existing topic; a clear error when it was never declared."""
        if name not in {t.name for t in broker.topics()}:
            raise click.ClickException(
                f"no topic named {name!r} at {broker.url}; 'hailq topics' lists them, "
                "'hailq subscribe' creates one")
        return hailq.Topic(broker, name)  # not broker.topic(): that would write


def _quiet_driver_logs() -> None:
    """Keep the database driver's retry warnings off the operator's screen.

    A failed connection already ends in one ``hailq: error:`` line; psycopg's pool
    would add a warning per retry. Only the operator commands do this: the worker
    configures logging for itself.
    """
    driver = logging.getLogger("psycopg")
    driver.propagate = False
    if not driver.handlers:
        driver.addHandler(logging.NullHandler())


def current_app() -> App:
    """The ``App`` of the running command, from the options given on the command line."""
    url = given_url()
    if url == "":
        raise click.BadParameter("the broker URL is empty (an unset variable?); give "
                                 "sqlite:///path.db or postgresql://...",
                                 param_hint="--url" if _URL_KEY in
                                 click.get_current_context().meta else ENV_URL)
    return App(url=DEFAULT_URL if url is None else url, out=Output(json_requested()))
