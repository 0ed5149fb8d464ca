"""``hailq worker TARGET``: run handlers over queues until SIGTERM (SPEC rules 18 and 23).

Registered by ``hailq.cli.main``; also runnable alone as ``python -m hailq.cli.worker``.
"""

from __future__ import annotations

import sys

import click

import hailq
from hailq.cli.context import Finite, current_app, log_options
from hailq.runtime import logs
from hailq.runtime.order import ORDERS, OrderName, parse_weights
from hailq.runtime.supervisor import MAX_PROCESSES, ProcessPool, WorkerSpec
from hailq.url import parse_url

LOOPBACK = "127.0.0.1"  # --metrics-port PORT: reachable from this machine only


@click.command("worker")
@click.argument("target")
@click.option("--queue", "-q", "queues", multiple=True, metavar="Q",
              help="A queue to consume; repeat for several. Each queue with ready work "
                   "gets its turn (round-robin) unless --order strict is given. Default: "
                   "every queue of the app.")
@click.option("--order", type=click.Choice(ORDERS), default=None,
              help="How several queues share the slots: round-robin (the default; no queue "
                   "starves) or strict (drain the first queue, then the next; later queues "
                   "wait while an earlier one has work).")
@click.option("--weights", metavar="Q=N,...",
              help="Share slots among queues by weight instead, e.g. high=3,low=1.")
@click.option("--concurrency", "-c", type=click.IntRange(1, 1000), default=1, show_default=True,
              help="Handlers running at once (threads, or processes with --pool process: "
                   "at most 256).")
@click.option("--pool", type=click.Choice(["thread", "process"]), default="thread",
              show_default=True, help="Run handlers in threads of one process, or in child "
                                      "processes (one thread each) under a supervisor.")
@click.option("--grace", type=Finite(0, 86400), default=30.0, show_default=True,
              help="Seconds in-flight handlers may finish after SIGTERM/SIGINT before their "
                   "messages are given back.")
@click.option("--poll", type=Finite(0.01, 60), default=1.0, show_default=True,
              help="Longest single long-poll wait in seconds (wake-ups come sooner).")
@click.option("--metrics-port", "metrics", metavar="[HOST:]PORT",
              help="Serve this process's own series (handler time, slots busy) at /metrics "
                   "and answer probes at /healthz (loops run) and /readyz (takes work) on "
                   "PORT of 127.0.0.1, or of HOST when given (0.0.0.0:PORT for every "
                   "interface, as probes from outside a container need). Queue-wide figures "
                   "come from 'hailq metrics'. With --pool process the supervisor serves "
                   "the sum of its children's series.")
@click.option("--time-limit", type=Finite(0.001, 7 * 86400), default=None, metavar="SECONDS",
              help="Fail an attempt whose handler runs longer than this (a retry, dead after "
                   "the last attempt); for handlers without a time_limit of their own. "
                   "Default: no limit.")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"],
                                               case_sensitive=False),
              default="INFO", show_default=True)
@click.option("--no-scheduler", "no_scheduler", is_flag=True,
              help="Do not send periodic messages from this worker (by default every "
                   "worker runs a scheduler; each slot is sent once however many run).")
@log_options
def worker_command(target: str, queues: tuple[str, ...], weights: str | None,
                   concurrency: int, pool: str, grace: float, poll: float,
                   metrics: str | None, time_limit: float | None, log_level: str,
                   no_scheduler: bool, order: OrderName | None) -> int:
    """Run the handlers of TARGET (module:function or module:app) until stopped.

    A handler takes the received message. It acks by returning, nacks with the
    queue's backoff by raising (hailq.Retry(delay=...) picks the delay,
    hailq.DeadLetter(reason) dead-letters it now). Leases are renewed while a
    handler runs. A slot asks for work only when it is free. SIGTERM or SIGINT
    stops receiving, lets in-flight handlers finish within --grace, gives the
    rest back and exits 0; a second signal gives back at once. A handler past
    its time limit (--time-limit, or its own time_limit) fails that attempt.
    With --json the log is written as JSON lines.
    """
    if queues and weights:
        raise click.UsageError("give --queue or --weights, not both")
    if order and weights:
        raise click.UsageError("give --order or --weights, not both (weights set the order)")
    try:
        weight_map = parse_weights(weights) if weights else {}
    except hailq.InvalidArgument as exc:
        raise click.BadParameter(str(exc), param_hint="--weights") from None
    address = metrics_address(metrics) if metrics is not None else None
    app = current_app()
    url = worker_url(app.url)
    level = log_level.upper()
    logs.configure(level, json_lines=app.out.json)
    spec = WorkerSpec(url=url, target=target, queues=queues, weights=weight_map, order=order,
                      concurrency=1 if pool == "process" else concurrency, grace=grace,
                      poll=poll, log_level=level, json_logs=app.out.json,
                      time_limit=time_limit, scheduler=not no_scheduler, metrics=address)
    if pool == "process":
        if concurrency > MAX_PROCESSES:
            raise click.BadParameter(f"at most {MAX_PROCESSES} with --pool process (one "
                                     f"process each), got {concurrency}",
                                     param_hint="--concurrency")
        return ProcessPool(spec, concurrency).run()
    spec.handlers()  # import and check before connecting
    spec.run()
    return 0


def metrics_address(value: str) -> tuple[str, int]:
    """``PORT`` (loopback only, as everything hailq serves unless told otherwise) or
    ``HOST:PORT``; BadParameter otherwise."""
    host, _, port = value.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(f"give PORT or HOST:PORT, such as 9465, got {value!r}",
                                 param_hint="--metrics-port")
    return host.strip("[]") or LOOPBACK, int(port)


def worker_url(url: str) -> str:
    """The broker URL a worker uses; a bad URL fails here, before any process starts."""
    parse_url(url)
    return url


def main(args: list[str] | None = None) -> int:
    """Run the worker command alone (``python -m hailq.cli.worker``); return the exit code."""
    from hailq.cli.failure import run_safely

    argv = list(sys.argv[1:] if args is None else args)

    def invoke() -> int:
        result = worker_command.main(args=argv, prog_name="hailq worker",
                                     standalone_mode=False)
        return result if isinstance(result, int) else 0

    return run_safely(invoke, argv)


if __name__ == "__main__":
    sys.exit(main())
